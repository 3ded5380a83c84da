"""Visual Wake Words: COCO images labelled person (1) or not (0), as TF-Slim built it.

From a COCO 2014 tree (COCO 2017's works too; see datasets/coco.py):
  <source_dir>/<coco_dirname>/ if it holds one (TF-Slim's place: --dataset_dir/
  coco_dataset, --source_dir defaulting to --dataset_dir), else <source_dir>
  itself (--source_dir=/data/coco points at the COCO root). --download fetches
  COCO 2014's three zips into <source_dir>/<coco_dirname>/ and extracts them.

TF-Slim's rule (--foreground_class_of_interest, default person;
--small_object_area_threshold, default 0.005): an image is 1 when an
annotation of that category -- crowd annotations too -- has an area greater
than the threshold times the image's height x width; otherwise 0, also for
images without annotations. Splits 'train' (COCO's train, 82,783 images in
2014) and 'val' (40,504), each in its annotation file's order; labels.txt
'0:background', '1:person'.

Records carry TF-Slim's features: image/encoded (the file's bytes as they are:
grayscale and CMYK JPEGs included, which TensorFlow decodes to 3 channels),
image/format 'jpeg', image/class/label, image/class/text, image/height and
image/width (of the decoded file), image/filename, image/source_id (COCO's
image id), image/key/sha256, and per object of the category above the
threshold image/object/bbox/{xmin,xmax,ymin,ymax} (relative to the annotated
size, as TF-Slim's: not clipped) and image/object/area (COCO's area). Files
'train.record-00000-of-00100' and 'val.record-00000-of-00010', the names
TF-Slim's visualwakewords.py reads ('%s.record-*'). Every image is decoded
while converting: a missing or undecodable one stops the conversion in one
line naming it.
"""
import hashlib
import io
import os

import PIL.Image

from datasets import coco
from datasets import dataset_utils
from datasets.registry import Conversion, Split, register_dataset, shard_count

NAME = 'visualwakewords'
SPLITS = {'train': 82783, 'val': 40504}  # TF-Slim's sizes (COCO 2014)
DEFAULT_SHARDS = {'train': 100, 'val': 10}  # TF-Slim's
BACKGROUND = 'background'

# COCO 2014's zips and what TensorFlow Datasets publishes about them
# (url_checksums/coco.txt): size and sha256.
ARCHIVES = {
    'annotations_trainval2014.zip': (
        'http://images.cocodataset.org/annotations/annotations_trainval2014.zip',
        dataset_utils.Published(
            size=252872794,
            sha256='031296bbc80c45a1d1f76bf9a90ead27e94e99ec629208449507a4917a3bf009')),
    'train2014.zip': (
        'http://images.cocodataset.org/zips/train2014.zip',
        dataset_utils.Published(
            size=13510573713,
            sha256='ede4087e640bddba550e090eae701092534b554b42b05ac33f0300b984b31775')),
    'val2014.zip': (
        'http://images.cocodataset.org/zips/val2014.zip',
        dataset_utils.Published(
            size=6645013297,
            sha256='fe9be816052049c34717e077d9e34aa60814a55679f804cd043e3cbee3b9fde0')),
}


def _archive_products(layout):
  """{archive: the paths it provides in a 2014 tree}."""
  return {
      'annotations_trainval2014.zip': [layout.annotations(s) for s in coco.SPLITS],
      'train2014.zip': [layout.image_dir('train')],
      'val2014.zip': [layout.image_dir('val')],
  }


def _fetch(layout, download):
  """Extracts the COCO 2014 zips lying in the tree's root whose contents are
  missing (downloading them first with `download`)."""
  coco.remove_abandoned_extractions(layout.root)
  for archive, products in _archive_products(layout).items():
    if all(os.path.exists(p) for p in products):
      continue
    path = os.path.join(layout.root, archive)
    url, published = ARCHIVES[archive]
    fetched = False
    if not os.path.exists(path):
      if not download:
        continue
      os.makedirs(layout.root, exist_ok=True)
      dataset_utils.download(url, path, published)
      fetched = True
    elif download:
      dataset_utils.check_existing(path, published)
    coco.safe_extract_zip(path, layout.root)
    if fetched:  # ours to remove (yours are kept): the tree is what is read
      os.remove(path)


def find_tree(options):
  """The Layout of the COCO tree the conversion reads (fetched if asked)."""
  roots = [os.path.join(options.source_dir, options.coco_dirname),
           options.source_dir]
  layout = coco.find_layout(roots)
  if layout is None:
    zips = [r for r in roots if any(
        os.path.exists(os.path.join(r, a)) for a in ARCHIVES)]
    layout = coco.Layout(zips[0] if zips else roots[0], coco.YEARS[0])
  if layout.year == 2014:
    _fetch(layout, options.download)
  missing = layout.missing()
  if len(missing) == 4:  # nothing there
    raise dataset_utils.ConversionError(
        'no COCO tree: looked for annotations/instances_{train,val}2014.json '
        '(or 2017), train2014/ and val2014/ in %s; put COCO there (or its '
        'zips: %s) or pass --download'
        % (' and '.join(roots), ', '.join(ARCHIVES)))
  if missing:
    raise dataset_utils.ConversionError(
        'incomplete COCO %d tree in %s: missing %s; %s'
        % (layout.year, layout.root, ', '.join(missing),
           'pass --download to fetch it' if layout.year == 2014 else
           'extract the missing COCO zip there'))
  return layout


def check_options(options):
  if not 0 <= options.small_object_area_threshold < 1:
    raise dataset_utils.ConversionError(
        '--small_object_area_threshold must be in [0, 1), got %r'
        % options.small_object_area_threshold)
  if not options.foreground_class_of_interest:
    raise dataset_utils.ConversionError('--foreground_class_of_interest is empty')


def read_image(path):
  """(bytes, format, height, width) of an image file, decoded first (the
  bytes are kept as they are); ConversionError names a missing or
  undecodable file. Decoding releases the GIL: the shards written in
  parallel (converters.write) decode on every core."""
  try:
    with open(path, 'rb') as f:
      data = f.read()
  except FileNotFoundError:
    raise dataset_utils.ConversionError('missing image %s' % path) from None
  except OSError as e:
    raise dataset_utils.ConversionError('cannot read image %s: %s' % (path, e)) from None
  try:
    with PIL.Image.open(io.BytesIO(data)) as image:
      image_format, mode = image.format, image.mode
      width, height = image.size
      # libjpeg's 1/8 scale reads every coefficient of the file (a truncated
      # or corrupt one fails) at 60% of a full decode's cost.
      image.draft(None, (max(width // 8, 1), max(height // 8, 1)))
      image.load()
  except PIL.UnidentifiedImageError:
    raise dataset_utils.ConversionError(
        'cannot decode image %s: not an image PIL can read' % path) from None
  except Exception as e:  # PIL raises many types for bad data; all mean the same
    raise dataset_utils.ConversionError('cannot decode image %s: %s' % (path, e)) from None
  # TensorFlow decodes these to 3 channels from the bytes themselves.
  if image_format == 'JPEG' and mode in ('RGB', 'L', 'CMYK'):
    return data, b'jpeg', height, width
  if image_format == 'PNG':
    return data, b'png', height, width
  raise dataset_utils.ConversionError(
      'cannot use image %s: a %s image of mode %s (JPEG or PNG expected)'
      % (path, image_format, mode))


def convert(options):
  check_options(options)
  layout = find_tree(options)
  category = options.foreground_class_of_interest
  threshold = float(options.small_object_area_threshold)
  indexes, image_dirs = {}, {}
  for split_name in coco.SPLITS:
    index = coco.load_index(layout.annotations(split_name), category, threshold)
    image_dirs[split_name] = layout.image_dir(split_name)
    missing = coco.missing_images(index, image_dirs[split_name])
    if missing:
      raise dataset_utils.ConversionError(
          'missing image %s (named by %s)%s' % (
              os.path.join(image_dirs[split_name], missing[0]),
              os.path.basename(index.annotations_file),
              ' and %d more' % (len(missing) - 1) if len(missing) > 1 else ''))
    indexes[split_name] = index

  splits = tuple(
      Split(split_name, [(split_name, i) for i in range(len(index))],
            shard_count(options.num_shards, DEFAULT_SHARDS[split_name], len(index)))
      for split_name, index in indexes.items())
  names = {0: BACKGROUND, 1: category}

  def to_example(item):
    split_name, i = item
    return tf_example(indexes[split_name], i, image_dirs[split_name], names)

  digest = hashlib.sha256(repr((layout.year, category, threshold)).encode())
  for split_name in coco.SPLITS:
    for part in indexes[split_name].digest_parts():
      digest.update(part if isinstance(part, bytes) else part.encode('utf-8'))
  return Conversion(dataset_name=NAME, splits=splits, to_example=to_example,
                    labels_to_names=names, num_classes=2,
                    source_id=digest.hexdigest())


def tf_example(index, i, image_dir, names):
  """The record of image i of `index`, with TF-Slim's Visual Wake Words features."""
  file_name = index.file_names[i]
  data, image_format, height, width = read_image(os.path.join(image_dir, file_name))
  boxes, areas = index.objects(i)
  # Relative to the annotated size, as TF-Slim's (a resized copy of COCO
  # keeps its relative boxes).
  annotated_height, annotated_width = float(index.heights[i]), float(index.widths[i])
  x, y, w, h = boxes.T
  label = int(index.labels[i])
  return dataset_utils.image_to_tfexample(
      data, image_format, height, width, label, names[label], extra_features={
          'image/filename': dataset_utils.bytes_feature(file_name),
          'image/source_id': dataset_utils.bytes_feature(str(int(index.image_ids[i]))),
          'image/key/sha256': dataset_utils.bytes_feature(
              hashlib.sha256(data).hexdigest()),
          'image/object/bbox/xmin': dataset_utils.float_feature(x / annotated_width),
          'image/object/bbox/xmax': dataset_utils.float_feature(
              (x + w) / annotated_width),
          'image/object/bbox/ymin': dataset_utils.float_feature(y / annotated_height),
          'image/object/bbox/ymax': dataset_utils.float_feature(
              (y + h) / annotated_height),
          'image/object/area': dataset_utils.float_feature(areas),
      })


# TF-Slim's file names and reader pattern ('%s.record-*'); the records hold
# boxes (its decoder's 'object/bbox' item).
register_dataset(NAME, convert, splits=SPLITS, num_classes=2,
                 read_pattern='%s.record-*', shard_pattern='%s.record-%05d-of-%05d',
                 has_boxes=True,
                 source_hint='<COCO root: annotations/, train2014/, val2014/>')
