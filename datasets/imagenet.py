"""ImageNet (ILSVRC-2012) as TF-Slim built it, from the images you downloaded.

Layout (ImageNet needs a registered download, so there is no --download):
  source_dir/train/n01440764/*.JPEG ...          one folder per synset
  source_dir/validation/n01440764/*.JPEG ...     sorted into synsets, or flat:
  source_dir/validation/ILSVRC2012_val_00000001.JPEG ... with
  source_dir/imagenet_2012_validation_synset_labels.txt   (line i: the synset
      of ILSVRC2012_val_<i>.JPEG; TF-Slim's file)
  source_dir/bounding_boxes/**/*.xml     optional: the ILSVRC annotation XML, or
  source_dir/imagenet_2012_bounding_boxes.csv   TF-Slim's CSV
      ('<image file>,<xmin>,<ymin>,<xmax>,<ymax>', relative coordinates)

Labels come from the canonical list of the 1,000 ILSVRC-2012 synsets shipped
in datasets/data/imagenet_2012_synsets.txt (sorted; with their WordNet names):
label 0 is 'background' and synset i of the list is label i (1..1000), 1001
classes, as TF-Slim's checkpoints expect, whatever folders are present. A
folder that is not one of the 1,000 synsets is refused (it would be a silent
extra class); a synset without a folder is reported as a warning and keeps its
label. labels.txt holds the human-readable names ('1:tench, Tinca tinca').

Records carry TF-Slim's keys: image/format 'JPEG' (PNGs and CMYK JPEGs of the
training set are stored as 'png'), image/class/synset, image/class/text,
image/filename, and the image's boxes in image/object/bbox/{xmin,ymin,xmax,ymax}
(relative, clipped to [0, 1]) and image/object/bbox/label, which inception
preprocessing uses for its crops. Shards: 1024 train, 128 validation, named
'train-00000-of-01024'. Each split is shuffled with the seed so shards mix
classes; every image is fully decoded while converting.
"""
import csv
import hashlib
import os
import re
import xml.etree.ElementTree as ET

from datasets import dataset_utils
from datasets import image_folder
from datasets.registry import Conversion, Split, register_dataset, shard_count

DEFAULT_SHARDS = {'train': 1024, 'validation': 128}
SYNSETS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data',
                            'imagenet_2012_synsets.txt')
VALIDATION_LABELS_FILE = 'imagenet_2012_validation_synset_labels.txt'
BOXES_DIR = 'bounding_boxes'
BOXES_CSV = 'imagenet_2012_bounding_boxes.csv'
_VALIDATION_NAME = re.compile(r'ILSVRC2012_val_(\d+)$')


def canonical_synsets():
  """[(synset, human-readable name)] of the 1,000 ILSVRC-2012 classes, in label order."""
  with open(SYNSETS_FILE, encoding='utf-8') as f:
    return [tuple(line.rstrip('\n').split('\t', 1)) for line in f if line.strip()]


def labels_to_names():
  names = {0: 'background'}
  names.update({i: name for i, (_, name) in enumerate(canonical_synsets(), 1)})
  return names


def _stem(filename):
  return os.path.splitext(os.path.basename(filename))[0]


def _clip(value):
  return min(max(value, 0.0), 1.0)


def _relative_box(xmin, ymin, xmax, ymax):
  """[ymin, xmin, ymax, xmax], ordered and clipped to [0, 1]."""
  return (_clip(min(ymin, ymax)), _clip(min(xmin, xmax)),
          _clip(max(ymin, ymax)), _clip(max(xmin, xmax)))


def _xml_boxes(path):
  """(image stem, [(synset or None, box)]) of one ILSVRC annotation file."""
  try:
    root = ET.parse(path).getroot()
    width = float(root.findtext('size/width'))
    height = float(root.findtext('size/height'))
    boxes = []
    for obj in root.iter('object'):
      box = obj.find('bndbox')
      xmin, ymin, xmax, ymax = (float(box.findtext(k))
                                for k in ('xmin', 'ymin', 'xmax', 'ymax'))
      boxes.append((obj.findtext('name'), _relative_box(
          xmin / width, ymin / height, xmax / width, ymax / height)))
  except (ET.ParseError, TypeError, ValueError, AttributeError, ZeroDivisionError) as e:
    raise dataset_utils.ConversionError('cannot read bounding boxes from %s: %s'
                                        % (path, e or type(e).__name__)) from None
  return _stem(root.findtext('filename') or path), boxes


def read_boxes(source_dir):
  """{image stem: [(synset or None, [ymin, xmin, ymax, xmax])]} from the XML
  under bounding_boxes/ and/or TF-Slim's CSV; {} when there are none."""
  boxes = {}
  xml_root = os.path.join(source_dir, BOXES_DIR)
  if os.path.isdir(xml_root):
    for directory, subdirs, files in os.walk(xml_root):
      subdirs.sort()
      for name in sorted(files):
        if name.lower().endswith('.xml'):
          stem, found = _xml_boxes(os.path.join(directory, name))
          boxes.setdefault(stem, []).extend(found)
  csv_path = os.path.join(source_dir, BOXES_CSV)
  if os.path.exists(csv_path):
    with open(csv_path, encoding='utf-8', newline='') as f:
      for number, row in enumerate(csv.reader(f), 1):
        if not row:
          continue
        try:
          xmin, ymin, xmax, ymax = (float(v) for v in row[1:5])
          if len(row) != 5:
            raise ValueError
        except ValueError:
          raise dataset_utils.ConversionError(
              "%s line %d: expected '<file>,<xmin>,<ymin>,<xmax>,<ymax>', got %r"
              % (csv_path, number, ','.join(row))) from None
        boxes.setdefault(_stem(row[0]), []).append(
            (None, _relative_box(xmin, ymin, xmax, ymax)))
  return boxes


def _check_folders(root, known):
  folders = [n for n in os.listdir(root)
             if not n.startswith('.') and os.path.isdir(os.path.join(root, n))]
  stray = sorted(set(folders) - known)
  if stray:
    raise dataset_utils.ConversionError(
        '%s is not one of the 1,000 ILSVRC-2012 synsets (%s); move it out of %s '
        '(an extra folder would become an extra class)' % (
            os.path.join(root, stray[0]),
            '%d such folder(s)' % len(stray), root))
  return set(folders)


def _folder_items(split_name, root, synsets, stream=None):
  """[(relative path, label, synset)] of root/<synset>/ images."""
  present = _check_folders(root, set(synsets))
  missing = [s for s in synsets if s not in present]
  if missing:
    dataset_utils.warn(
        '%s lacks %d of the 1,000 synsets (first: %s); their labels stay reserved, '
        'the others keep their canonical labels' % (root, len(missing), missing[0]),
        stream)
  return [(os.path.join(split_name, path), label, synset)
          for label, synset in enumerate(synsets, 1) if synset in present
          for path in image_folder.image_files(root, synset)]


def _flat_validation_items(source_dir, root, synsets):
  """[(relative path, label, synset)] of validation/ILSVRC2012_val_*.JPEG, the
  synsets read from the ground-truth file (line i: image i)."""
  labels_path = os.path.join(source_dir, VALIDATION_LABELS_FILE)
  if not os.path.exists(labels_path):
    raise dataset_utils.ConversionError(
        '%s holds images, not synset folders, and %s is missing: put TF-Slim\'s '
        'ground-truth file there (line i: the synset of ILSVRC2012_val_<i>.JPEG)'
        % (root, labels_path))
  with open(labels_path, encoding='utf-8') as f:
    truth = [line.strip() for line in f if line.strip()]
  label_of = {s: i for i, s in enumerate(synsets, 1)}
  items = []
  for name in sorted(os.listdir(root)):
    if name.startswith('.') or not name.lower().endswith(dataset_utils.IMAGE_EXTENSIONS):
      continue
    match = _VALIDATION_NAME.match(_stem(name))
    if not match:
      raise dataset_utils.ConversionError(
          '%s is not named ILSVRC2012_val_<number>: its line in %s is unknown'
          % (os.path.join(root, name), labels_path))
    index = int(match.group(1))
    if not 1 <= index <= len(truth):
      raise dataset_utils.ConversionError('%s has no line for %s (it has %d lines)'
                                          % (labels_path, name, len(truth)))
    synset = truth[index - 1]
    if synset not in label_of:
      raise dataset_utils.ConversionError(
          '%s line %d: %r is not one of the 1,000 ILSVRC-2012 synsets'
          % (labels_path, index, synset))
    items.append((os.path.join('validation', name), label_of[synset], synset))
  return items


def convert(options):
  if options.download:
    raise dataset_utils.ConversionError(
        'ImageNet cannot be downloaded here (it needs an image-net.org account); '
        'put train/ and validation/ folders in --source_dir (see the README)')
  synsets = [s for s, _ in canonical_synsets()]
  names = labels_to_names()
  roots = {split: os.path.join(options.source_dir, split) for split in DEFAULT_SHARDS}
  for root in roots.values():
    if not os.path.isdir(root):
      raise dataset_utils.ConversionError(
          'missing %s; expected %s/<synset>/<image>.JPEG' % (root, root))
  boxes = read_boxes(options.source_dir)

  splits = []
  for split_name, root in roots.items():
    flat = split_name == 'validation' and not any(
        os.path.isdir(os.path.join(root, n)) for n in os.listdir(root)
        if not n.startswith('.'))
    items = (_flat_validation_items(options.source_dir, root, synsets) if flat
             else _folder_items(split_name, root, synsets))
    if not items:
      raise dataset_utils.ConversionError('%s holds no images' % root)
    items = image_folder.shuffled(items, options.seed)
    splits.append(Split(split_name, items, shard_count(
        options.num_shards, DEFAULT_SHARDS[split_name], len(items))))

  def to_example(item):
    path, label, synset = item
    data, image_format, height, width = dataset_utils.read_image_file(
        os.path.join(options.source_dir, path))
    own = [box for name, box in boxes.get(_stem(path), ())
           if name in (None, synset)]
    extra = {
        'image/class/synset': dataset_utils.bytes_feature(synset),
        'image/filename': dataset_utils.bytes_feature(os.path.basename(path)),
        'image/colorspace': dataset_utils.bytes_feature(b'RGB'),
        'image/channels': dataset_utils.int64_feature(3),
        'image/object/bbox/label': dataset_utils.int64_feature([label] * len(own)),
    }
    for i, key in enumerate(('ymin', 'xmin', 'ymax', 'xmax')):
      extra['image/object/bbox/' + key] = dataset_utils.float_feature(
          [box[i] for box in own])
    return dataset_utils.image_to_tfexample(
        data, b'JPEG' if image_format == b'jpeg' else image_format, height, width,
        label, names[label], extra)

  return Conversion(
      dataset_name='imagenet', splits=tuple(splits), to_example=to_example,
      labels_to_names=names, num_classes=len(names),
      # The boxes change the records, so they belong to the fingerprint.
      source_id=_digest(sorted(boxes.items())) if boxes else '')


def _digest(items):
  digest = hashlib.sha256()
  for item in items:
    digest.update(repr(item).encode())
  return digest.hexdigest()


# TF-Slim's file names (train-00000-of-01024). Label 0 is 'background', as in
# TF-Slim's ImageNet checkpoints (1001 logits).
register_dataset('imagenet', convert,
                 splits={'train': 1281167, 'validation': 50000},
                 num_classes=1001, read_pattern='%s-*',
                 shard_pattern='%s-%05d-of-%05d', has_boxes=True)
