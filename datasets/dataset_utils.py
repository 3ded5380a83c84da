"""Files of a converted dataset, and the careful I/O that produces them.

Record format (TF-Slim's keys, so TF-Slim's own records read unchanged):
image/encoded, image/format, image/class/label, image/height, image/width and,
where known, image/class/text. Beside the records: labels.txt ('id:name' lines)
and splits.json ({split: num_samples, 'num_classes': n}), written last, so their
presence means the conversion finished.

Also here: atomic file writes, tar extraction that refuses members escaping the
target directory, downloads that fail in one clear line, the image check every
folder image goes through, and a rate-limited progress report.
"""
import io
import json
import os
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import PIL.Image

import tf_compat  # noqa: F401
import tensorflow as tf

LABELS_FILENAME = 'labels.txt'
SPLITS_FILENAME = 'splits.json'

# Extensions scanned in image folders; anything else (README, .DS_Store) is ignored.
IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.gif', '.webp', '.tif',
                    '.tiff')


class ConversionError(ValueError):
  """A problem with the user's inputs, reported by the script in one line."""


# --- TF-Example records ---------------------------------------------------------

def int64_feature(values):
  if not isinstance(values, (tuple, list, np.ndarray)):
    values = [values]
  return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def bytes_feature(value):
  if isinstance(value, str):
    value = value.encode('utf-8')
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def image_to_tfexample(image_data, image_format, height, width, class_id,
                       class_text=None, extra_features=None):
  """One image and its label as a tf.train.Example with TF-Slim's keys."""
  feature = {
      'image/encoded': bytes_feature(image_data),
      'image/format': bytes_feature(image_format),
      'image/class/label': int64_feature(class_id),
      'image/height': int64_feature(height),
      'image/width': int64_feature(width),
  }
  if class_text is not None:
    feature['image/class/text'] = bytes_feature(class_text)
  feature.update(extra_features or {})
  return tf.train.Example(features=tf.train.Features(feature=feature))


# --- labels.txt and splits.json -------------------------------------------------

def temporary_path(path):
  """A hidden sibling of `path`: same filesystem (so os.replace is atomic), and
  no record file pattern matches it, so readers never see a partial file."""
  directory, name = os.path.split(path)
  return os.path.join(directory, '.%s.tmp' % name)


def atomic_write_text(path, text):
  tmp = temporary_path(path)
  try:
    with open(tmp, 'w', encoding='utf-8') as f:
      f.write(text)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def write_label_file(labels_to_names, dataset_dir, filename=LABELS_FILENAME):
  lines = ''.join('%d:%s\n' % (label, labels_to_names[label])
                  for label in sorted(labels_to_names))
  atomic_write_text(os.path.join(dataset_dir, filename), lines)


def has_labels(dataset_dir, filename=LABELS_FILENAME):
  return tf.io.gfile.exists(os.path.join(dataset_dir, filename))


def read_label_file(dataset_dir, filename=LABELS_FILENAME):
  """{label id: class name} from 'id:name' lines (names may contain ':')."""
  path = os.path.join(dataset_dir, filename)
  labels_to_names = {}
  with tf.io.gfile.GFile(path, 'r') as f:
    for number, line in enumerate(f.read().splitlines(), 1):
      if not line.strip():
        continue
      label, sep, name = line.partition(':')
      if not sep or not label.strip().isdigit():
        raise ValueError("%s line %d: expected 'id:name', got %r" % (path, number, line))
      labels_to_names[int(label)] = name
  return labels_to_names


def write_splits_file(split_sizes, num_classes, dataset_dir):
  content = dict(split_sizes, num_classes=int(num_classes))
  atomic_write_text(os.path.join(dataset_dir, SPLITS_FILENAME),
                    json.dumps(content, indent=2, sort_keys=True) + '\n')


def read_splits_file(dataset_dir):
  """{split: num_samples, 'num_classes': n}, or None when there is no splits.json."""
  path = os.path.join(dataset_dir, SPLITS_FILENAME)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path, 'r') as f:
    try:
      content = json.loads(f.read())
    except json.JSONDecodeError as e:
      raise ValueError('%s is not valid JSON: %s' % (path, e)) from None
  if (not isinstance(content, dict) or 'num_classes' not in content
      or not all(isinstance(v, int) for v in content.values())):
    raise ValueError("%s must map split names and 'num_classes' to integers" % path)
  return content


# --- archives and downloads -----------------------------------------------------

def safe_extract_tar(archive_path, target_dir):
  """Extracts a tar archive, refusing it whole if any member would land outside
  `target_dir` (absolute path, '..', links pointing out, device files)."""
  os.makedirs(target_dir, exist_ok=True)
  try:
    with tarfile.open(archive_path) as tar:
      members = tar.getmembers()
      # Check every member before writing anything, so a bad archive leaves no
      # partial extraction; extractall re-checks against the real filesystem.
      for member in members:
        try:
          if member.name.startswith(('/', '\\')):  # the filter would strip it
            raise tarfile.AbsolutePathError(member)
          tarfile.data_filter(member, target_dir)
        except tarfile.FilterError as e:
          raise ConversionError('refusing to extract %r from %s: %s'
                                % (member.name, archive_path, e)) from None
      try:
        tar.extractall(target_dir, members=members, filter='data')
      except tarfile.FilterError as e:
        raise ConversionError('refusing to extract %r from %s: %s'
                              % (e.tarinfo.name, archive_path, e)) from None
  except (tarfile.TarError, EOFError) as e:
    raise ConversionError('cannot read archive %s: %s' % (archive_path, e)) from None


def download(urls, path, timeout=60):
  """Fetches the first of `urls` that answers into `path` (atomically).

  Raises ConversionError in one line when none can be fetched (e.g. no network).
  """
  if isinstance(urls, str):
    urls = [urls]
  tmp = temporary_path(path)
  failures = []
  for url in urls:
    try:
      with urllib.request.urlopen(url, timeout=timeout) as response, \
          open(tmp, 'wb') as out:
        total = int(response.headers.get('Content-Length') or 0)
        progress = Progress('downloading %s' % url, total or None, unit='MB',
                            scale=1 << 20)
        while True:
          chunk = response.read(1 << 20)
          if not chunk:
            break
          out.write(chunk)
          progress.add(len(chunk))
        progress.done()
      os.replace(tmp, path)
      return path
    except (urllib.error.URLError, OSError) as e:
      failures.append('%s: %s' % (url, getattr(e, 'reason', None) or e))
    finally:
      if os.path.exists(tmp):
        os.remove(tmp)
  raise ConversionError(
      'cannot download %s (%s); without network, put the file at %s and run '
      'without --download' % (os.path.basename(path), '; '.join(failures), path))


# --- images ---------------------------------------------------------------------

def encode_png(array):
  """uint8 [H, W] or [H, W, 1|3] array -> PNG bytes (lossless)."""
  array = np.asarray(array, dtype=np.uint8)
  if array.ndim == 3 and array.shape[-1] == 1:
    array = array[..., 0]
  buffer = io.BytesIO()
  PIL.Image.fromarray(array).save(buffer, format='PNG')
  return buffer.getvalue()


def read_image_file(path):
  """Decodes an image file completely and returns (bytes, format, height, width).

  JPEG (RGB or grayscale) and PNG bytes are kept as they are; anything TF's
  decode_image cannot read as they are (CMYK JPEG, BMP, GIF, WebP, TIFF) is
  re-encoded as RGB PNG, losslessly from PIL's decoding. A file PIL cannot decode
  raises ConversionError naming it, before any record holds it.
  """
  with open(path, 'rb') as f:
    data = f.read()
  try:
    with PIL.Image.open(io.BytesIO(data)) as image:
      image.verify()  # structure and checksums; load() below decodes the pixels
    with PIL.Image.open(io.BytesIO(data)) as image:
      image.load()
      width, height = image.size
      if image.format in ('JPEG', 'MPO') and image.mode in ('RGB', 'L'):
        return data, b'jpeg', height, width
      if image.format == 'PNG':
        return data, b'png', height, width
      return encode_png(np.asarray(image.convert('RGB'))), b'png', height, width
  except Exception as e:  # PIL raises many types for bad data; all mean the same
    raise ConversionError('cannot decode image %s: %s' % (path, e)) from None


# --- progress -------------------------------------------------------------------

class Progress:
  """Thread-safe counter reporting count, total and rate at most every `interval` s."""

  def __init__(self, what, total, unit='images', scale=1, stream=None,
               interval=1.0):
    self._what, self._total, self._unit, self._scale = what, total, unit, scale
    self._stream = stream or sys.stderr
    self._interval = interval
    self._lock = threading.Lock()
    self._count = 0
    self._start = self._last = time.monotonic()

  def add(self, n=1):
    with self._lock:
      self._count += n
      now = time.monotonic()
      if now - self._last >= self._interval:
        self._last = now
        self._report(now)

  def done(self):
    with self._lock:
      self._report(time.monotonic())

  def _report(self, now):
    count = self._count / self._scale
    rate = count / max(now - self._start, 1e-6)
    total = '/%.0f' % (self._total / self._scale) if self._total else ''
    self._stream.write('%s: %.0f%s %s, %.1f %s/sec\n'
                       % (self._what, count, total, self._unit, rate, self._unit))
    self._stream.flush()
