"""The datasets' factory: the built-in dataset modules, and descriptors of splits.

The built-in datasets are the modules imported below, each registering itself
(datasets/registry.py); `get_info(name)` also imports a user's dataset module
by name. `get_dataset(name, split_name, dataset_dir)` returns a
DatasetDescriptor of one split:

- of a dataset converted here: sizes, class counts, label names and the exact
  shard files come from the <name>_dataset.json our converters write, one per
  dataset name, so several datasets can share a directory without mixing.
  Opening a split checks every shard's byte size and digest against it: a
  truncated or replaced shard stops with one line naming it. Records written
  by TF-Slim's original converters (no metadata) get the published counts and
  TF-Slim's labels.txt. The file patterns match TF-Slim's file names and ours
  alike, e.g. 'mnist_%s*.tfrecord' matches mnist_train.tfrecord (TF-Slim's,
  and ours with one shard) and mnist_train-00000-of-00002.tfrecord;
- of a TF-Slim dataset module: what its `get_split` returns (a
  `slim.dataset.Dataset`): its data_sources, num_samples, num_classes,
  labels_to_names, and its decoder, which decodes each serialized record
  inside the tf.data pipeline (reader.py) as DatasetDataProvider would.

Decoding of converted records follows TF-Slim's decoders: image/format 'raw'
(or 'RAW') is a uint8 buffer of image/height x image/width x channels; every
other value ('png', 'jpeg', 'jpg', 'JPEG') is decoded from the bytes
themselves. ImageNet's image/object/bbox/{ymin,xmin,ymax,xmax} become the
[1, N, 4] boxes that inception preprocessing samples its crops around.
"""
import dataclasses
import functools
import os
from typing import Callable, Dict, Optional, Tuple

import tf_compat  # noqa: F401
import zoo_errors
import zoo_plugins
import tensorflow as tf

from datasets import dataset_utils
from datasets import registry
# The built-in datasets; each module registers itself.
from datasets import cifar10  # noqa: F401,E402  pylint: disable=unused-import
from datasets import digits  # noqa: F401  pylint: disable=unused-import
from datasets import flowers  # noqa: F401  pylint: disable=unused-import
from datasets import image_folder  # noqa: F401  pylint: disable=unused-import
from datasets import imagenet  # noqa: F401  pylint: disable=unused-import
from datasets import mnist  # noqa: F401  pylint: disable=unused-import


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


def get_info(name):
  """The DatasetInfo of `name`: a registered dataset, or else a Python module
  of that name (importable from the current directory or PYTHONPATH) that
  registers one when imported, or is a TF-Slim dataset module (it has
  `get_split`; registered here under `name`). Raises ValueError naming the
  known datasets."""
  info = registry.find(name)
  if info is not None:
    return info
  module = zoo_plugins.import_user_module(name, 'dataset')
  if module is None:
    raise ValueError(unknown_dataset_message(name))
  info = registry.find(name)
  if info is None:
    own = registry.registered_by(module.__name__)
    if len(own) == 1:
      info = own[0]
    elif own:
      raise ValueError(
          "module '%s' registers several datasets (%s): pass one of their "
          'names as --dataset_name' % (name, ', '.join(i.name for i in own)))
    elif callable(getattr(module, 'get_split', None)):
      info = registry.register_dataset(
          name, get_split=module.get_split,
          splits=getattr(module, 'SPLITS_TO_SIZES', None),
          num_classes=getattr(module, '_NUM_CLASSES', None),
          module=module.__name__)
    else:
      raise ValueError(
          "module '%s' (%s) registers no dataset and has no get_split" % (
              name, getattr(module, '__file__', '')))
  return info


def unknown_dataset_message(name):
  """`unknown dataset_name 'x'; did you mean 'y'? (known: ...; or ...)`."""
  message = zoo_errors.unknown_name_message('dataset_name', name,
                                           registry.names())
  return message[:-1] + '; or a dataset module on the Python path)'


def list_datasets(pattern='*'):
  return registry.names(pattern)


def split_file_pattern(name, split_name, dataset_dir, file_pattern=None):
  """Absolute glob of a split's records; `file_pattern` may hold '%s' for the split."""
  info = get_info(name)
  info.check_split(split_name)
  pattern = file_pattern or info.read_pattern
  if '%s' in pattern:
    pattern = pattern % split_name
  pattern = os.path.join(dataset_dir, pattern)
  return pattern if '://' in pattern else os.path.abspath(pattern)


def dataset_classes(name, dataset_dir=None):
  """(classes or None, {label: name}, channels) of dataset `name` as a whole:
  from its conversion's metadata in `dataset_dir`, else its registration (and
  labels.txt there, unless another dataset's conversion wrote it); a TF-Slim
  dataset module's from what its get_split returns for its first split."""
  info = get_info(name)
  if info.get_split is not None:
    if not dataset_dir:
      return info.num_classes, {}, 3
    split = sorted(info.splits)[0] if info.splits else 'train'
    descriptor = _tf_slim_split(info, split, dataset_dir)
    return descriptor.num_classes, descriptor.labels_to_names, descriptor.channels
  if not dataset_dir:
    return info.num_classes, {}, info.channels
  metadata = dataset_utils.read_metadata(dataset_dir, info.name)
  if metadata is not None:
    return (metadata['num_classes'], dataset_utils.metadata_labels(metadata),
            info.channels)
  labels = {}
  if dataset_utils.has_labels(dataset_dir):
    files = [f for split in info.splits for f in tf.io.gfile.glob(
        split_file_pattern(info.name, split, dataset_dir))]
    if not _labels_file_is_foreign(dataset_dir, info.name, files):
      labels = dataset_utils.read_label_file(dataset_dir)
  return info.num_classes, labels, info.channels


def _conversion_hint(name, dataset_dir):
  hint = registry.lookup(name).source_hint
  source = ' --source_dir=%s' % hint if hint else ''
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


def _labels_file_is_foreign(dataset_dir, name, files):
  """True when labels.txt is the label file another dataset's conversion
  wrote there for records other than `files` (the ones being read)."""
  labels = dataset_utils.read_label_file(dataset_dir)
  for other in registry.names():
    content = dataset_utils.read_metadata(dataset_dir, other)
    if (other == name or content is None or
        dataset_utils.metadata_labels(content) != labels):
      continue
    theirs = {os.path.join(dataset_dir, shard['file'])
              for split in content['splits'].values()
              for shard in split.get('shards', ())}
    if not theirs & {os.path.join(dataset_dir, os.path.basename(f))
                     for f in files}:
      return True
  return False


def get_dataset(name, split_name, dataset_dir, file_pattern=None):
  """Describes split `split_name` of dataset `name` converted into `dataset_dir`.

  Raises ValueError naming the culprit for an unknown name or split, a missing
  directory, a pattern no file matches, sizes that cannot be known, or a shard
  that is not the one its conversion wrote.
  """
  info = get_info(name)
  name = info.name
  info.check_split(split_name)
  dataset_dir = dataset_utils.expand_path(dataset_dir)
  if info.get_split is not None:
    return _tf_slim_split(info, split_name, dataset_dir, file_pattern)
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
    matched = tf.io.gfile.glob(pattern)
    if not matched:
      raise ValueError("no files match '%s' (dataset '%s', split '%s'); %s"
                       % (pattern, name, split_name, _conversion_hint(name, dataset_dir)))
    num_samples, num_classes = info.splits[split_name], info.num_classes
    if num_samples is None:
      raise ValueError('%s is missing, so the size of %s is unknown; %s' % (
          dataset_utils.metadata_path(dataset_dir, name), name,
          _conversion_hint(name, dataset_dir)))
    labels_to_names = {}
    if (dataset_utils.has_labels(dataset_dir)
        and not _labels_file_is_foreign(dataset_dir, name, matched)):
      labels_to_names = dataset_utils.read_label_file(dataset_dir)

  decoder = functools.partial(decode_example, channels=info.channels,
                              image_size=info.image_size)
  descriptor = DatasetDescriptor(
      name=name, split_name=split_name, file_pattern=pattern,
      num_samples=int(num_samples), num_classes=int(num_classes),
      labels_to_names=labels_to_names, channels=info.channels,
      decoder=decoder, files=files, shards=shards, has_boxes=info.has_boxes,
      box_decoder=functools.partial(decoder, with_boxes=True) if info.has_boxes
      else None)
  verify_shards(descriptor)
  return descriptor


def _tf_slim_split(info, split_name, dataset_dir, file_pattern=None):
  """The descriptor of what a TF-Slim dataset module's get_split returns.

  get_split is called in a graph of its own here, to read its facts, and
  again inside the pipeline's decoding function, so the tensors it makes
  (feature defaults, the decoder's ops) belong to the graph that uses them.
  """
  where = '%s.get_split' % (info.module or info.name)
  if not tf.io.gfile.isdir(dataset_dir):
    raise ValueError("dataset_dir '%s' does not exist (dataset '%s' reads "
                     'records that %s describes)' % (dataset_dir, info.name, where))

  def get_split():
    return info.get_split(split_name, dataset_dir, file_pattern)

  with tf.Graph().as_default():
    dataset = get_split()
    missing = {'image', 'label'} - set(dataset.decoder.list_items())
    if missing:
      raise ValueError('%s: its decoder has no %s item (it has: %s)' % (
          where, ' or '.join(sorted(missing)),
          ', '.join(sorted(dataset.decoder.list_items()))))
    image, _ = dataset.decoder.decode(
        tf.compat.v1.placeholder(tf.string, []), ['image', 'label'])
  channels = image.shape[-1] if image.shape.rank else None
  sources = dataset.data_sources
  sources = [sources] if isinstance(sources, str) else list(sources)
  files = sorted({f for s in sources for f in tf.io.gfile.glob(s)})
  if not files:
    raise ValueError("no files match '%s' (dataset '%s', split '%s', from %s)"
                     % (', '.join(sources), info.name, split_name, where))
  num_classes = getattr(dataset, 'num_classes', None) or info.num_classes
  if not num_classes:
    raise ValueError('%s returns a Dataset without num_classes: pass '
                     'num_classes= to slim.dataset.Dataset' % where)

  def decoder(serialized):
    image, label = get_split().decoder.decode(serialized, ['image', 'label'])
    return image, tf.reshape(tf.cast(label, tf.int64), [])

  return DatasetDescriptor(
      name=info.name, split_name=split_name,
      file_pattern=os.path.abspath(sources[0]), num_samples=int(dataset.num_samples),
      num_classes=int(num_classes),
      labels_to_names=dict(getattr(dataset, 'labels_to_names', None) or {}),
      channels=int(channels or 3), decoder=decoder, files=tuple(files))


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
