"""Peak memory and time of reading COCO 2014's train annotations for visualwakewords.

    python benchmarks/vww_annotations_memory.py [--json=PATH] [--baseline]

Writes (unless --json names one already written) a synthetic
instances_train2014.json of COCO 2014's train size: 82,783 images and
604,907 annotations (about 1% crowd RLEs, the rest polygons of 8-63 points,
areas as COCO writes them), about 450 MB. Then, each in a fresh process so
the peaks are independent, it measures datasets.coco.load_index (what the
visualwakewords converter does per split) and, with --baseline, json.load
of the whole file (what TF-Slim's converter does first). Per process: the
resident set after imports (TensorFlow is imported: the converter runs
with it), the peak (resource.getrusage ru_maxrss), the resident set after
the step (what stays while the records are written) and its seconds.
"""
import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

NUM_IMAGES = 82783
NUM_ANNOTATIONS = 604907
CATEGORY_IDS = [1] * 30 + list(range(2, 91))  # person about a quarter of them


def _polygon(rng, width, height):
  points = rng.randint(8, 63)
  values = []
  for _ in range(points):
    values += [round(rng.uniform(0, width), 2), round(rng.uniform(0, height), 2)]
  return [values]


def write_annotations(path, seed=0):
  """The synthetic instances file; returns (bytes, images, annotations)."""
  rng = random.Random(seed)
  # Distinct polygons from a pool: the parser reads each occurrence anyway.
  pool = [json.dumps(_polygon(rng, 640, 480)) for _ in range(3000)]
  ids = rng.sample(range(1, 600000), NUM_IMAGES)
  sizes = [(rng.choice((480, 427, 640, 375, 500)), rng.choice((640, 480, 500, 612)))
           for _ in ids]
  with open(path, 'w', encoding='utf-8') as f:
    f.write('{"info": {"description": "synthetic COCO 2014", "year": 2014}, '
            '"images": [')
    f.write(', '.join(
        json.dumps({'license': 3, 'file_name': 'COCO_train2014_%012d.jpg' % i,
                    'coco_url': 'http://images.cocodataset.org/train2014/'
                                'COCO_train2014_%012d.jpg' % i,
                    'height': h, 'width': w, 'date_captured': '2013-11-14 16:28:13',
                    'flickr_url': 'http://farm4.staticflickr.com/3153/%d.jpg' % i,
                    'id': i})
        for i, (h, w) in zip(ids, sizes)))
    f.write('], "licenses": [{"url": "http://creativecommons.org/licenses/by/2.0/", '
            '"id": 3, "name": "Attribution License"}], "annotations": [')
    chunk = []
    for number in range(NUM_ANNOTATIONS):
      k = rng.randrange(NUM_IMAGES)
      height, width = sizes[k]
      w, h = rng.uniform(1, width / 2), rng.uniform(1, height / 2)
      if rng.random() < 0.01:
        counts = [rng.randrange(1, 5000) for _ in range(rng.randint(20, 200))]
        segmentation = json.dumps({'counts': counts, 'size': [height, width]})
        crowd = 1
      else:
        segmentation, crowd = pool[rng.randrange(len(pool))], 0
      chunk.append(
          '{"segmentation": %s, "area": %r, "iscrowd": %d, "image_id": %d, '
          '"bbox": [%.2f, %.2f, %.2f, %.2f], "category_id": %d, "id": %d}' % (
              segmentation, w * h * rng.uniform(0.4, 0.9), crowd, ids[k],
              rng.uniform(0, width - w), rng.uniform(0, height - h), w, h,
              rng.choice(CATEGORY_IDS), 100000 + number))
      if len(chunk) == 10000:
        f.write(('' if number < 10000 else ', ') + ', '.join(chunk))
        chunk = []
    if chunk:
      f.write(', ' + ', '.join(chunk))
    f.write('], "categories": [%s]}' % ', '.join(
        '{"supercategory": "thing", "id": %d, "name": "%s"}'
        % (c, 'person' if c == 1 else 'category%d' % c) for c in range(1, 91)))
  return os.path.getsize(path), NUM_IMAGES, NUM_ANNOTATIONS


def _rss_mb():
  with open('/proc/self/status') as f:
    for line in f:
      if line.startswith('VmRSS:'):
        return int(line.split()[1]) / 1024
  return float('nan')


def measure(path, what):
  """In this process: {'after_imports_mb', 'peak_mb', 'seconds', ...}."""
  import quiet_tensorflow  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
  from datasets import coco  # pylint: disable=import-outside-toplevel
  after_imports = _rss_mb()
  start = time.monotonic()
  if what == 'load_index':
    index = coco.load_index(path, 'person', 0.005, stream=open(os.devnull, 'w'))
    result = {'images': len(index), 'annotations': index.num_annotations,
              'person_images': int(index.labels.sum()),
              'index_mb': sum(a.nbytes for a in (
                  index.image_ids, index.heights, index.widths, index.labels,
                  index.box_offsets, index.boxes, index.areas)) / 2 ** 20}
  else:
    with open(path, encoding='utf-8') as f:
      content = json.load(f)
    result = {'images': len(content['images']),
              'annotations': len(content['annotations'])}
  result.update(what=what, seconds=round(time.monotonic() - start, 1),
                after_imports_mb=round(after_imports), after_mb=round(_rss_mb()),
                peak_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
  return result


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--json', help='an instances file to read (default: write '
                      'the synthetic one in a temporary directory)')
  parser.add_argument('--baseline', action='store_true',
                      help="also measure json.load of the whole file (TF-Slim's)")
  parser.add_argument('--measure', choices=('load_index', 'json_load'),
                      help=argparse.SUPPRESS)  # the child's part
  args = parser.parse_args()
  if args.measure:
    print(json.dumps(measure(args.json, args.measure)))
    return
  with tempfile.TemporaryDirectory() as scratch:
    path = args.json
    if not path:
      path = os.path.join(scratch, 'instances_train2014.json')
      start = time.monotonic()
      size, images, annotations = write_annotations(path)
      print('wrote %s: %.0f MB, %d images, %d annotations (%.0f s)' % (
          path, size / 1e6, images, annotations, time.monotonic() - start))
    print('file: %.0f MB' % (os.path.getsize(path) / 1e6))
    for what in ['load_index'] + (['json_load'] if args.baseline else []):
      child = subprocess.run(
          [sys.executable, os.path.abspath(__file__), '--json', path,
           '--measure', what], capture_output=True, text=True, timeout=1800,
          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
      if child.returncode != 0:
        print('%s failed: %s' % (what, child.stderr[-2000:]))
        continue
      result = json.loads(child.stdout.strip().splitlines()[-1])
      print('%-10s peak RSS %5d MB (%d MB after imports, +%d MB; %d MB after '
          'the step), %5.1f s; %s' % (
              what, result['peak_mb'], result['after_imports_mb'],
              result['peak_mb'] - result['after_imports_mb'], result['after_mb'],
              result['seconds'],
              ', '.join('%s %s' % (k, round(v, 1) if isinstance(v, float) else v)
                        for k, v in result.items()
                        if k not in ('what', 'seconds', 'peak_mb',
                                     'after_imports_mb', 'after_mb'))))


if __name__ == '__main__':
  main()
