"""A small synthetic COCO tree, shaped as COCO's zips extract (for tests).

    facts = write_coco_tree(root, num_train=16, num_val=8, year=2014,
                            size=(120, 160), seed=0)

writes <root>/annotations/instances_{train,val}<year>.json and
<root>/{train,val}<year>/*.jpg: real JPEGs drawn with PIL. A "person" is a
bright ellipse (and its annotation: polygon, area, bbox); other categories
(bicycle, car, cat, dog, bottle, with COCO's ids 2, 3, 17, 18, 44) are dark
rectangles; the background is smooth mid-grey noise, so a small CNN can tell
person images from the others, in colour or grayscale.

With COCO's quirks: image ids neither contiguous nor sorted, annotations in
no image order, images without annotations, crowd annotations (iscrowd 1,
RLE segmentation), persons too small to count, one exactly at the threshold
(area / (height * width) == 0.005 in float64, so not above it), non-square
sizes in both orientations, a grayscale JPEG, and in 2014's train a CMYK
JPEG. The first images of each split are these special cases (their names
are in facts['special']); the rest alternate person and background.

The returned facts:
  root, year
  annotations     {split: path of its instances file}
  image_dirs      {split: folder of its images}
  labels          {split: {file name: label}} by TF-Slim's rule (person,
                  0.005), in the file's image order
  sizes           {file name: (height, width)}
  special         {case: file name}: no_annotations, person (a big and a
                  tiny person: one box counts), crowd_person, tiny_person,
                  at_threshold, above_threshold, dog_only, grayscale,
                  cmyk (2014 only), val_person, val_no_annotations
  grayscale, cmyk [file names]
  categories      {id: name}
`tf_slim_labels(path, category, threshold)` is TF-Slim's rule written
plainly over json.load, the reference the converter is checked against.
"""
import json
import math
import os

import numpy as np
import PIL.Image
import PIL.ImageDraw

CATEGORIES = ((1, 'person', 'person'), (2, 'bicycle', 'vehicle'),
              (3, 'car', 'vehicle'), (17, 'cat', 'animal'), (18, 'dog', 'animal'),
              (44, 'bottle', 'kitchen'))
OTHER_IDS = (2, 3, 17, 18, 44)
THRESHOLD = 0.005
PERSON_COLOUR = (245, 225, 205)
OBJECT_COLOUR = (40, 30, 25)

# (case, what it holds); labels follow from the annotations.
TRAIN_CASES = ('no_annotations', 'person', 'crowd_person', 'tiny_person',
               'at_threshold', 'above_threshold', 'dog_only', 'grayscale', 'cmyk')
VAL_CASES = ('val_no_annotations', 'val_person')


def tf_slim_labels(path, category='person', threshold=THRESHOLD):
  """{file name: label} of an instances file by TF-Slim's rule: 1 when an
  annotation of `category` has area / (height * width) > threshold."""
  with open(path, encoding='utf-8') as f:
    content = json.load(f)
  category_id = next(c['id'] for c in content['categories'] if c['name'] == category)
  images = {image['id']: image for image in content['images']}
  positive = set()
  for annotation in content['annotations']:
    image = images.get(annotation['image_id'])
    if image is None or annotation['category_id'] != category_id:
      continue
    if annotation['area'] / (image['height'] * image['width']) > threshold:
      positive.add(image['id'])
  return {image['file_name']: int(image['id'] in positive)
          for image in content['images']}


def at_threshold_area(height, width, threshold=THRESHOLD):
  """The largest area with area / (height * width) == threshold in float64
  (not above it, so not counted)."""
  pixels = height * width
  area = threshold * pixels
  while area / pixels > threshold:
    area = float(np.nextafter(area, 0))
  while np.nextafter(area, math.inf) / pixels <= threshold:
    area = float(np.nextafter(area, math.inf))
  assert area / pixels == threshold
  return area


class _Writer:

  def __init__(self, root, split, year, size, rng, image_ids):
    self.root, self.split, self.year, self.size = root, split, year, size
    self.rng, self.image_ids = rng, image_ids
    self.images, self.annotations = [], []
    self.image_dir = os.path.join(root, '%s%d' % (split, year))
    os.makedirs(self.image_dir, exist_ok=True)

  def file_name(self, image_id):
    if self.year == 2014:
      return 'COCO_%s2014_%012d.jpg' % (self.split, image_id)
    return '%012d.jpg' % image_id

  def image_size(self, i):
    height, width = self.size
    if i % 3 == 1:  # portrait
      height, width = width, height
    elif i % 3 == 2:
      height = height + 8 * (1 + i % 4)
    return height, width

  def background(self, height, width):
    """Smooth mid-grey noise (no bright regions: those are persons)."""
    coarse = self.rng.randint(60, 150, size=(max(height // 16, 2), max(width // 16, 2), 3))
    smooth = np.asarray(PIL.Image.fromarray(coarse.astype(np.uint8)).resize(
        (width, height), PIL.Image.BILINEAR), dtype=np.int32)
    noise = self.rng.randint(-20, 21, size=(height, width, 3))
    return PIL.Image.fromarray(np.clip(smooth + noise, 0, 170).astype(np.uint8))

  def add_image(self, i, mode='RGB'):
    """A new image record; returns (id, file name, height, width, PIL image)."""
    image_id = self.image_ids.pop()
    height, width = self.image_size(i)
    name = self.file_name(image_id)
    self.images.append({
        'license': 1 + i % 3, 'file_name': name,
        'coco_url': 'http://images.cocodataset.org/%s%d/%s' % (self.split, self.year, name),
        'height': height, 'width': width, 'date_captured': '2013-11-14 16:28:13',
        'flickr_url': 'http://farm4.staticflickr.com/%d.jpg' % image_id, 'id': image_id})
    return image_id, name, height, width, self.background(height, width)

  def annotate(self, image_id, category_id, area, bbox, segmentation, iscrowd=0):
    self.annotations.append({
        'segmentation': segmentation, 'area': area, 'iscrowd': iscrowd,
        'image_id': image_id, 'bbox': [round(float(v), 2) for v in bbox],
        'category_id': category_id, 'id': 0})

  def person(self, draw, image_id, cx, cy, ax, ay, area=None, annotated=True):
    """A bright ellipse with semi-axes (ax, ay), and its annotation."""
    draw.ellipse([cx - ax, cy - ay, cx + ax, cy + ay], fill=PERSON_COLOUR)
    if not annotated:
      return
    polygon = []
    for k in range(16):
      angle = 2 * math.pi * k / 16
      polygon += [round(cx + ax * math.cos(angle), 2), round(cy + ay * math.sin(angle), 2)]
    if area is None:
      area = round(math.pi * ax * ay, 2)
    self.annotate(image_id, 1, area, [cx - ax, cy - ay, 2 * ax, 2 * ay], [polygon])

  def thing(self, draw, image_id, category_id, x, y, w, h):
    """A dark rectangle of another category."""
    draw.rectangle([x, y, x + w, y + h], fill=OBJECT_COLOUR)
    self.annotate(image_id, category_id, float(w * h), [x, y, w, h],
                  [[x, y, x + w, y, x + w, y + h, x, y + h]])

  def big_person(self, draw, image_id, height, width):
    """A person covering about 4-15% of the image."""
    ay = self.rng.uniform(0.22, 0.4) * height
    ax = self.rng.uniform(0.35, 0.6) * ay
    ax = min(ax, 0.45 * width)
    cx = self.rng.uniform(ax + 1, width - ax - 1)
    cy = self.rng.uniform(ay + 1, height - ay - 1)
    self.person(draw, image_id, cx, cy, ax, ay)

  def some_things(self, draw, image_id, height, width, count):
    for _ in range(count):
      w = int(self.rng.randint(max(width // 8, 2), max(width // 3, 3)))
      h = int(self.rng.randint(max(height // 8, 2), max(height // 3, 3)))
      x = int(self.rng.randint(0, width - w))
      y = int(self.rng.randint(0, height - h))
      self.thing(draw, image_id, int(self.rng.choice(OTHER_IDS)), x, y, w, h)

  def save(self, name, image, mode='RGB'):
    path = os.path.join(self.image_dir, name)
    if mode == 'L':
      image = image.convert('L')
    elif mode == 'CMYK':
      image = image.convert('CMYK')
    image.save(path, format='JPEG', quality=90)

  def case(self, i, case):
    """Writes image i as `case` (a special case, or 'person'/'background')."""
    mode = {'grayscale': 'L', 'cmyk': 'CMYK'}.get(case, 'RGB')
    image_id, name, height, width, image = self.add_image(i, mode)
    draw = PIL.ImageDraw.Draw(image)
    pixels = height * width
    tiny = math.sqrt(0.002 * pixels / math.pi)  # 0.2% of the image
    if case in ('person', 'val_person', 'grayscale'):
      self.some_things(draw, image_id, height, width, 1)
      self.big_person(draw, image_id, height, width)
      self.person(draw, image_id, width * 0.85, height * 0.85, tiny, tiny)
    elif case == 'crowd_person':
      # A crowd: several people, one RLE annotation covering them all.
      for k in range(4):
        self.person(draw, image_id, width * (0.2 + 0.2 * k), height * 0.5,
                    width * 0.06, height * 0.2, annotated=False)
      area = float(int(0.12 * pixels))
      counts = [int(0.3 * pixels), int(area), pixels - int(0.3 * pixels) - int(area)]
      self.annotate(image_id, 1, area, [width * 0.14, height * 0.3, width * 0.72, height * 0.4],
                    {'counts': counts, 'size': [height, width]}, iscrowd=1)
    elif case == 'tiny_person':
      self.some_things(draw, image_id, height, width, 1)
      self.person(draw, image_id, width / 2, height / 2, tiny, tiny)
    elif case in ('at_threshold', 'above_threshold'):
      area = at_threshold_area(height, width)
      if case == 'above_threshold':
        area += 0.5
      side = math.sqrt(area / math.pi)
      self.person(draw, image_id, width / 2, height / 2, side, side, area=area)
    elif case == 'dog_only':
      self.thing(draw, image_id, 18, width // 4, height // 4, width // 2, height // 2)
    elif case == 'background':
      self.some_things(draw, image_id, height, width, int(self.rng.randint(0, 3)))
    elif case not in ('no_annotations', 'val_no_annotations', 'cmyk'):
      raise ValueError('unknown case %r' % case)
    self.save(name, image, mode)
    return name, mode

  def write_annotations(self):
    order = self.rng.permutation(len(self.annotations))
    annotations = [self.annotations[k] for k in order]  # no image order
    for number, annotation in enumerate(annotations):
      annotation['id'] = 900000 + number * 7
    content = {
        'info': {'description': 'synthetic COCO %d' % self.year, 'version': '1.0',
                 'year': self.year, 'contributor': 'tests/coco_tree.py',
                 'date_created': '2017-09-01 00:00:00'},
        'images': self.images,
        'licenses': [{'url': 'http://creativecommons.org/licenses/by/2.0/', 'id': k,
                      'name': 'Attribution License'} for k in (1, 2, 3)],
        'annotations': annotations,
        'categories': [{'supercategory': s, 'id': c, 'name': n} for c, n, s in CATEGORIES],
    }
    path = os.path.join(self.root, 'annotations',
                        'instances_%s%d.json' % (self.split, self.year))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as f:
      json.dump(content, f)
    return path


def write_coco_tree(root, num_train=16, num_val=8, year=2014, size=(120, 160),
                    seed=0):
  """Writes the tree under `root`; returns its facts (module doc)."""
  train_cases = [c for c in TRAIN_CASES if c != 'cmyk' or year == 2014]
  if num_train < len(train_cases) or num_val < len(VAL_CASES):
    raise ValueError('write_coco_tree needs num_train >= %d and num_val >= %d'
                     % (len(train_cases), len(VAL_CASES)))
  rng = np.random.RandomState(seed)
  ids = [int(i) for i in rng.choice(600000, num_train + num_val, replace=False) + 1]
  facts = {'root': root, 'year': year, 'annotations': {}, 'image_dirs': {},
           'labels': {}, 'sizes': {}, 'special': {}, 'grayscale': [], 'cmyk': [],
           'categories': {c: n for c, n, _ in CATEGORIES}}
  for split, count, cases in (('train', num_train, train_cases),
                              ('val', num_val, list(VAL_CASES))):
    writer = _Writer(root, split, year, tuple(size), rng, ids)
    for i in range(count):
      case = cases[i] if i < len(cases) else (
          'person' if (i - len(cases)) % 2 == 0 else 'background')
      name, mode = writer.case(i, case)
      if i < len(cases):
        facts['special'][case] = name
      if mode == 'L':
        facts['grayscale'].append(name)
      elif mode == 'CMYK':
        facts['cmyk'].append(name)
    path = writer.write_annotations()
    facts['annotations'][split] = path
    facts['image_dirs'][split] = writer.image_dir
    facts['labels'][split] = tf_slim_labels(path)
    facts['sizes'].update({image['file_name']: (image['height'], image['width'])
                           for image in writer.images})
  return facts
