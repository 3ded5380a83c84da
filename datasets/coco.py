"""COCO as a source: where its tree is, its annotations read compactly, its zips.

A COCO tree (the root of what COCO's zips extract to):
  <root>/annotations/instances_train2014.json, instances_val2014.json
  <root>/train2014/COCO_train2014_000000000009.jpg ...
  <root>/val2014/COCO_val2014_000000000042.jpg ...
or COCO 2017's (instances_train2017.json, train2017/, val2017/). `find_layout`
finds one; `load_index` reads one split's instances file into an `ImageIndex`.

Why the index is compact: instances_train2014.json is 450 MB of JSON, most of
it segmentation polygons; parsed whole into Python objects (json.load) it takes
about 2.6 GB. `load_index` parses the text once with an object hook that turns
each image and annotation into a few numbers appended to typed arrays as soon
as the parser has built it, so its polygons are freed at once; what remains
per image is its file name, size, label and the boxes and areas of one
category (arrays, offsets per image). The peak is about twice the text
(its bytes and the decoded string, for a moment), a third of json.load's;
benchmarks/vww_annotations_memory.py measures both.
"""
import array
import dataclasses
import difflib
import json
import os
import shutil
import stat
import sys
import time
import zipfile
from typing import Tuple

import numpy as np

from datasets import dataset_utils

YEARS = (2014, 2017)  # 2014 first: TF-Slim's
SPLITS = ('train', 'val')


@dataclasses.dataclass(frozen=True)
class Layout:
  """A COCO tree of one year: its annotation files and image folders."""
  root: str
  year: int

  def annotations(self, split):
    return os.path.join(self.root, 'annotations',
                        'instances_%s%d.json' % (split, self.year))

  def image_dir(self, split):
    return os.path.join(self.root, '%s%d' % (split, self.year))

  def missing(self):
    """The paths of this tree that are not there (files, then folders)."""
    return ([self.annotations(s) for s in SPLITS
             if not os.path.isfile(self.annotations(s))] +
            [self.image_dir(s) + os.sep for s in SPLITS
             if not os.path.isdir(self.image_dir(s))])


def find_layout(roots):
  """The Layout of the first of `roots` holding a COCO instances file (2014's
  before 2017's), or None."""
  for root in roots:
    for year in YEARS:
      layout = Layout(root, year)
      if any(os.path.isfile(layout.annotations(s)) for s in SPLITS):
        return layout
  return None


# --- annotations ------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ImageIndex:
  """One split of COCO for one category, compact. Images keep the order of
  their annotation file; image i's objects (those of the category covering
  more than the threshold of the image) are rows
  box_offsets[i]:box_offsets[i + 1] of `boxes` (COCO's [x, y, width,
  height], pixels) and `areas` (COCO's segmentation areas)."""
  annotations_file: str
  category_id: int
  category_name: str
  threshold: float
  file_names: Tuple[str, ...]
  image_ids: np.ndarray  # int64 [N]
  heights: np.ndarray  # int64 [N], as the annotation file says
  widths: np.ndarray  # int64 [N]
  labels: np.ndarray  # int64 [N]: 1 when the image has an object of the category
  box_offsets: np.ndarray  # int64 [N + 1]
  boxes: np.ndarray  # float64 [M, 4]
  areas: np.ndarray  # float64 [M]
  num_annotations: int  # of every category, as read

  def __len__(self):
    return len(self.file_names)

  def objects(self, i):
    """(boxes [K, 4], areas [K]) of image i."""
    begin, end = self.box_offsets[i], self.box_offsets[i + 1]
    return self.boxes[begin:end], self.areas[begin:end]

  def digest_parts(self):
    """What identifies the index (for a conversion's fingerprint)."""
    return (self.category_name, repr(self.threshold),
            '\n'.join(self.file_names), self.image_ids.tobytes(),
            self.heights.tobytes(), self.widths.tobytes(),
            self.labels.tobytes(), self.box_offsets.tobytes(),
            self.boxes.tobytes(), self.areas.tobytes())


class _Collector:
  """The object hook: images and annotations leave the parse as numbers."""

  def __init__(self):
    self.image_ids, self.heights, self.widths = (array.array('q'), array.array('q'),
                                                 array.array('q'))
    self.file_names = []
    self.object_image_ids, self.category_ids = array.array('q'), array.array('q')
    self.areas, self.boxes = array.array('d'), array.array('d')

  def __call__(self, obj):
    if 'image_id' in obj and 'category_id' in obj:  # an annotation
      self.object_image_ids.append(int(obj['image_id']))
      self.category_ids.append(int(obj['category_id']))
      self.areas.append(float(obj['area']))
      x, y, width, height = obj['bbox']
      self.boxes.extend((float(x), float(y), float(width), float(height)))
      return None
    if 'file_name' in obj and 'height' in obj and 'width' in obj:  # an image
      self.image_ids.append(int(obj['id']))
      self.heights.append(int(obj['height']))
      self.widths.append(int(obj['width']))
      self.file_names.append(str(obj['file_name']))
      return None
    return obj  # categories, licenses, info, RLE segmentations (dropped with theirs)


def read_json_text(path):
  """The file's text; its bytes are freed before the text is parsed."""
  with open(path, 'rb') as f:
    data = f.read()
  try:
    return data.decode('utf-8')
  except UnicodeDecodeError as e:
    raise dataset_utils.ConversionError('%s is not UTF-8 JSON: %s' % (path, e)) from None


def load_index(path, category_name, threshold, stream=None):
  """Reads COCO instances file `path` into an ImageIndex for `category_name`.

  TF-Slim's Visual Wake Words rule: an image is labelled 1 when an
  annotation of the category (crowd annotations too) has an area (COCO's
  'area') greater than `threshold` times the image's height x width (as
  the file gives them); images without such an annotation, or without any,
  are 0. Raises ConversionError in one line for an unreadable file, or an
  unknown category (listing the file's categories).
  """
  stream = stream or sys.stderr
  start = time.monotonic()
  name = os.path.basename(path)
  collector = _Collector()
  try:
    text = read_json_text(path)
    stream.write('reading %s (%.0f MB)\n' % (path, len(text) / 1e6))
    stream.flush()
    content = json.loads(text, object_hook=collector)
    del text
  except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
    if isinstance(e, dataset_utils.ConversionError):
      raise
    what = ('lacks %s' % e) if isinstance(e, KeyError) else str(e)
    raise dataset_utils.ConversionError(
        'cannot read COCO annotations %s: %s' % (path, what)) from None
  except OSError as e:
    raise dataset_utils.ConversionError('cannot read %s: %s' % (path, e)) from None
  if not isinstance(content, dict) or not isinstance(content.get('categories'), list):
    raise dataset_utils.ConversionError(
        '%s is not a COCO instances file (it has no categories)' % path)
  categories = [(int(c['id']), str(c['name'])) for c in content['categories']
                if isinstance(c, dict) and 'id' in c and 'name' in c]
  del content
  category_id = category_id_of(category_name, categories, name)

  ids = np.frombuffer(collector.image_ids, np.int64).copy()
  heights = np.frombuffer(collector.heights, np.int64).copy()
  widths = np.frombuffer(collector.widths, np.int64).copy()
  if not len(ids):
    raise dataset_utils.ConversionError('%s lists no images' % path)
  if np.any(heights * widths <= 0):
    bad = int(np.argmax(heights * widths <= 0))
    raise dataset_utils.ConversionError(
        '%s: image %s has size %dx%d' % (path, collector.file_names[bad],
                                          heights[bad], widths[bad]))
  object_image_ids = np.frombuffer(collector.object_image_ids, np.int64)
  category_ids = np.frombuffer(collector.category_ids, np.int64)
  areas = np.frombuffer(collector.areas, np.float64)
  boxes = np.frombuffer(collector.boxes, np.float64).reshape(-1, 4)
  num_annotations = len(areas)

  # Each object's image, by id (annotations of unlisted images are ignored).
  by_id = np.argsort(ids, kind='stable')
  position = np.minimum(np.searchsorted(ids[by_id], object_image_ids), len(ids) - 1)
  image = by_id[position]
  listed = ids[image] == object_image_ids
  # As TF-Slim: area / (height * width) > threshold, in float64.
  image_area = (heights * widths).astype(np.float64)
  keep = listed & (category_ids == category_id)
  keep[keep] = areas[keep] / image_area[image[keep]] > threshold
  kept_image = image[keep]
  order = np.argsort(kept_image, kind='stable')  # per image, in file order
  labels = np.zeros(len(ids), np.int64)
  labels[kept_image] = 1
  counts = np.bincount(kept_image, minlength=len(ids))
  offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
  index = ImageIndex(
      annotations_file=path, category_id=category_id, category_name=category_name,
      threshold=float(threshold), file_names=tuple(collector.file_names),
      image_ids=ids, heights=heights, widths=widths, labels=labels,
      box_offsets=offsets, boxes=boxes[keep][order].copy(),
      areas=areas[keep][order].copy(), num_annotations=num_annotations)
  del collector
  stream.write('%s: %d images, %d annotations; %d images with %s: %.1f s\n' % (
      name, len(index), num_annotations, int(labels.sum()), category_name,
      time.monotonic() - start))
  stream.flush()
  return index


def category_id_of(category_name, categories, where):
  """The id of `category_name` among [(id, name)], or ConversionError listing
  the names."""
  for category_id, name in categories:
    if name == category_name:
      return category_id
  names = [name for _, name in categories]
  close = difflib.get_close_matches(str(category_name), names, n=1)
  hint = "; did you mean '%s'?" % close[0] if close else ''
  raise dataset_utils.ConversionError(
      "unknown --foreground_class_of_interest '%s'%s (the categories of %s: %s)"
      % (category_name, hint, where, ', '.join(names) or 'none'))


def missing_images(index, image_dir):
  """The file names of `index` that are not files in `image_dir` (one
  directory listing, not a stat per image)."""
  try:
    present = {entry.name for entry in os.scandir(image_dir) if entry.is_file()}
  except OSError:
    present = set()
  missing = [n for n in index.file_names if n not in present]
  # Names with folders in them ('sub/x.jpg') are not in one listing.
  return [n for n in missing if not os.path.isfile(os.path.join(image_dir, n))]


# --- zips -------------------------------------------------------------------------

def _refuse(member, archive, why):
  raise dataset_utils.ConversionError('refusing to extract %r from %s: %s'
                                      % (member, archive, why))


def check_zip_members(archive, infos):
  """Refuses the whole archive if a member would land outside the target
  (absolute path, drive, '..') or is a link or device."""
  for info in infos:
    name = info.filename
    parts = name.replace('\\', '/').split('/')
    if name.startswith(('/', '\\')) or (len(name) > 1 and name[1] == ':'):
      _refuse(name, archive, 'absolute path')
    if '..' in parts:
      _refuse(name, archive, "'..' leaves the target directory")
    kind = stat.S_IFMT(info.external_attr >> 16)  # 0: no Unix type recorded
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
      _refuse(name, archive, 'not a regular file or directory')


def safe_extract_zip(archive, target):
  """Extracts `archive` into `target`: into a hidden folder there first, then
  each top-level entry moved into place (folders merged, existing files
  kept), so an interrupted extraction leaves nothing that looks complete.
  Refuses the archive whole if any member would escape `target`."""
  os.makedirs(target, exist_ok=True)
  scratch = os.path.join(target, '.extract-%d-%s' % (
      os.getpid(), os.path.basename(archive)))
  try:
    with zipfile.ZipFile(archive) as z:
      infos = z.infolist()
      check_zip_members(archive, infos)
      z.extractall(scratch, members=infos)
  except (zipfile.BadZipFile, EOFError) as e:
    shutil.rmtree(scratch, ignore_errors=True)
    raise dataset_utils.ConversionError('cannot read archive %s: %s%s' % (
        archive, e, dataset_utils.DAMAGED_HINT)) from None
  except BaseException:
    shutil.rmtree(scratch, ignore_errors=True)
    raise
  try:
    _merge(scratch, target)
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
  dataset_utils.fsync_directory(target)


def _merge(source, target):
  for name in sorted(os.listdir(source)):
    src, dst = os.path.join(source, name), os.path.join(target, name)
    if not os.path.exists(dst):
      os.replace(src, dst)
    elif os.path.isdir(src) and os.path.isdir(dst):
      _merge(src, dst)


def remove_abandoned_extractions(directory):
  """Deletes the scratch folders of extractions whose process is gone."""
  if not os.path.isdir(directory):
    return
  for name in os.listdir(directory):
    if not name.startswith('.extract-'):
      continue
    pid = name[len('.extract-'):].split('-', 1)[0]
    if pid.isdigit() and not _alive(int(pid)):
      shutil.rmtree(os.path.join(directory, name), ignore_errors=True)


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except OSError:
    return True
  return True
