"""Describes a converted dataset split: where its records are, how many, how to decode.

`get_dataset(name, split_name, dataset_dir)` returns a DatasetDescriptor. Sizes
and class counts come from the splits.json our converters write; records written
by TF-Slim's original converters (no splits.json) get the published counts. The
file patterns match TF-Slim's file names and our sharded ones alike, e.g.
'mnist_%s*.tfrecord' matches mnist_train.tfrecord and
mnist_train-00000-of-00002.tfrecord.
"""
import dataclasses
import functools
import os
from typing import Callable, Dict, Optional, Tuple

import tf_compat  # noqa: F401
import tensorflow as tf

from datasets import dataset_utils
from nets import registry


@dataclasses.dataclass(frozen=True)
class DatasetDescriptor:
  """What a reader needs to know about one split of a converted dataset."""
  name: str
  split_name: str
  file_pattern: str  # absolute glob of the split's record files
  num_samples: int
  num_classes: int
  labels_to_names: Dict[int, str]  # from labels.txt; empty when there is none
  channels: int  # of the decoded images
  decoder: Callable  # scalar serialized Example -> (uint8 [H, W, channels], int64 label)


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
  """The fixed facts of one dataset; converters write what readers read here."""
  read_pattern: str  # '%s' is the split name
  shard_pattern: str  # '%s' split, then shard index and count
  published_sizes: Dict[str, Optional[int]]  # used when there is no splits.json
  num_classes: Optional[int]
  channels: int
  image_size: Optional[Tuple[int, int]] = None  # (height, width) when fixed

  def shard_filename(self, split_name, shard, num_shards):
    return self.shard_pattern % (split_name, shard, num_shards)


DATASETS = {
    'mnist': DatasetSpec('mnist_%s*.tfrecord', 'mnist_%s-%05d-of-%05d.tfrecord',
                         {'train': 60000, 'test': 10000}, 10, 1, (28, 28)),
    'cifar10': DatasetSpec('cifar10_%s*.tfrecord', 'cifar10_%s-%05d-of-%05d.tfrecord',
                           {'train': 50000, 'test': 10000}, 10, 3, (32, 32)),
    'flowers': DatasetSpec('flowers_%s_*.tfrecord', 'flowers_%s_%05d-of-%05d.tfrecord',
                           {'train': 3320, 'validation': 350}, 5, 3),
    # Label 0 is 'background', as in TF-Slim's ImageNet checkpoints (1001 logits).
    'imagenet': DatasetSpec('%s-*', '%s-%05d-of-%05d',
                            {'train': 1281167, 'validation': 50000}, 1001, 3),
    'digits': DatasetSpec('digits_%s-*.tfrecord', 'digits_%s-%05d-of-%05d.tfrecord',
                          {'train': 1437, 'validation': 360}, 10, 1, (8, 8)),
    # Sizes depend on the folder: only splits.json can tell them.
    'image_folder': DatasetSpec('image_folder_%s-*.tfrecord',
                                'image_folder_%s-%05d-of-%05d.tfrecord',
                                {'train': None, 'validation': None}, None, 3),
}


def names():
  return sorted(DATASETS)


def get_spec(name):
  if name not in DATASETS:
    raise ValueError(registry.unknown_name_message('dataset_name', name, DATASETS))
  return DATASETS[name]


def _check_split(name, spec, split_name):
  if split_name not in spec.published_sizes:
    raise ValueError("unknown split_name '%s' for dataset '%s' (valid: %s)"
                     % (split_name, name, ', '.join(sorted(spec.published_sizes))))


def split_file_pattern(name, split_name, dataset_dir, file_pattern=None):
  """Absolute glob of a split's records; `file_pattern` may hold '%s' for the split."""
  spec = get_spec(name)
  _check_split(name, spec, split_name)
  pattern = file_pattern or spec.read_pattern
  if '%s' in pattern:
    pattern = pattern % split_name
  pattern = os.path.join(dataset_dir, pattern)
  return pattern if '://' in pattern else os.path.abspath(pattern)


def _conversion_hint(name, dataset_dir):
  source = (' --source_dir=<folder of class sub-folders>'
            if name == 'image_folder' else '')
  return ('run download_and_convert_data.py --dataset_name=%s --dataset_dir=%s%s first'
          % (name, dataset_dir, source))


def get_dataset(name, split_name, dataset_dir, file_pattern=None):
  """Describes split `split_name` of dataset `name` converted into `dataset_dir`.

  Raises ValueError naming the culprit for an unknown name or split, a missing
  directory, a pattern no file matches, or sizes that cannot be known.
  """
  spec = get_spec(name)
  _check_split(name, spec, split_name)
  if not tf.io.gfile.isdir(dataset_dir):
    raise ValueError("dataset_dir '%s' does not exist; %s"
                     % (dataset_dir, _conversion_hint(name, dataset_dir)))
  pattern = split_file_pattern(name, split_name, dataset_dir, file_pattern)
  if not tf.io.gfile.glob(pattern):
    raise ValueError("no files match '%s' (dataset '%s', split '%s'); %s"
                     % (pattern, name, split_name, _conversion_hint(name, dataset_dir)))

  splits = dataset_utils.read_splits_file(dataset_dir)
  if splits is not None:
    if split_name not in splits:
      raise ValueError("%s has no split '%s'; %s" % (
          os.path.join(dataset_dir, dataset_utils.SPLITS_FILENAME), split_name,
          _conversion_hint(name, dataset_dir)))
    num_samples, num_classes = splits[split_name], splits['num_classes']
  else:
    num_samples, num_classes = spec.published_sizes[split_name], spec.num_classes
    if num_samples is None:
      raise ValueError('%s is missing, so the size of %s is unknown; %s' % (
          os.path.join(dataset_dir, dataset_utils.SPLITS_FILENAME), name,
          _conversion_hint(name, dataset_dir)))

  labels_to_names = (dataset_utils.read_label_file(dataset_dir)
                     if dataset_utils.has_labels(dataset_dir) else {})
  return DatasetDescriptor(
      name=name, split_name=split_name, file_pattern=pattern,
      num_samples=int(num_samples), num_classes=int(num_classes),
      labels_to_names=labels_to_names, channels=spec.channels,
      decoder=functools.partial(decode_example, channels=spec.channels,
                                image_size=spec.image_size))


_FEATURES = {
    'image/encoded': tf.io.FixedLenFeature((), tf.string),
    'image/class/label': tf.io.FixedLenFeature((), tf.int64),
}


def decode_example(serialized, channels, image_size=None):
  """Scalar serialized Example -> (uint8 image [H, W, channels], int64 label).

  decode_image reads the format from the bytes themselves, so image/format is
  not needed (TF-Slim's ImageNet records spell it 'JPEG', ours 'jpeg').
  """
  features = tf.io.parse_single_example(serialized, _FEATURES)
  image = tf.io.decode_image(features['image/encoded'], channels=channels,
                             dtype=tf.uint8, expand_animations=False)
  if image_size:
    # Fixed-size datasets get a full static shape (checked at run time).
    image = tf.ensure_shape(image, tuple(image_size) + (channels,))
  else:
    image.set_shape([None, None, channels])
  return image, features['image/class/label']
