"""ImageNet (ILSVRC-2012) from train/ and validation/ folders of synset sub-folders.

Layout (ImageNet needs a registered download, so there is no --download):
  source_dir/train/n01440764/*.JPEG ...
  source_dir/validation/n01440764/*.JPEG ...   (validation sorted into synsets)
  source_dir/imagenet_metadata.txt or LOC_synset_mapping.txt  (optional names)
As TF-Slim's checkpoints: label 0 is 'background' and the sorted synsets are
1..N (1001 classes for the 1,000 ILSVRC synsets). Records carry the synset in
image/class/synset and the human-readable name, when a names file is present,
in image/class/text. Shards: 1024 train, 128 validation, named 'train-00000-of-01024'.
Each split is shuffled with the seed so shards mix classes; every image is fully
decoded while converting (CMYK JPEGs and PNGs posing as JPEG are stored as PNG).
"""
import os

from datasets import convert_folder
from datasets import converters
from datasets import dataset_utils

DEFAULT_SHARDS = {'train': 1024, 'validation': 128}
NAMES_FILES = ('imagenet_metadata.txt', 'LOC_synset_mapping.txt')


def _synset_names(source_dir):
  """{synset: name} from the first names file present ('<synset> <name>' lines)."""
  for filename in NAMES_FILES:
    path = os.path.join(source_dir, filename)
    if os.path.exists(path):
      with open(path, encoding='utf-8') as f:
        pairs = (line.strip().split(None, 1) for line in f)
        return {p[0]: p[1] for p in pairs if len(p) == 2}
  return {}


def make_conversion(options):
  if options.download:
    raise dataset_utils.ConversionError(
        'ImageNet cannot be downloaded here (it needs an image-net.org account); '
        'put train/ and validation/ folders of synset sub-folders in --source_dir')
  roots = {split: os.path.join(options.source_dir, split) for split in DEFAULT_SHARDS}
  for root in roots.values():
    if not os.path.isdir(root):
      raise dataset_utils.ConversionError(
          'missing %s; expected %s/<synset>/<image>.JPEG' % (root, root))
  synsets = convert_folder.class_folders(roots['train'])
  unknown = sorted(set(convert_folder.class_folders(roots['validation'])) - set(synsets))
  if unknown:
    raise dataset_utils.ConversionError(
        '%s has synsets that train/ lacks: %s'
        % (roots['validation'], ', '.join(unknown)))
  names = _synset_names(options.source_dir)
  labels_to_names = {0: 'background'}
  labels_to_names.update({i: names.get(s, s) for i, s in enumerate(synsets, 1)})

  splits = []
  for split_name, root in roots.items():
    present = set(convert_folder.class_folders(root))
    items = [(os.path.join(split_name, path), label)
             for label, synset in enumerate(synsets, 1) if synset in present
             for path in convert_folder.image_files(root, synset)]
    items = convert_folder.shuffled(items, options.seed)
    splits.append(converters.Split(split_name, items, converters.shard_count(
        options.num_shards, DEFAULT_SHARDS[split_name], len(items))))

  def to_example(item):
    path, label = item
    return convert_folder.folder_example(
        options.source_dir, path, label, labels_to_names[label],
        {'image/class/synset': dataset_utils.bytes_feature(synsets[label - 1]),
         'image/filename': dataset_utils.bytes_feature(os.path.basename(path))})

  return converters.Conversion(
      dataset_name='imagenet', splits=tuple(splits), to_example=to_example,
      labels_to_names=labels_to_names, num_classes=len(labels_to_names),
      source_id='')  # the items (relative paths, labels) identify the inputs
