"""Flowers (5 classes) from flower_photos.tgz, or its extracted flower_photos/.

As TF-Slim: class ids are the sorted folder names, the sorted image list is
shuffled with the seed (0) and the first 350 images are 'validation', the rest
'train' (3,320 of the published 3,670); an archive of fewer than 3,500 images
holds out a tenth instead. 5 shards per split, named as TF-Slim's.
"""
import os

from datasets import dataset_utils
from datasets import image_folder
from datasets.registry import Conversion, Split, register_dataset, shard_count

URL = 'http://download.tensorflow.org/example_images/flower_photos.tgz'
# Size and sha256 published by TensorFlow Datasets (url_checksums/tf_flowers.txt).
PUBLISHED = dataset_utils.Published(
    size=228813984,
    sha256='4c54ace7911aaffe13a365c34f650e71dd5bf1be0a58b464e5a7183e3e595d9c')
ARCHIVE = 'flower_photos.tgz'
EXTRACTED = 'flower_photos'
NUM_VALIDATION = 350
DEFAULT_SHARDS = 5


def _photos_root(options):
  extracted = os.path.join(options.source_dir, EXTRACTED)
  if os.path.isdir(extracted):
    return extracted
  archive = os.path.join(options.source_dir, ARCHIVE)
  if not os.path.exists(archive):
    if not options.download:
      raise dataset_utils.ConversionError(
          'missing %s; put %s in %s or pass --download'
          % (archive, ARCHIVE, options.source_dir))
    os.makedirs(options.source_dir, exist_ok=True)
    dataset_utils.download(URL, archive, PUBLISHED)
  elif options.download:
    dataset_utils.check_existing(archive, PUBLISHED)
  dataset_utils.safe_extract_tar(archive, options.work_dir)
  root = os.path.join(options.work_dir, EXTRACTED)
  if not os.path.isdir(root):
    raise dataset_utils.ConversionError('%s has no %s/ folder' % (archive, EXTRACTED))
  return root


def convert(options):
  root = _photos_root(options)
  names = image_folder.class_folders(root)
  photos = [(path, label) for label, name in enumerate(names)
            for path in image_folder.image_files(root, name)]
  photos = image_folder.shuffled(photos, options.seed)
  num_validation = min(NUM_VALIDATION, len(photos) // 10)
  splits = tuple(
      Split(split_name, items,
            shard_count(options.num_shards, DEFAULT_SHARDS, len(items)))
      for split_name, items in (('train', photos[num_validation:]),
                                ('validation', photos[:num_validation])))

  def to_example(item):
    path, label = item
    return image_folder.folder_example(root, path, label, names[label])

  return Conversion(
      dataset_name='flowers', splits=splits, to_example=to_example,
      labels_to_names=dict(enumerate(names)), num_classes=len(names),
      source_id='')  # the items (relative paths, labels) identify the inputs


# TF-Slim's file names: flowers_train_00000-of-00005.tfrecord.
register_dataset('flowers', convert, splits={'train': 3320, 'validation': 350},
                 num_classes=5, read_pattern='flowers_%s_*.tfrecord',
                 shard_pattern='flowers_%s_%05d-of-%05d.tfrecord')
