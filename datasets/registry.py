"""The one table of datasets: each dataset module registers itself here.

A dataset is one module (datasets/digits.py, ...): its facts, its converter and
one `register_dataset(...)` call, as a network family registers its networks
in nets/registry.py. The registration carries what converters, readers and
scripts need to know (splits and their published sizes, classes, channels,
record file names), so no second table is kept. `dataset_factory` imports the
built-in modules; a user's module registers when it is imported (see
`dataset_factory.get_info`), and a TF-Slim dataset module (a `get_split`
returning `slim.dataset.Dataset`) registers through `get_split=`.

Also here, what a converter is given and what it returns: `SourceOptions` in,
a `Conversion` (per split: the ordered items, the number of shards; and
`to_example(item) -> tf.train.Example`) out; `converters.write` does the rest.
"""
import dataclasses
import fnmatch
from typing import Callable, Dict, Optional, Sequence, Tuple

import zoo_errors


@dataclasses.dataclass(frozen=True)
class SourceOptions:
  """What a converter may use; each takes what applies to it."""
  source_dir: str  # where the user's archives or folders are
  work_dir: str  # scratch space (e.g. for extraction), deleted afterwards
  download: bool = False  # fetch missing archives from their original URLs
  num_shards: Optional[int] = None  # per split; None: the dataset's default
  validation_fraction: float = 0.1  # image_folder
  seed: int = 0  # of every shuffle and split
  # visualwakewords (TF-Slim's flags): the COCO category that is label 1, the
  # fraction of the image its area must exceed, and where the COCO tree is
  # (<source_dir>/<coco_dirname>, else <source_dir>).
  foreground_class_of_interest: str = 'person'
  small_object_area_threshold: float = 0.005
  coco_dirname: str = 'coco_dataset'


@dataclasses.dataclass(frozen=True)
class Split:
  name: str
  items: Sequence  # in record order; small reprs (indices, relative paths)
  num_shards: int


@dataclasses.dataclass(frozen=True)
class Conversion:
  """A converter's plan: what to write, and how to make each record."""
  dataset_name: str
  splits: Tuple[Split, ...]
  to_example: Callable  # item -> tf.train.Example
  labels_to_names: Dict[int, str]
  num_classes: int
  source_id: str  # identifies the source files (names, sizes)


def shard_count(requested, default, num_items):
  """`requested` or `default` shards, never more than there are items."""
  return max(1, min(int(requested or default), num_items))


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
  """What the system knows about one registered dataset name."""
  name: str
  splits: Dict[str, Optional[int]]  # split -> published size (None: the conversion's)
  num_classes: Optional[int]  # None: known from the conversion only
  convert: Optional[Callable] = None  # fn(SourceOptions) -> Conversion
  channels: int = 3  # of the decoded images
  image_size: Optional[Tuple[int, int]] = None  # (height, width) when fixed
  read_pattern: str = ''  # glob of a split's records; '%s' is the split
  shard_pattern: str = ''  # '%s' split, then shard index and count
  single_shard_pattern: Optional[str] = None  # TF-Slim's name of a one-file split
  has_boxes: bool = False  # records may hold image/object/bbox/*
  source_hint: str = ''  # what --source_dir must hold, for error lines
  # A TF-Slim dataset module's get_split(split_name, dataset_dir,
  # file_pattern=None, reader=None) -> slim.dataset.Dataset: its records,
  # sizes, classes, labels and decoder are the module's (no converter here).
  get_split: Optional[Callable] = None
  module: str = ''  # the module that registered it

  def shard_filename(self, split_name, shard, num_shards):
    if num_shards == 1 and self.single_shard_pattern:
      return self.single_shard_pattern % split_name
    return self.shard_pattern % (split_name, shard, num_shards)

  def check_split(self, split_name):
    """Raises ValueError unless `split_name` is one of the registered splits
    (a TF-Slim module's get_split checks its own)."""
    if self.splits and split_name not in self.splits:
      raise ValueError("unknown split_name '%s' for dataset '%s' (valid: %s)"
                       % (split_name, self.name, ', '.join(sorted(self.splits))))


_DATASETS = {}


def register_dataset(name, convert=None, splits=None, num_classes=None,
                     channels=3, image_size=None, read_pattern=None,
                     shard_pattern=None, single_shard_pattern=None,
                     has_boxes=False, source_hint='', get_split=None,
                     module=None):
  """Registers a dataset under `name`; a name can be registered once.

  `convert(options)` returns the Conversion download_and_convert_data.py
  writes; `splits` maps each split to its published size (None where only
  the conversion knows it); `num_classes` None likewise. Record files are
  named `<name>_<split>-00000-of-00002.tfrecord` unless `shard_pattern` (and
  the `read_pattern` that matches it) say otherwise. `get_split` registers a
  TF-Slim dataset module's function instead of a converter.
  """
  if name in _DATASETS:
    raise ValueError('dataset name %r is registered twice' % name)
  if (convert is None) == (get_split is None):
    raise ValueError('dataset %r: register either convert= (records this '
                     'project writes) or get_split= (a TF-Slim dataset module)'
                     % name)
  if get_split is None and not splits:
    raise ValueError('dataset %r: splits= names its splits' % name)
  info = DatasetInfo(
      name=name, splits=dict(splits or {}),
      num_classes=None if num_classes is None else int(num_classes),
      convert=convert, channels=int(channels),
      image_size=tuple(image_size) if image_size else None,
      read_pattern=read_pattern or name + '_%s-*.tfrecord',
      shard_pattern=shard_pattern or name + '_%s-%05d-of-%05d.tfrecord',
      single_shard_pattern=single_shard_pattern, has_boxes=bool(has_boxes),
      source_hint=source_hint, get_split=get_split,
      module=module or getattr(convert or get_split, '__module__', ''))
  _DATASETS[name] = info
  return info


def lookup(name, what='dataset_name'):
  """The DatasetInfo of `name`, or ValueError naming the registered ones."""
  if name not in _DATASETS:
    raise ValueError(zoo_errors.unknown_name_message(what, name, _DATASETS))
  return _DATASETS[name]


def find(name):
  """The DatasetInfo of `name`, or None if no dataset has that name."""
  return _DATASETS.get(name)


def names(pattern='*'):
  return sorted(n for n in _DATASETS if fnmatch.fnmatch(n, pattern))


def registered_by(module_name):
  """The DatasetInfos that module `module_name` registered."""
  return [info for info in _DATASETS.values() if info.module == module_name]
