"""Describes a converted dataset split: where its records are, how many, how to decode.

`get_dataset(name, split_name, dataset_dir)` returns a DatasetDescriptor. Sizes,
class counts, label names and the exact shard files come from the
<name>_dataset.json our converters write, one per dataset name, so several
datasets can share a directory without mixing. Opening a split checks every
shard's byte size and digest against it: a truncated or replaced shard stops
with one line naming it. Records written by TF-Slim's original converters (no
metadata) get the published counts and TF-Slim's labels.txt. The file patterns
match TF-Slim's file names and ours alike, e.g. 'mnist_%s*.tfrecord' matches
mnist_train.tfrecord (TF-Slim's, and ours with one shard) and
mnist_train-00000-of-00002.tfrecord.

Decoding follows TF-Slim's decoders: image/format 'raw' (or 'RAW') is a uint8
buffer of image/height x image/width x channels; every other value ('png',
'jpeg', 'jpg', 'JPEG') is decoded from the bytes themselves. ImageNet's
image/object/bbox/{ymin,xmin,ymax,xmax} become the [1, N, 4] boxes that
inception preprocessing samples its crops around.
"""
import dataclasses
import functools
import os
from typing import Callable, Dict, Optional, Tuple

import tf_compat  # noqa: F401
import zoo_errors
import tensorflow as tf

from datasets import dataset_utils


@dataclasses.dataclass(frozen=True)
class DatasetDescriptor:
  """What a reader needs to know about one split of a converted dataset."""
  name: str
  split_name: str
  file_pattern: str  # absolute glob of the split's record files
  num_samples: int
  num_classes: int
  labels_to_names: Dict[int, str]  # from the metadata or labels.txt; may be empty
  channels: int  # of the decoded images
  decoder: Callable  # scalar serialized Example -> (uint8 [H, W, channels], int64 label)
  files: Tuple[str, ...] = ()  # the split's shards, when the metadata lists them
  shards: Tuple[dict, ...] = ()  # their metadata: file, bytes, records, digest
  has_boxes: bool = False  # records may hold image/object/bbox/*
  box_decoder: Optional[Callable] = None  # serialized -> (image, label, [1, N, 4] boxes)


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
  """The fixed facts of one dataset; converters write what readers read here."""
  read_pattern: str  # '%s' is the split name
  shard_pattern: str  # '%s' split, then shard index and count
  published_sizes: Dict[str, Optional[int]]  # used when there is no splits.json
  num_classes: Optional[int]
  channels: int
  image_size: Optional[Tuple[int, int]] = None  # (height, width) when fixed
  single_shard_pattern: Optional[str] = None  # TF-Slim's name of a one-file split
  has_boxes: bool = False

  def shard_filename(self, split_name, shard, num_shards):
    if num_shards == 1 and self.single_shard_pattern:
      return self.single_shard_pattern % split_name
    return self.shard_pattern % (split_name, shard, num_shards)


DATASETS = {
    'mnist': DatasetSpec('mnist_%s*.tfrecord', 'mnist_%s-%05d-of-%05d.tfrecord',
                         {'train': 60000, 'test': 10000}, 10, 1, (28, 28),
                         single_shard_pattern='mnist_%s.tfrecord'),
    'cifar10': DatasetSpec('cifar10_%s*.tfrecord', 'cifar10_%s-%05d-of-%05d.tfrecord',
                           {'train': 50000, 'test': 10000}, 10, 3, (32, 32),
                           single_shard_pattern='cifar10_%s.tfrecord'),
    'flowers': DatasetSpec('flowers_%s_*.tfrecord', 'flowers_%s_%05d-of-%05d.tfrecord',
                           {'train': 3320, 'validation': 350}, 5, 3),
    # Label 0 is 'background', as in TF-Slim's ImageNet checkpoints (1001 logits).
    'imagenet': DatasetSpec('%s-*', '%s-%05d-of-%05d',
                            {'train': 1281167, 'validation': 50000}, 1001, 3,
                            has_boxes=True),
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
    raise ValueError(zoo_errors.unknown_name_message('dataset_name', name, DATASETS))
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


def verify_shards(descriptor, digests=True):
  """Raises ValueError naming the first shard of `descriptor` that is missing,
  or differs in size (or digest) from what its conversion recorded."""
  directory = os.path.dirname(descriptor.file_pattern)
  for shard in descriptor.shards:
    path = os.path.join(directory, shard['file'])
    hint = ('; convert %s again (download_and_convert_data.py --dataset_name=%s)'
            % (descriptor.name, descriptor.name))
    if not tf.io.gfile.exists(path):
      raise ValueError('shard %s of %s %s is missing%s'
                       % (path, descriptor.name, descriptor.split_name, hint))
    size = tf.io.gfile.stat(path).length
    if size != shard['bytes']:
      raise ValueError('shard %s is %s: %d bytes, its conversion wrote %d%s' % (
          path, 'truncated' if size < shard['bytes'] else 'altered', size,
          shard['bytes'], hint))
    if digests and '://' not in path and (
        dataset_utils.shard_digest(path) != shard['digest']):
      raise ValueError('shard %s was replaced or altered since its conversion '
                       '(same size, other contents)%s' % (path, hint))


def _labels_file_is_foreign(dataset_dir, name):
  """True when labels.txt is the label file of another converted dataset."""
  labels = dataset_utils.read_label_file(dataset_dir)
  for other in DATASETS:
    if other != name:
      content = dataset_utils.read_metadata(dataset_dir, other)
      if content is not None and dataset_utils.metadata_labels(content) == labels:
        return True
  return False


def get_dataset(name, split_name, dataset_dir, file_pattern=None):
  """Describes split `split_name` of dataset `name` converted into `dataset_dir`.

  Raises ValueError naming the culprit for an unknown name or split, a missing
  directory, a pattern no file matches, sizes that cannot be known, or a shard
  that is not the one its conversion wrote.
  """
  spec = get_spec(name)
  _check_split(name, spec, split_name)
  dataset_dir = dataset_utils.expand_path(dataset_dir)
  if not tf.io.gfile.isdir(dataset_dir):
    raise ValueError("dataset_dir '%s' does not exist; %s"
                     % (dataset_dir, _conversion_hint(name, dataset_dir)))
  pattern = split_file_pattern(name, split_name, dataset_dir, file_pattern)
  metadata = dataset_utils.read_metadata(dataset_dir, name)
  files, shards = (), ()
  if metadata is not None:
    metadata_file = dataset_utils.metadata_path(dataset_dir, name)
    split = metadata['splits'].get(split_name)
    if split is None:
      raise ValueError("%s has no split '%s' (it has %s); %s" % (
          metadata_file, split_name, ', '.join(sorted(metadata['splits'])),
          _conversion_hint(name, dataset_dir)))
    num_samples, num_classes = split['num_samples'], metadata['num_classes']
    labels_to_names = dataset_utils.metadata_labels(metadata)
    directory = os.path.dirname(pattern)
    shards = tuple(split['shards'])
    files = tuple(os.path.join(directory, s['file']) for s in shards)
    if file_pattern:  # a subset the caller chose: of the shards we know
      chosen = set(tf.io.gfile.glob(pattern))
      shards = tuple(s for s, f in zip(shards, files) if f in chosen)
      files = tuple(f for f in files if f in chosen)
      num_samples = sum(s['records'] for s in shards)
    if not files:
      raise ValueError("no files match '%s' (dataset '%s', split '%s'); %s"
                       % (pattern, name, split_name, _conversion_hint(name, dataset_dir)))
  else:
    if tf.io.gfile.exists(os.path.join(dataset_dir, '.%s-conversion.json' % name)):
      # Ours, without metadata: unfinished, or from a version that wrote none
      # (its splits.json). A rerun keeps the shards and adds the metadata.
      legacy = tf.io.gfile.exists(os.path.join(dataset_dir,
                                               dataset_utils.SPLITS_FILENAME))
      raise ValueError('the conversion of %s into %s %s (no %s); %s' % (
          name, dataset_dir,
          'was made by an earlier version' if legacy else 'did not finish',
          os.path.basename(dataset_utils.metadata_path(dataset_dir, name)),
          _conversion_hint(name, dataset_dir).replace(' first', ' again')))
    if not tf.io.gfile.glob(pattern):
      raise ValueError("no files match '%s' (dataset '%s', split '%s'); %s"
                       % (pattern, name, split_name, _conversion_hint(name, dataset_dir)))
    num_samples, num_classes = spec.published_sizes[split_name], spec.num_classes
    if num_samples is None:
      raise ValueError('%s is missing, so the size of %s is unknown; %s' % (
          dataset_utils.metadata_path(dataset_dir, name), name,
          _conversion_hint(name, dataset_dir)))
    labels_to_names = {}
    if (dataset_utils.has_labels(dataset_dir)
        and not _labels_file_is_foreign(dataset_dir, name)):
      labels_to_names = dataset_utils.read_label_file(dataset_dir)

  decoder = functools.partial(decode_example, channels=spec.channels,
                              image_size=spec.image_size)
  descriptor = DatasetDescriptor(
      name=name, split_name=split_name, file_pattern=pattern,
      num_samples=int(num_samples), num_classes=int(num_classes),
      labels_to_names=labels_to_names, channels=spec.channels,
      decoder=decoder, files=files, shards=shards, has_boxes=spec.has_boxes,
      box_decoder=functools.partial(decoder, with_boxes=True) if spec.has_boxes
      else None)
  verify_shards(descriptor)
  return descriptor


_FEATURES = {
    'image/encoded': tf.io.FixedLenFeature((), tf.string),
    'image/format': tf.io.FixedLenFeature((), tf.string, default_value=''),
    'image/height': tf.io.FixedLenFeature((), tf.int64, default_value=0),
    'image/width': tf.io.FixedLenFeature((), tf.int64, default_value=0),
    'image/class/label': tf.io.FixedLenFeature((), tf.int64),
}
_BOX_KEYS = ('ymin', 'xmin', 'ymax', 'xmax')  # the order of TF's box ops
_BOX_FEATURES = {'image/object/bbox/%s' % k: tf.io.VarLenFeature(tf.float32)
                 for k in _BOX_KEYS}


def decode_example(serialized, channels, image_size=None, with_boxes=False):
  """Scalar serialized Example -> (uint8 image [H, W, channels], int64 label)
  and, `with_boxes`, the [1, N, 4] float boxes (N may be 0).

  'raw' images are reshaped with image/height and image/width (or the
  dataset's fixed size); other formats are decoded from their bytes, so
  TF-Slim's 'JPEG', 'jpg' and our 'jpeg' all read.
  """
  features = dict(_FEATURES, **(_BOX_FEATURES if with_boxes else {}))
  parsed = tf.io.parse_single_example(serialized, features)
  encoded = parsed['image/encoded']
  image_format = tf.strings.lower(parsed['image/format'])

  def raw():
    height, width = parsed['image/height'], parsed['image/width']
    if image_size:
      height = tf.where(height > 0, height, image_size[0])
      width = tf.where(width > 0, width, image_size[1])
    return tf.reshape(tf.io.decode_raw(encoded, tf.uint8),
                      tf.stack([height, width, channels]))

  def compressed():
    return tf.io.decode_image(encoded, channels=channels, dtype=tf.uint8,
                              expand_animations=False)

  image = tf.cond(tf.equal(image_format, 'raw'), raw, compressed)
  if image_size:
    # Fixed-size datasets get a full static shape (checked at run time).
    image = tf.ensure_shape(image, tuple(image_size) + (channels,))
  else:
    image.set_shape([None, None, channels])
  if not with_boxes:
    return image, parsed['image/class/label']
  coordinates = [tf.sparse.to_dense(parsed['image/object/bbox/%s' % k])
                 for k in _BOX_KEYS]
  boxes = tf.expand_dims(tf.stack(coordinates, axis=1), 0)  # [1, N, 4]
  return image, parsed['image/class/label'], boxes
