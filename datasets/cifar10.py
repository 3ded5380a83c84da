"""CIFAR-10 from cifar-10-python.tar.gz (or its extracted cifar-10-batches-py/).

The batches are read straight from the archive (nothing is extracted) with an
unpickler that only admits numpy arrays, so a tampered archive cannot run code.
Splits: 'train' = data_batch_1..5 (50,000), 'test' = test_batch (10,000), in
the published order; class names from batches.meta.
"""
import os
import pickle
import tarfile
import warnings

import numpy as np

from datasets import dataset_utils
from datasets.registry import register_dataset

URL = 'https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz'
# The md5 published on https://www.cs.toronto.edu/~kriz/cifar.html.
PUBLISHED = dataset_utils.Published(md5='c58f30108f718f92721af3b95e74349a')
ARCHIVE = 'cifar-10-python.tar.gz'
EXTRACTED = 'cifar-10-batches-py'
BATCHES = {'train': ['data_batch_%d' % i for i in range(1, 6)], 'test': ['test_batch']}
CLASS_NAMES = ('airplane', 'automobile', 'bird', 'cat', 'deer', 'dog', 'frog',
               'horse', 'ship', 'truck')
DEFAULT_SHARDS = {'train': 5, 'test': 1}


class _ArrayUnpickler(pickle.Unpickler):
  """Loads dicts, lists, bytes and numpy arrays; refuses every other callable."""
  _ALLOWED = {
      (core + module, name)
      for core in ('numpy.core', 'numpy._core')  # numpy 1 and 2 spellings
      for module, name in (('.multiarray', '_reconstruct'), ('.multiarray', 'scalar'),
                           ('.numeric', '_frombuffer'))
  } | {
      ('numpy', 'ndarray'), ('numpy', 'dtype'), ('_codecs', 'encode'),
  }

  def find_class(self, module, name):
    if (module, name) not in self._ALLOWED:
      raise pickle.UnpicklingError('%s.%s is not allowed in a CIFAR-10 batch'
                                   % (module, name))
    with warnings.catch_warnings():  # numpy 2 warns about the numpy.core alias
      warnings.simplefilter('ignore', DeprecationWarning)
      return super().find_class(module, name)


def _load_batch(f, where):
  try:
    batch = _ArrayUnpickler(f, encoding='bytes').load()
  except Exception as e:  # a damaged pickle raises many types
    raise dataset_utils.ConversionError('cannot read CIFAR-10 batch %s: %s%s'
                                        % (where, e, dataset_utils.DAMAGED_HINT)) from None
  return {(k.decode() if isinstance(k, bytes) else k): v for k, v in batch.items()}


def _read_batches(source_dir, download):
  """{batch name: dict} from the extracted folder or the archive."""
  folder = os.path.join(source_dir, EXTRACTED)
  names = [n for split in BATCHES.values() for n in split] + ['batches.meta']
  if os.path.isdir(folder):
    batches = {}
    for name in names:
      path = os.path.join(folder, name)
      if not os.path.exists(path):
        raise dataset_utils.ConversionError('missing %s' % path)
      with open(path, 'rb') as f:
        batches[name] = _load_batch(f, path)
    return batches, folder

  archive = os.path.join(source_dir, ARCHIVE)
  if not os.path.exists(archive):
    if not download:
      raise dataset_utils.ConversionError(
          'missing %s; put %s in %s or pass --download' % (archive, ARCHIVE, source_dir))
    os.makedirs(source_dir, exist_ok=True)
    dataset_utils.download(URL, archive, PUBLISHED)
  elif download:
    dataset_utils.check_existing(archive, PUBLISHED)
  batches = {}
  try:
    with tarfile.open(archive) as tar:
      for member in tar:
        name = os.path.basename(member.name)
        if member.isfile() and name in names:
          batches[name] = _load_batch(tar.extractfile(member),
                                      '%s:%s' % (archive, member.name))
  except (tarfile.TarError, EOFError, OSError) as e:
    raise dataset_utils.ConversionError('cannot read archive %s: %s%s' % (
        archive, e, dataset_utils.DAMAGED_HINT)) from None
  missing = sorted(set(names) - set(batches))
  if missing:
    raise dataset_utils.ConversionError('%s lacks %s' % (archive, ', '.join(missing)))
  return batches, archive


def _images_and_labels(batch, where):
  data = np.asarray(batch.get('data'), dtype=np.uint8)
  labels = np.asarray(batch.get('labels'), dtype=np.int64)
  if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(labels) != len(data):
    raise dataset_utils.ConversionError(
        '%s: expected data [N, 3072] and N labels, got %s and %d'
        % (where, data.shape, len(labels)))
  # Rows hold the red, green then blue 32x32 planes.
  return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels


def convert(options):
  batches, source = _read_batches(options.source_dir, options.download)
  names = batches['batches.meta'].get('label_names') or CLASS_NAMES
  names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
  arrays = {}
  for split_name, batch_names in BATCHES.items():
    parts = [_images_and_labels(batches[b], b) for b in batch_names]
    images = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    if labels.size and (labels.min() < 0 or labels.max() >= len(names)):
      raise dataset_utils.ConversionError('%s %s holds labels outside 0..%d'
                                          % (source, split_name, len(names) - 1))
    arrays[split_name] = images, labels
  source_size = os.path.getsize(source) if os.path.isfile(source) else 0
  return dataset_utils.array_conversion(
      'cifar10', arrays, names, options.num_shards, DEFAULT_SHARDS,
      repr((os.path.basename(source), source_size)))


register_dataset('cifar10', convert, splits={'train': 50000, 'test': 10000},
                 num_classes=len(CLASS_NAMES), channels=3, image_size=(32, 32),
                 read_pattern='cifar10_%s*.tfrecord',
                 single_shard_pattern='cifar10_%s.tfrecord')
