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
import dataclasses
import hashlib
import http.client
import io
import json
import os
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
from typing import Optional

import numpy as np
import PIL.Image

import tf_compat  # noqa: F401
import zoo_errors
import tensorflow as tf

from datasets.registry import Conversion, Split, shard_count

LABELS_FILENAME = 'labels.txt'
SPLITS_FILENAME = 'splits.json'  # written by earlier versions; no longer read
METADATA_PATTERN = '%s_dataset.json'  # one per dataset name: sizes, classes, shards
DIGEST_BYTES = 1 << 16  # a shard's digest covers its first and last 64 KiB

# Extensions scanned in image folders; anything else (README, .DS_Store) is ignored.
IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.gif', '.webp', '.tif',
                    '.tiff')


DAMAGED_HINT = ('; it may be a partial or damaged download, and can be deleted: '
                'delete it and run again (with --download to fetch it)')


class ConversionError(ValueError):
  """A problem with the user's inputs, reported by the script in one line."""


# --- TF-Example records ---------------------------------------------------------

def int64_feature(values):
  if not isinstance(values, (tuple, list, np.ndarray)):
    values = [values]
  return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def float_feature(values):
  if not isinstance(values, (tuple, list, np.ndarray)):
    values = [values]
  return tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in values]))


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


def array_conversion(dataset_name, arrays, names, num_shards, default_shards,
                     source_id):
  """The Conversion of images held in memory to PNG records: `arrays` is
  {split: (uint8 images [N, H, W(, C)], labels)} in split order, `names` the
  label names, `default_shards` {split: shards} unless `num_shards`."""
  splits = tuple(
      Split(name, [(name, i) for i in range(len(images))],
            shard_count(num_shards, default_shards[name], len(images)))
      for name, (images, _) in arrays.items())

  def to_example(item):
    split_name, index = item
    images, labels = arrays[split_name]
    image, label = images[index], int(labels[index])
    return image_to_tfexample(encode_png(image), b'png', image.shape[0],
                              image.shape[1], label, names[label])

  return Conversion(dataset_name=dataset_name, splits=splits,
                    to_example=to_example, labels_to_names=dict(enumerate(names)),
                    num_classes=len(names), source_id=source_id)


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


def expand_path(path):
  """`~` and $VARIABLES expanded (flags given as --flag=~/x reach us unexpanded)."""
  if not path:
    return path
  return os.path.expandvars(os.path.expanduser(path))


def fsync_directory(path):
  """Makes the renames inside `path` durable (a no-op where directories cannot
  be opened, e.g. Windows)."""
  try:
    fd = os.open(path, os.O_RDONLY)
  except OSError:
    return
  try:
    os.fsync(fd)
  except OSError:
    pass
  finally:
    os.close(fd)


def shard_digest(path):
  """sha256 of a file's size, first and last DIGEST_BYTES: cheap to check on
  every open, and changed by any truncation or replacement in practice."""
  size = os.path.getsize(path)
  digest = hashlib.sha256(str(size).encode())
  with open(path, 'rb') as f:
    digest.update(f.read(DIGEST_BYTES))
    if size > DIGEST_BYTES:
      f.seek(max(DIGEST_BYTES, size - DIGEST_BYTES))
      digest.update(f.read())
  return digest.hexdigest()


def metadata_path(dataset_dir, dataset_name):
  return os.path.join(dataset_dir, METADATA_PATTERN % dataset_name)


def write_metadata(dataset_dir, dataset_name, splits, num_classes, labels_to_names):
  """Writes <name>_dataset.json, the proof that a conversion finished.

  `splits` is {split: [{'file', 'bytes', 'records', 'digest'}, ...]}; the file
  records the split sizes, classes, label names and every shard.
  """
  content = {
      'dataset_name': dataset_name,
      'num_classes': int(num_classes),
      'labels_to_names': {str(k): v for k, v in sorted(labels_to_names.items())},
      'splits': {
          split: {'num_samples': sum(s['records'] for s in shards), 'shards': shards}
          for split, shards in splits.items()},
  }
  path = metadata_path(dataset_dir, dataset_name)
  atomic_write_text(path, json.dumps(content, indent=1, sort_keys=True) + '\n')
  fsync_directory(dataset_dir)


def read_metadata(dataset_dir, dataset_name):
  """The content of <name>_dataset.json, or None when there is none."""
  path = metadata_path(dataset_dir, dataset_name)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path, 'r') as f:
    try:
      content = json.loads(f.read())
    except json.JSONDecodeError as e:
      raise ValueError('%s is not valid JSON: %s' % (path, e)) from None
  try:
    if content['dataset_name'] != dataset_name:
      raise ValueError("%s describes dataset '%s', not '%s'"
                       % (path, content['dataset_name'], dataset_name))
    int(content['num_classes'])
    for split in content['splits'].values():
      for shard in split['shards']:
        (shard['file'], int(shard['bytes']), int(shard['records']), shard['digest'])
  except (KeyError, TypeError, AttributeError) as e:
    raise ValueError('%s lacks %s; rerun download_and_convert_data.py'
                     % (path, e)) from None
  return content


def metadata_labels(content):
  return {int(k): v for k, v in content.get('labels_to_names', {}).items()}


def count_records(path):
  """Records in a TFRecord file; raises ValueError naming a damaged file.

  Read by a TFRecordDataset in a graph of its own (the same in eager and
  graph mode): tf_record_iterator is deprecated and would say so on the
  terminal."""
  try:
    with tf.Graph().as_default():
      count = tf.data.TFRecordDataset(path).reduce(
          tf.constant(0, tf.int64), lambda n, _: n + 1)
      with tf.compat.v1.Session() as session:
        return int(session.run(count))
  except tf.errors.OpError as e:
    raise ValueError('%s is damaged (%s); delete it and convert again'
                     % (path, zoo_errors.one_line(e))) from None


def shard_entry(path, records=None):
  """The metadata of one shard: file name, byte size, record count, digest."""
  return {'file': os.path.basename(path), 'bytes': os.path.getsize(path),
          'records': count_records(path) if records is None else int(records),
          'digest': shard_digest(path)}


def describe_records(dataset_dir, dataset_name, split_files, num_classes,
                     labels_to_names=None):
  """Writes the metadata of record files written by other means (e.g. your own
  writer): `split_files` is {split: [shard paths in dataset_dir]}."""
  write_metadata(dataset_dir, dataset_name,
                 {split: [shard_entry(p) for p in paths]
                  for split, paths in split_files.items()},
                 num_classes, labels_to_names or {})


def warn(message, stream=None):
  stream = stream or sys.stderr
  stream.write('warning: %s\n' % message)
  stream.flush()


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
    raise ConversionError('cannot read archive %s: %s%s' % (archive_path, e, DAMAGED_HINT)) from None


def file_checksum(path, algorithm):
  digest = hashlib.new(algorithm)
  with open(path, 'rb') as f:
    for chunk in iter(lambda: f.read(1 << 20), b''):
      digest.update(chunk)
  return digest.hexdigest()


@dataclasses.dataclass(frozen=True)
class Published:
  """What the publisher of an archive says about it (size and/or checksum)."""
  size: Optional[int] = None
  md5: Optional[str] = None
  sha256: Optional[str] = None

  def check(self, path):
    """None when `path` is the published file, else what is wrong with it."""
    size = os.path.getsize(path)
    if self.size is not None and size != self.size:
      return '%d bytes, the published file has %d' % (size, self.size)
    for algorithm in ('sha256', 'md5'):
      expected = getattr(self, algorithm)
      if expected:
        actual = file_checksum(path, algorithm)
        if actual != expected:
          return '%s %s, the published file has %s' % (algorithm, actual, expected)
    return None


def check_existing(path, published):
  """Refuses an archive already at `path` that is not the published one."""
  problem = published.check(path) if published else None
  if problem:
    raise ConversionError('%s is not the published file (%s); it can be deleted: '
                          'delete it and run again' % (path, problem))


def download(urls, path, published=None, timeout=60):
  """Fetches the first of `urls` that answers into `path`.

  The bytes go to a hidden temporary file, which is renamed to `path` only
  when its size equals the Content-Length and matches `published` (a
  Published); otherwise it is deleted. Raises ConversionError in one line
  naming the file when nothing good could be fetched.
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
        received = 0
        while True:
          try:
            chunk = response.read(1 << 20)
          except http.client.IncompleteRead as e:
            received += len(e.partial)
            chunk = b''
          if not chunk:
            break
          out.write(chunk)
          received += len(chunk)
          progress.add(len(chunk))
        progress.done()
        out.flush()
        os.fsync(out.fileno())
      if total and received != total:
        failures.append('%s: cut short at %d of %d bytes' % (url, received, total))
        continue
      problem = published.check(tmp) if published else None
      if problem:
        failures.append('%s: %s' % (url, problem))
        continue
      os.replace(tmp, path)
      fsync_directory(os.path.dirname(path) or '.')
      return path
    except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
      failures.append('%s: %s' % (url, getattr(e, 'reason', None) or e or repr(e)))
    finally:
      if os.path.exists(tmp):
        os.remove(tmp)
  raise ConversionError(
      'cannot download %s (%s); nothing was kept at %s; without network, put the '
      'published file there and run without --download'
      % (os.path.basename(path), '; '.join(failures), path))


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
  except PIL.UnidentifiedImageError:
    # PIL's message names the in-memory file object (<_io.BytesIO ...>).
    raise ConversionError('cannot decode image %s: not a format PIL can read '
                          '(JPEG, PNG, BMP, GIF, WebP, TIFF, ...)' % path) from None
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
