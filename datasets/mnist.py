"""MNIST from its four idx files (train-images-idx3-ubyte.gz, ...) to PNG records.

Reads the files from source_dir (gzipped, or already gunzipped); --download
fetches missing ones from TF-Slim's URL (or the common mirror). Splits 'train'
(60,000) and 'test' (10,000) keep the published order; labels 0..9.
"""
import gzip
import os
import struct

import numpy as np

from datasets import dataset_utils
from datasets.registry import register_dataset

URLS = ('http://yann.lecun.com/exdb/mnist/',
        'https://storage.googleapis.com/cvdf-datasets/mnist/')
FILES = {  # split -> (images, labels)
    'train': ('train-images-idx3-ubyte.gz', 'train-labels-idx1-ubyte.gz'),
    'test': ('t10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz'),
}
# Sizes from http://yann.lecun.com/exdb/mnist/, sha256 from TensorFlow Datasets
# (url_checksums/mnist.txt).
PUBLISHED = {
    'train-images-idx3-ubyte.gz': dataset_utils.Published(
        9912422, sha256='440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609'),
    'train-labels-idx1-ubyte.gz': dataset_utils.Published(
        28881, sha256='3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c'),
    't10k-images-idx3-ubyte.gz': dataset_utils.Published(
        1648877, sha256='8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6'),
    't10k-labels-idx1-ubyte.gz': dataset_utils.Published(
        4542, sha256='f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6'),
}
IMAGES_MAGIC, LABELS_MAGIC = 2051, 2049  # idx: uint8 data, 3 and 1 dimensions
CLASS_NAMES = ('zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven',
               'eight', 'nine')
DEFAULT_SHARDS = {'train': 2, 'test': 1}


def _locate(source_dir, filename, download):
  path = os.path.join(source_dir, filename)
  if os.path.exists(path):
    if download:
      dataset_utils.check_existing(path, PUBLISHED[filename])
    return path
  if os.path.exists(path[:-len('.gz')]):
    return path[:-len('.gz')]
  if download:
    os.makedirs(source_dir, exist_ok=True)
    return dataset_utils.download([url + filename for url in URLS], path,
                                  PUBLISHED[filename])
  raise dataset_utils.ConversionError(
      'missing %s; put the MNIST files in %s or pass --download' % (path, source_dir))


def read_idx(path, magic):
  """The uint8 array of an idx file, after checking its magic number and size."""
  opener = gzip.open if path.endswith('.gz') else open
  try:
    with opener(path, 'rb') as f:
      data = f.read()
  except (OSError, EOFError) as e:
    raise dataset_utils.ConversionError('cannot read %s: %s%s' % (
        path, e, dataset_utils.DAMAGED_HINT)) from None
  ndim = magic & 0xff
  header = 4 + 4 * ndim
  if len(data) < header or struct.unpack('>i', data[:4])[0] != magic:
    raise dataset_utils.ConversionError(
        '%s is not an MNIST idx file (expected magic number %d)' % (path, magic))
  shape = struct.unpack('>%di' % ndim, data[4:header])
  if len(data) - header != int(np.prod(shape)):
    raise dataset_utils.ConversionError(
        '%s holds %d bytes of data, its header promises %s%s'
        % (path, len(data) - header, 'x'.join(map(str, shape)),
           dataset_utils.DAMAGED_HINT))
  return np.frombuffer(data, np.uint8, offset=header).reshape(shape)


def convert(options):
  arrays, source_id = {}, []
  for split_name, (images_file, labels_file) in FILES.items():
    images_path = _locate(options.source_dir, images_file, options.download)
    labels_path = _locate(options.source_dir, labels_file, options.download)
    images = read_idx(images_path, IMAGES_MAGIC)
    labels = read_idx(labels_path, LABELS_MAGIC)
    if len(images) != len(labels):
      raise dataset_utils.ConversionError('%s has %d images but %s has %d labels' % (
          images_path, len(images), labels_path, len(labels)))
    if labels.size and labels.max() >= len(CLASS_NAMES):
      raise dataset_utils.ConversionError('%s holds label %d; MNIST labels are 0..9'
                                          % (labels_path, labels.max()))
    arrays[split_name] = images, labels
    source_id += [(os.path.basename(p), os.path.getsize(p))
                  for p in (images_path, labels_path)]
  return dataset_utils.array_conversion(
      'mnist', arrays, CLASS_NAMES, options.num_shards, DEFAULT_SHARDS,
      repr(source_id))


register_dataset('mnist', convert, splits={'train': 60000, 'test': 10000},
                 num_classes=len(CLASS_NAMES), channels=1, image_size=(28, 28),
                 read_pattern='mnist_%s*.tfrecord',
                 single_shard_pattern='mnist_%s.tfrecord')
