"""Any folder of class sub-folders (image_folder), and the folder helpers that
flowers and ImageNet share.

Layout: source_dir/<class name>/**/<image>.jpg|png|... ; labels are the sorted
class names numbered from 0. Each class is split on its own (stratified): a
seeded shuffle, then round(validation_fraction * class size) images go to
'validation', the rest to 'train'; both splits are shuffled again so shards mix
classes. Every image is fully decoded while converting: an undecodable one
stops the conversion with its path.
"""
import math
import os
import random

from datasets import dataset_utils
from datasets.registry import Conversion, Split, register_dataset, shard_count

IMAGES_PER_SHARD = 1000  # default shard size, about 100 MB of typical photos


def class_folders(root):
  """Sorted names of the non-hidden sub-folders of `root`."""
  if not os.path.isdir(root):
    raise dataset_utils.ConversionError('%s is not a directory' % root)
  names = sorted(n for n in os.listdir(root)
                 if not n.startswith('.') and os.path.isdir(os.path.join(root, n)))
  if not names:
    raise dataset_utils.ConversionError(
        '%s has no class sub-folders (expected %s/<class>/<image>)' % (root, root))
  return names


def image_files(root, class_name):
  """Sorted paths, relative to `root`, of the images under root/class_name."""
  found = []
  for directory, subdirs, files in os.walk(os.path.join(root, class_name)):
    subdirs[:] = sorted(d for d in subdirs if not d.startswith('.'))
    found += [os.path.relpath(os.path.join(directory, f), root) for f in files
              if not f.startswith('.')
              and f.lower().endswith(dataset_utils.IMAGE_EXTENSIONS)]
  if not found:
    raise dataset_utils.ConversionError('class folder %s has no images (%s)' % (
        os.path.join(root, class_name), ', '.join(dataset_utils.IMAGE_EXTENSIONS)))
  return sorted(found)


def folder_example(root, relative_path, label, text, extra_features=None):
  """The record of one image file, decoded first to prove it is sound."""
  data, image_format, height, width = dataset_utils.read_image_file(
      os.path.join(root, relative_path))
  return dataset_utils.image_to_tfexample(data, image_format, height, width, label,
                                          text, extra_features)


def shuffled(items, seed):
  items = list(items)
  random.Random(seed).shuffle(items)
  return items


def default_shards(num_items):
  return math.ceil(num_items / IMAGES_PER_SHARD)


def convert(options):
  root = options.source_dir
  names = class_folders(root)
  train, validation = [], []
  for label, name in enumerate(names):
    files = shuffled(image_files(root, name), options.seed)
    num_validation = int(round(options.validation_fraction * len(files)))
    validation += [(path, label) for path in files[:num_validation]]
    train += [(path, label) for path in files[num_validation:]]
  splits = tuple(
      Split(split_name, items, shard_count(
          options.num_shards, default_shards(len(items)), len(items)))
      for split_name, items in (('train', shuffled(train, options.seed)),
                                ('validation', shuffled(validation, options.seed))))

  def to_example(item):
    path, label = item
    return folder_example(root, path, label, names[label])

  return Conversion(
      dataset_name='image_folder', splits=splits, to_example=to_example,
      labels_to_names=dict(enumerate(names)), num_classes=len(names),
      source_id='')  # the items (relative paths, labels) identify the inputs


# Sizes and classes depend on the folder: only its conversion can tell them.
register_dataset('image_folder', convert, splits={'train': None, 'validation': None},
                 source_hint='<folder of class sub-folders>')
