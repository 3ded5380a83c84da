"""The datasets' factory: the built-in dataset modules, and one split of each.

The built-in datasets are the modules imported below, each registering itself
(datasets/registry.py); `get_info(name)` also imports a user's dataset module
by name. `get_dataset(name, split_name, dataset_dir)` returns a `Dataset`,
which is TF-Slim's `slim.dataset.Dataset` (so TF-Slim's
`DatasetDataProvider(get_dataset(...))` reads it with queues) and carries what
the project's tf.data reader (reader.py) needs; both read with its decoder.
As TF-Slim's, get_dataset reads no record: the records are checked when
they are first read (`Dataset.check_files`, which both readers call, and the
scripts before they start), so a network's classes are known without its
data. A split is described

- of a dataset converted here: sizes, class counts, label names and the exact
  shard files come from the <name>_dataset.json our converters write, one per
  dataset name, so several datasets can share a directory without mixing.
  The first read of a split checks every shard's byte size and digest against
  it: a truncated or replaced shard stops with one line naming it. Records written
  by TF-Slim's original converters (no metadata) get the published counts and
  TF-Slim's labels.txt. The file patterns match TF-Slim's file names and ours
  alike, e.g. 'mnist_%s*.tfrecord' matches mnist_train.tfrecord (TF-Slim's,
  and ours with one shard) and mnist_train-00000-of-00002.tfrecord;
- of a TF-Slim dataset module: what its `get_split` returns, checked (its
  decoder has 'image' and 'label', it knows num_classes; its files exist,
  when read).

Decoding of converted records follows TF-Slim's decoders: image/format 'raw'
(or 'RAW') is a uint8 buffer of image/height x image/width x channels; every
other value ('png', 'jpeg', 'jpg', 'JPEG') is decoded from the bytes
themselves. ImageNet's image/object/bbox/{ymin,xmin,ymax,xmax} become the
[1, N, 4] boxes that inception preprocessing samples its crops around.
"""
import copy
import dataclasses
import fnmatch
import functools
import os

import tf_compat  # noqa: F401
import zoo_errors
import zoo_plugins
import tensorflow as tf
import tf_slim as slim

from datasets import dataset_utils
from datasets import registry
# The built-in datasets; each module registers itself.
from datasets import cifar10  # noqa: F401,E402  pylint: disable=unused-import
from datasets import digits  # noqa: F401  pylint: disable=unused-import
from datasets import flowers  # noqa: F401  pylint: disable=unused-import
from datasets import image_folder  # noqa: F401  pylint: disable=unused-import
from datasets import imagenet  # noqa: F401  pylint: disable=unused-import
from datasets import mnist  # noqa: F401  pylint: disable=unused-import
from datasets import visualwakewords  # noqa: F401  pylint: disable=unused-import


class Dataset(slim.dataset.Dataset):
  """One split of a dataset: TF-Slim's `slim.dataset.Dataset` itself, so
  TF-Slim's `DatasetDataProvider(get_dataset(...))` reads it, and also what
  the project's tf.data reader (reader.py) uses. One description, read two
  ways; both decode with the same `decoder`.

  TF-Slim's fields: data_sources (the split's record files), reader
  (`tf.compat.v1.TFRecordReader`), decoder (a `TFExampleDecoder` with the
  items 'image', 'label' and, where the records may hold boxes,
  'object/bbox'; also callable as this project's earlier decoder,
  `decoder(serialized) -> (image, label)`), num_samples,
  items_to_descriptions, num_classes, labels_to_names. The reader's: name,
  split_name, file_pattern, files, shards (their sizes and digests, from the
  conversion's metadata), channels, image_size (fixed (height, width) or
  None), has_boxes, tf_slim_records (the records hold TF-Slim's keys, read
  by `example_decoder`; False for a TF-Slim dataset module's own decoder),
  and `decode(serialized)`.

  Made without reading the records, as TF-Slim's get_split is (num_classes
  is all an export needs); `data_sources` and `files`, what a reader asks
  for first, are `check_files()`: the records are checked when they are
  about to be read. Read-only, as a description of files on disk should be.
  """

  def __init__(self, *, name, split_name, file_pattern, num_samples,
               num_classes, labels_to_names, channels, decoder, files=(),
               shards=(), has_boxes=False, image_size=None,
               tf_slim_records=False, reader=None, items_to_descriptions=None,
               graph_decoder=None, list_files=None):
    items = items_to_descriptions or {'image': 'A color image of varying size.' if channels == 3 else
                      'A %d-channel image of varying size.' % channels,
             'label': 'A single integer between 0 and %d' % (num_classes - 1)}
    if has_boxes and not items_to_descriptions:
      items['object/bbox'] = 'A list of bounding boxes (ymin, xmin, ymax, xmax).'
    # A TF-Slim module's decoder holds tensors of the graph it was made in;
    # the reader asks for one made in its own graph.
    graph_decoder = graph_decoder or (lambda: decoder)
    # data_sources and files are properties (checked when read): what
    # TF-Slim's __init__ stores under those names is never seen.
    super().__init__(
        data_sources=file_pattern,
        reader=reader or tf.compat.v1.TFRecordReader,
        decoder=_callable_decoder(decoder, self.decode),
        num_samples=int(num_samples), items_to_descriptions=items,
        num_classes=int(num_classes), labels_to_names=dict(labels_to_names),
        name=name, split_name=split_name, file_pattern=file_pattern,
        shards=tuple(shards), channels=int(channels),
        has_boxes=bool(has_boxes),
        image_size=tuple(image_size) if image_size else None,
        tf_slim_records=bool(tf_slim_records),
        _graph_decoder=graph_decoder,
        _list_files=list_files or functools.partial(_declared_files,
                                                    files=tuple(files)),
        _checked={})

  def __setattr__(self, name, value):
    raise dataclasses.FrozenInstanceError(
        "cannot assign to field '%s' of dataset %s/%s" % (
            name, self.name, self.split_name))

  def check_files(self):
    """The split's record files, checked: raises ValueError naming the
    first culprit (a missing directory or shard, no file matching the
    pattern, an unfinished conversion, a shard truncated or replaced since
    its conversion). The first check of a Dataset compares each shard's
    size and digest with the conversion's metadata; later ones (another
    pipeline of the same Dataset) its size again, which is cheap."""
    files = self._list_files(self, digests='files' not in self._checked)
    self._checked['files'] = True
    return tuple(files)

  @property
  def files(self):
    """The split's record files (`check_files()`)."""
    return self.check_files()

  @property
  def data_sources(self):
    """TF-Slim's field, read by DatasetDataProvider and parallel_reader:
    the split's record files (`check_files()`)."""
    return list(self.check_files())

  def parse_encoded(self, serialized, with_boxes=False):
    """The record's features with TF-Slim's keys, the image undecoded:
    {'image/encoded', 'image/format', 'image/height', 'image/width',
    'image/class/label'} and, `with_boxes`, 'boxes' ([1, N, 4]). For
    `tf_slim_records` only (a TF-Slim module's keys are its own)."""
    if not self.tf_slim_records:
      raise ValueError('dataset %s/%s is read by its own decoder, not by '
                       "TF-Slim's keys" % (self.name, self.split_name))
    features = dict(_FEATURES, **(_BOX_FEATURES if with_boxes else {}))
    parsed = tf.io.parse_single_example(serialized, features)
    if with_boxes:
      parsed['boxes'] = tf.expand_dims(tf.stack(
          [tf.sparse.to_dense(parsed.pop('image/object/bbox/%s' % k))
           for k in _BOX_KEYS], axis=1), 0)
    return parsed

  def decode(self, serialized, with_boxes=False):
    """Scalar serialized Example -> (uint8 image [H, W, channels], int64
    label) and, `with_boxes`, the [1, N, 4] boxes (N may be 0): the decoder's
    items, as DatasetDataProvider would give them, built in the calling
    graph."""
    items = ['image', 'label'] + (['object/bbox'] if with_boxes else [])
    decoded = self._graph_decoder().decode(serialized, items)
    image, label = decoded[0], tf.reshape(tf.cast(decoded[1], tf.int64), [])
    if not with_boxes:
      return image, label
    return image, label, tf.expand_dims(decoded[2], 0)


class _CallableDecoder:
  """Makes a TF-Slim decoder also this project's earlier `Dataset.decoder`:
  `decoder(serialized, with_boxes=False) -> (image, label[, boxes])`, which
  is `Dataset.decode`."""

  def __call__(self, serialized, with_boxes=False):
    return self._dataset_decode(serialized, with_boxes)


_CALLABLE_CLASSES = {}


def _callable_decoder(decoder, decode):
  """`decoder` itself for what TF-Slim does with it (`decode`, `list_items`,
  isinstance and class name), and callable as `decode`: a shallow copy whose
  class is a subclass of its own, so a module's decoder object is left as
  it was."""
  cls = type(decoder)
  if cls not in _CALLABLE_CLASSES:
    _CALLABLE_CLASSES[cls] = type(cls.__name__, (_CallableDecoder, cls), {
        '__module__': cls.__module__, '__qualname__': cls.__qualname__,
        '__doc__': cls.__doc__})
  wrapped = copy.copy(decoder)
  wrapped.__class__ = _CALLABLE_CLASSES[cls]
  wrapped._dataset_decode = decode  # pylint: disable=protected-access
  return wrapped


def _declared_files(dataset, digests, files):
  """The files a Dataset was made with (checked against its shards' sizes
  when it has them), else those matching its file_pattern."""
  if files:
    verify_shards(dataset, digests)
    return files
  matched = sorted(tf.io.gfile.glob(dataset.file_pattern))
  if not matched:
    raise ValueError("no files match '%s'" % dataset.file_pattern)
  return matched


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
  patterns = [split_file_pattern(info.name, split, dataset_dir)
              for split in info.splits]
  return info.num_classes, _label_file(dataset_dir, info.name, patterns), info.channels


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


def _label_file(dataset_dir, name, patterns):
  """labels.txt in `dataset_dir` ({} when there is none), unless it is the
  label file another dataset's conversion wrote there for records other
  than those `patterns` match: decided from the conversions' metadata, so no
  record is listed."""
  if not dataset_utils.has_labels(dataset_dir):
    return {}
  labels = dataset_utils.read_label_file(dataset_dir)
  for other in registry.names():
    content = dataset_utils.read_metadata(dataset_dir, other)
    if (other == name or content is None or
        dataset_utils.metadata_labels(content) != labels):
      continue
    theirs = [os.path.abspath(os.path.join(dataset_dir, shard['file']))
              for split in content['splits'].values()
              for shard in split.get('shards', ())]
    if not any(fnmatch.fnmatchcase(path, pattern)
               for path in theirs for pattern in patterns):
      return {}
  return labels


def get_dataset(name, split_name, dataset_dir, file_pattern=None):
  """Describes split `split_name` of dataset `name` converted into `dataset_dir`.

  As TF-Slim's get_dataset, it reads no record: the sizes, classes and label
  names come from the conversion's metadata when there is one, else from
  the dataset's registration (and labels.txt), so a network's classes are
  known without its data (TF-Slim's export_inference_graph.py asks only
  that). The records are checked when they are first read: by either
  reader, or by `check_files()`, which the scripts call before they start.

  Raises ValueError naming the culprit for an unknown name or split, or
  sizes that cannot be known without the conversion's metadata; reading
  raises it for a missing directory, a pattern no file matches, or a shard
  that is not the one its conversion wrote.
  """
  info = get_info(name)
  name = info.name
  info.check_split(split_name)
  dataset_dir = dataset_utils.expand_path(dataset_dir)
  if info.get_split is not None:
    return _tf_slim_split(info, split_name, dataset_dir, file_pattern)
  pattern = split_file_pattern(name, split_name, dataset_dir, file_pattern)
  metadata = dataset_utils.read_metadata(dataset_dir, name)
  split = metadata['splits'].get(split_name) if metadata else None
  files, shards, problem = None, (), None
  if split is not None:
    num_samples, num_classes = split['num_samples'], metadata['num_classes']
    labels_to_names = dataset_utils.metadata_labels(metadata)
    directory = os.path.dirname(pattern)
    shards = tuple(split['shards'])
    files = tuple(os.path.join(directory, s['file']) for s in shards)
    if file_pattern:  # a subset the caller chose: of the shards we know
      shards = tuple(s for s, f in zip(shards, files)
                     if fnmatch.fnmatchcase(f, pattern))
      files = tuple(f for f in files if fnmatch.fnmatchcase(f, pattern))
      num_samples = sum(s['records'] for s in shards)
    if not files:
      problem = "no files match '%s' (dataset '%s', split '%s'); %s" % (
          pattern, name, split_name, _conversion_hint(name, dataset_dir))
  else:
    num_samples, num_classes = info.splits[split_name], info.num_classes
    labels_to_names = _label_file(dataset_dir, name, [pattern])
    if metadata is not None:
      problem = "%s has no split '%s' (it has %s); %s" % (
          dataset_utils.metadata_path(dataset_dir, name), split_name,
          ', '.join(sorted(metadata['splits'])),
          _conversion_hint(name, dataset_dir))
  list_files = functools.partial(_converted_files, dataset_dir=dataset_dir,
                                 files=files, problem=problem)
  dataset = Dataset(
      name=name, split_name=split_name, file_pattern=pattern,
      num_samples=num_samples or 0, num_classes=num_classes or 0,
      labels_to_names=labels_to_names, channels=info.channels,
      decoder=example_decoder(info.channels, info.image_size, info.has_boxes),
      shards=shards, has_boxes=info.has_boxes, image_size=info.image_size,
      tf_slim_records=True, list_files=list_files)
  if num_samples is None or num_classes is None:
    dataset.check_files()  # why they are unknown, if its records say
    raise ValueError('%s is missing, so the size of %s is unknown; %s' % (
        dataset_utils.metadata_path(dataset_dir, name), name,
        _conversion_hint(name, dataset_dir)))
  return dataset


def _converted_files(dataset, digests, dataset_dir, files, problem):
  """The record files of a split converted here (or by TF-Slim), checked:
  the metadata's shards (`files`) against their sizes and digests, or,
  without metadata, those matching the split's pattern."""
  name = dataset.name
  if not tf.io.gfile.isdir(dataset_dir):
    raise ValueError("dataset_dir '%s' does not exist; %s"
                     % (dataset_dir, _conversion_hint(name, dataset_dir)))
  if problem:
    raise ValueError(problem)
  if files is not None:
    verify_shards(dataset, digests)
    return files
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
  matched = sorted(tf.io.gfile.glob(dataset.file_pattern))
  if not matched:
    raise ValueError("no files match '%s' (dataset '%s', split '%s'); %s" % (
        dataset.file_pattern, name, dataset.split_name,
        _conversion_hint(name, dataset_dir)))
  return matched


def _tf_slim_split(info, split_name, dataset_dir, file_pattern=None):
  """The Dataset a TF-Slim dataset module's get_split returns, checked
  (its decoder has 'image' and 'label'; it knows num_classes; its files,
  when read).

  get_split is called in a graph of its own here, to read its facts, and
  again inside the pipeline's decoding function, so the tensors it makes
  (feature defaults, the decoder's ops) belong to the graph that uses them.
  """
  where = '%s.get_split' % (info.module or info.name)

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
  num_classes = getattr(dataset, 'num_classes', None) or info.num_classes
  if not num_classes:
    raise ValueError('%s returns a Dataset without num_classes: pass '
                     'num_classes= to slim.dataset.Dataset' % where)

  # The caller's graph gets a Dataset of its own (its decoder's tensors
  # belong there, as with TF-Slim's get_split); the reader makes another in
  # its pipeline's graph.
  dataset = get_split()
  return Dataset(
      name=info.name, split_name=split_name,
      file_pattern=os.path.abspath(sources[0]), num_samples=dataset.num_samples,
      num_classes=num_classes,
      labels_to_names=getattr(dataset, 'labels_to_names', None) or {},
      channels=channels or 3, decoder=dataset.decoder,
      has_boxes='object/bbox' in dataset.decoder.list_items(),
      reader=dataset.reader,
      items_to_descriptions=dataset.items_to_descriptions,
      graph_decoder=lambda: get_split().decoder,
      list_files=functools.partial(_module_files, dataset_dir=dataset_dir,
                                   sources=sources, where=where))


def _module_files(dataset, digests, dataset_dir, sources, where):
  """The record files a TF-Slim dataset module's get_split names (its
  data_sources: files or patterns), checked: at least one exists."""
  del digests  # a module's records have no metadata here
  if not tf.io.gfile.isdir(dataset_dir):
    raise ValueError("dataset_dir '%s' does not exist (dataset '%s' reads "
                     'records that %s describes)' % (dataset_dir, dataset.name,
                                                     where))
  files = sorted({f for s in sources for f in tf.io.gfile.glob(s)})
  if not files:
    raise ValueError("no files match '%s' (dataset '%s', split '%s', from %s)"
                     % (', '.join(sources), dataset.name, dataset.split_name,
                        where))
  return files


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


class _ImageHandler(slim.tfexample_decoder.ItemHandler):
  """TF-Slim's 'image' item of our records (and TF-Slim's): 'raw' (or 'RAW')
  is a uint8 buffer of image/height x image/width x channels (or the
  dataset's fixed size); every other format is decoded from its bytes, so
  TF-Slim's 'JPEG', 'jpg' and our 'jpeg' all read."""

  def __init__(self, channels, image_size=None):
    super().__init__(['image/encoded', 'image/format', 'image/height',
                      'image/width'])
    self._channels = channels
    self._image_size = image_size

  def tensors_to_item(self, keys_to_tensors):
    encoded = keys_to_tensors['image/encoded']
    image_format = tf.strings.lower(keys_to_tensors['image/format'])
    channels, image_size = self._channels, self._image_size

    def raw():
      height = keys_to_tensors['image/height']
      width = keys_to_tensors['image/width']
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
      return tf.ensure_shape(image, tuple(image_size) + (channels,))
    image.set_shape([None, None, channels])
    return image


def example_decoder(channels, image_size=None, with_boxes=False):
  """The TFExampleDecoder of converted records (TF-Slim's keys): items
  'image' (uint8 [H, W, channels]), 'label' (int64) and, `with_boxes`,
  'object/bbox' ([N, 4] ymin, xmin, ymax, xmax; N may be 0). It holds no
  tensors, so one decoder serves any graph."""
  features = dict(_FEATURES, **(_BOX_FEATURES if with_boxes else {}))
  handlers = {'image': _ImageHandler(channels, image_size),
              'label': slim.tfexample_decoder.Tensor('image/class/label')}
  if with_boxes:
    handlers['object/bbox'] = slim.tfexample_decoder.BoundingBox(
        list(_BOX_KEYS), 'image/object/bbox/')
  return slim.tfexample_decoder.TFExampleDecoder(features, handlers)
