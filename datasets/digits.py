"""Digits: scikit-learn's 1,797 real 8x8 handwritten digits, bundled (no download).

The offline default dataset. Pixels 0..16 are scaled to 0..255
(round(v * 255 / 16)) and stored as 1-channel PNG. Split: a seeded permutation
(numpy RandomState(seed), seed 0 by default; stable across numpy versions) puts
its first 360 images in 'validation' and the other 1,437 in 'train'. It is not
stratified: with ten nearly balanced classes each gets about 36 validation
images.
"""
import numpy as np

from datasets import dataset_utils
from datasets.registry import Conversion, Split, register_dataset, shard_count

NUM_IMAGES = 1797
NUM_VALIDATION = 360
CLASS_NAMES = ('zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven',
               'eight', 'nine')


def load_scaled():
  """(uint8 images [1797, 8, 8] in 0..255, int64 labels [1797])."""
  from sklearn.datasets import load_digits  # heavy import, only when converting
  digits = load_digits()
  images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
  return images, digits.target.astype(np.int64)


def split_indices(num_images, seed):
  """{'train': [...], 'validation': [...]} indices of the deterministic split."""
  order = [int(i) for i in np.random.RandomState(seed).permutation(num_images)]
  return {'train': order[NUM_VALIDATION:], 'validation': order[:NUM_VALIDATION]}


def convert(options):
  images, labels = load_scaled()
  splits = tuple(
      Split(name, indices, shard_count(options.num_shards, 1, len(indices)))
      for name, indices in split_indices(len(images), options.seed).items())

  def to_example(index):
    label = int(labels[index])
    return dataset_utils.image_to_tfexample(
        dataset_utils.encode_png(images[index]), b'png', 8, 8, label, CLASS_NAMES[label])

  return Conversion(
      dataset_name='digits', splits=splits, to_example=to_example,
      labels_to_names=dict(enumerate(CLASS_NAMES)), num_classes=len(CLASS_NAMES),
      source_id='sklearn.datasets.load_digits')


register_dataset('digits', convert,
                 splits={'train': NUM_IMAGES - NUM_VALIDATION,
                         'validation': NUM_VALIDATION},
                 num_classes=len(CLASS_NAMES), channels=1, image_size=(8, 8))
