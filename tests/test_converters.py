"""Converters: real source formats in, the same pixels and labels out of the reader.

Each test builds a small source in the format users download (idx .gz,
cifar-10-python.tar.gz, flower_photos.tgz, folders of JPEG/PNG), converts it and
reads it back through dataset_factory + reader.
"""
import gzip
import io
import os
import pickle
import re
import shutil
import struct
import tarfile
import urllib.error

import numpy as np
import PIL.Image
import pytest
from absl import flags as absl_flags
import tensorflow as tf

import download_and_convert_data
from datasets import converters
from datasets import dataset_factory
from datasets import dataset_utils
from datasets import reader

tf1 = tf.compat.v1
RNG = np.random.RandomState(1)


# --- helpers --------------------------------------------------------------------

def keep_uint8(image):
  return image


def read_split(name, split, dataset_dir, batch_size=1):
  """(list of uint8 images, list of labels) of a split, in record order."""
  descriptor = dataset_factory.get_dataset(name, split, dataset_dir)
  with tf.Graph().as_default():
    dataset = reader.make_dataset(descriptor, batch_size=batch_size,
                                  preprocess_fn=keep_uint8, is_training=False,
                                  num_readers=1, num_epochs=1, deterministic=True)
    next_batch = tf1.data.make_one_shot_iterator(dataset).get_next()
    images, labels = [], []
    with tf1.Session() as sess:
      while True:
        try:
          batch_images, batch_labels = sess.run(next_batch)
        except tf.errors.OutOfRangeError:
          break
        images.extend(batch_images)
        labels.extend(int(label) for label in batch_labels)
  assert len(images) == descriptor.num_samples
  return images, labels


def record_files(name, split, dataset_dir):
  pattern = dataset_factory.split_file_pattern(name, split, dataset_dir)
  return sorted(tf.io.gfile.glob(pattern))


def count_records(path):
  return sum(1 for _ in tf1.io.tf_record_iterator(path))


def random_image(height, width, channels=3):
  shape = (height, width) if channels == 1 else (height, width, channels)
  return RNG.randint(0, 256, size=shape, dtype=np.uint8)


def save_image(path, array, image_format):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  PIL.Image.fromarray(array).save(path, format=image_format)


def pil_pixels(data):
  """PIL's decoding of an image file's bytes, as RGB."""
  with PIL.Image.open(io.BytesIO(data)) as image:
    return np.asarray(image.convert('RGB'))


def file_sources(paths_to_labels):
  """{path: (file bytes, label)}."""
  sources = {}
  for path, label in paths_to_labels.items():
    with open(path, 'rb') as f:
      sources[path] = f.read(), label
  return sources


# TF decodes JPEG with its fast integer DCT (as TF-Slim did), PIL with the
# accurate one: pixels differ by a few levels, up to 18 at the sharp edges of
# a real photograph (scikit-learn's china.jpg), 1.3 on average.
JPEG_TOLERANCE = 8
PHOTO_TOLERANCE = 24


def assert_records_hold_each_source_once(name, dataset_dir, sources,
                                         splits=('train', 'validation'),
                                         jpeg_tolerance=JPEG_TOLERANCE):
  """The records of `splits` are `sources` ({key: (file bytes, label)}), each once.

  A record stores the file's own bytes (or, for formats re-encoded as PNG,
  exactly PIL's pixels), its label, and decodes to PIL's pixels.
  """
  by_bytes = {data: key for key, (data, _) in sources.items()}
  seen = []
  for split in splits:
    encoded = [tf.train.Example.FromString(record).features.feature[
        'image/encoded'].bytes_list.value[0]
               for path in record_files(name, split, dataset_dir)
               for record in tf1.io.tf_record_iterator(path)]
    images, labels = read_split(name, split, dataset_dir)  # same order
    for data, image, label in zip(encoded, images, labels):
      key = by_bytes.get(data)
      if key is None:
        key = next(k for k, (d, _) in sources.items()
                   if np.array_equal(pil_pixels(d), image))
      expected = pil_pixels(sources[key][0])
      tolerance = jpeg_tolerance if data[:2] == b'\xff\xd8' else 0
      assert label == sources[key][1], key
      assert image.shape == expected.shape, key
      assert np.abs(image.astype(int) - expected).max() <= tolerance, key
      seen.append(key)
  assert sorted(seen) == sorted(sources)


def make_tgz(path, files, links=()):
  """A .tgz of {member name: bytes} and (name, target) symlinks."""
  with tarfile.open(path, 'w:gz') as tar:
    for name, data in files.items():
      info = tarfile.TarInfo(name)
      info.size = len(data)
      tar.addfile(info, io.BytesIO(data))
    for name, target in links:
      info = tarfile.TarInfo(name)
      info.type, info.linkname = tarfile.SYMTYPE, target
      tar.addfile(info)


def jpeg_bytes(array, quality=90):
  buffer = io.BytesIO()
  PIL.Image.fromarray(array).save(buffer, format='JPEG', quality=quality)
  return buffer.getvalue()


# --- mnist ----------------------------------------------------------------------

def write_idx(path, magic, array):
  header = struct.pack('>i', magic) + struct.pack('>%di' % array.ndim, *array.shape)
  with gzip.open(path, 'wb') as f:
    f.write(header + array.astype(np.uint8).tobytes())


def make_mnist_source(source_dir, sizes={'train': 5, 'test': 3}):
  prefixes = {'train': 'train', 'test': 't10k'}
  os.makedirs(source_dir, exist_ok=True)
  expected = {}
  for split, n in sizes.items():
    images = RNG.randint(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = RNG.randint(0, 10, size=n).astype(np.uint8)
    write_idx(os.path.join(source_dir, '%s-images-idx3-ubyte.gz' % prefixes[split]),
              2051, images)
    write_idx(os.path.join(source_dir, '%s-labels-idx1-ubyte.gz' % prefixes[split]),
              2049, labels)
    expected[split] = images, labels
  return expected


def test_mnist_round_trips_pixels_and_labels(tmp_path):
  expected = make_mnist_source(str(tmp_path / 'src'))
  out = str(tmp_path / 'out')
  sizes = converters.convert('mnist', out, source_dir=str(tmp_path / 'src'))
  assert sizes == {'train': 5, 'test': 3}
  for split, (images, labels) in expected.items():
    got_images, got_labels = read_split('mnist', split, out)
    np.testing.assert_array_equal(np.stack(got_images), images[..., None])
    assert got_labels == labels.tolist()
  descriptor = dataset_factory.get_dataset('mnist', 'train', out)
  assert (descriptor.num_classes, descriptor.channels) == (10, 1)
  assert descriptor.labels_to_names[6] == 'six'
  assert [os.path.basename(p) for p in record_files('mnist', 'train', out)] == [
      'mnist_train-00000-of-00002.tfrecord', 'mnist_train-00001-of-00002.tfrecord']


def test_mnist_bad_magic_number_names_the_file(tmp_path):
  make_mnist_source(str(tmp_path))
  labels_path = str(tmp_path / 't10k-labels-idx1-ubyte.gz')
  write_idx(labels_path, 2051, np.zeros((3, 1, 1), np.uint8))
  with pytest.raises(dataset_utils.ConversionError, match='t10k-labels-idx1-ubyte.gz'):
    converters.convert('mnist', str(tmp_path / 'out'), source_dir=str(tmp_path))


def test_missing_source_says_where_and_how(tmp_path):
  with pytest.raises(dataset_utils.ConversionError,
                     match='missing .*train-images-idx3-ubyte.gz.*--download'):
    converters.convert('mnist', str(tmp_path))


# --- cifar10 --------------------------------------------------------------------

def make_cifar_source(source_dir, per_batch=2):
  """cifar-10-python.tar.gz as published: protocol-2 pickles with bytes keys."""
  files, expected = {}, {'train': ([], []), 'test': ([], [])}
  names = ['data_batch_%d' % i for i in range(1, 6)] + ['test_batch']
  for name in names:
    images = RNG.randint(0, 256, size=(per_batch, 32, 32, 3), dtype=np.uint8)
    labels = RNG.randint(0, 10, size=per_batch).tolist()
    data = images.transpose(0, 3, 1, 2).reshape(per_batch, 3072)  # R, G, B planes
    batch = {b'batch_label': name.encode(), b'labels': labels, b'data': data,
             b'filenames': [b'img%d.png' % i for i in range(per_batch)]}
    files['cifar-10-batches-py/' + name] = pickle.dumps(batch, protocol=2)
    split = 'test' if name == 'test_batch' else 'train'
    expected[split][0].extend(images)
    expected[split][1].extend(labels)
  meta = {b'label_names': [n.encode() for n in (
      'airplane', 'automobile', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship',
      'truck')], b'num_cases_per_batch': per_batch, b'num_vis': 3072}
  files['cifar-10-batches-py/batches.meta'] = pickle.dumps(meta, protocol=2)
  os.makedirs(source_dir, exist_ok=True)
  make_tgz(os.path.join(source_dir, 'cifar-10-python.tar.gz'), files)
  return expected


def test_cifar10_round_trips_pixels_and_labels(tmp_path):
  expected = make_cifar_source(str(tmp_path))
  assert converters.convert('cifar10', str(tmp_path)) == {'train': 10, 'test': 2}
  for split, (images, labels) in expected.items():
    got_images, got_labels = read_split('cifar10', split, str(tmp_path))
    np.testing.assert_array_equal(np.stack(got_images), np.stack(images))
    assert got_labels == labels
  descriptor = dataset_factory.get_dataset('cifar10', 'test', str(tmp_path))
  assert descriptor.labels_to_names[9] == 'truck'


def test_cifar10_refuses_pickles_that_call_code(tmp_path):
  make_cifar_source(str(tmp_path))
  archive = str(tmp_path / 'cifar-10-python.tar.gz')
  with tarfile.open(archive) as tar:
    files = {m.name: tar.extractfile(m).read() for m in tar}
  files['cifar-10-batches-py/test_batch'] = pickle.dumps(os.system)  # a callable
  make_tgz(archive, files)
  with pytest.raises(dataset_utils.ConversionError, match='test_batch.*not allowed'):
    converters.convert('cifar10', str(tmp_path / 'out'), source_dir=str(tmp_path))


# --- flowers --------------------------------------------------------------------

FLOWER_CLASSES = ('daisy', 'dandelion', 'roses', 'sunflowers', 'tulips')


def make_flowers_source(source_dir, per_class=4):
  files = {'flower_photos/LICENSE.txt': b'CC-BY'}
  for name in FLOWER_CLASSES:
    for i in range(per_class):
      size = (10 + i, 12)
      files['flower_photos/%s/%d.jpg' % (name, i)] = jpeg_bytes(random_image(*size))
  os.makedirs(source_dir, exist_ok=True)
  make_tgz(os.path.join(source_dir, 'flower_photos.tgz'), files)
  return files


def test_flowers_round_trips_the_original_jpegs(tmp_path):
  files = make_flowers_source(str(tmp_path / 'src'))
  out = str(tmp_path / 'out')
  assert converters.convert('flowers', out, source_dir=str(tmp_path / 'src')) == {
      'train': 18, 'validation': 2}
  assert_records_hold_each_source_once('flowers', out, {
      name: (data, FLOWER_CLASSES.index(name.split('/')[1]))
      for name, data in files.items() if name.endswith('.jpg')})
  assert dataset_factory.get_dataset('flowers', 'train', out).labels_to_names == dict(
      enumerate(FLOWER_CLASSES))
  assert os.path.basename(record_files('flowers', 'train', out)[0]) == (
      'flowers_train_00000-of-00005.tfrecord')
  assert not [n for n in os.listdir(out) if n.startswith('.work-')]  # extraction removed


@pytest.mark.parametrize('member, link', [
    ('flower_photos/../../evil.jpg', None),
    ('/tmp/evil.jpg', None),
    ('flower_photos/daisy/evil.jpg', '/etc/passwd'),
    ('flower_photos/daisy/up', '../../..'),
])
def test_tar_members_escaping_the_target_are_refused(tmp_path, member, link):
  archive = str(tmp_path / 'flower_photos.tgz')
  files = {'flower_photos/daisy/0.jpg': jpeg_bytes(random_image(8, 8))}
  if link is None:
    files[member] = b'x'
    make_tgz(archive, files)
  else:
    make_tgz(archive, files, links=[(member, link)])
  target = str(tmp_path / 'extract')
  with pytest.raises(dataset_utils.ConversionError,
                     match=re.escape('refusing to extract %r' % member)):
    dataset_utils.safe_extract_tar(archive, target)
  assert os.listdir(target) == []  # nothing extracted at all
  with pytest.raises(dataset_utils.ConversionError, match='refusing'):
    converters.convert('flowers', str(tmp_path / 'out'), source_dir=str(tmp_path))


# --- image folder and imagenet --------------------------------------------------

def make_image_folder(root):
  """cat/ and dog/ with JPEG, PNG (RGB, gray, RGBA) and a BMP; plus non-images."""
  paths = {}
  for label, name in enumerate(('cat', 'dog')):
    for i in range(5):
      path = os.path.join(root, name, 'img%d.jpg' % i)
      save_image(path, random_image(9, 7 + i), 'JPEG')
      paths[path] = label
    for i, channels in enumerate((3, 1, 4)):
      path = os.path.join(root, name, 'sub', 'png%d.png' % i)
      save_image(path, random_image(6, 5, channels), 'PNG')
      paths[path] = label
  bmp = os.path.join(root, 'dog', 'photo.bmp')
  save_image(bmp, random_image(4, 4), 'BMP')
  paths[bmp] = 1
  with open(os.path.join(root, 'cat', 'notes.txt'), 'w') as f:
    f.write('not an image')
  with open(os.path.join(root, 'cat', '.DS_Store'), 'wb') as f:
    f.write(b'\0')
  return paths


def test_image_folder_round_trips_every_image_once(tmp_path):
  paths = make_image_folder(str(tmp_path / 'src'))
  out = str(tmp_path / 'out')
  sizes = converters.convert('image_folder', out, source_dir=str(tmp_path / 'src'),
                             validation_fraction=0.2)
  # Per class: round(0.2 * 8) cats and round(0.2 * 9) dogs are held out.
  assert sizes == {'train': 13, 'validation': 4}
  assert_records_hold_each_source_once('image_folder', out, file_sources(paths))
  descriptor = dataset_factory.get_dataset('image_folder', 'validation', out)
  assert descriptor.num_classes == 2
  assert descriptor.labels_to_names == {0: 'cat', 1: 'dog'}


def test_image_folder_round_trips_real_camera_photos(tmp_path):
  """scikit-learn's two bundled photographs (640x427 camera JPEGs), copied
  byte for byte: stored as they are and decoded to PIL's pixels."""
  import sklearn.datasets  # pylint: disable=import-outside-toplevel
  photos = os.path.join(os.path.dirname(sklearn.datasets.__file__), 'images')
  paths = {}
  for label, name in enumerate(('china', 'flower')):
    path = os.path.join(str(tmp_path / 'src'), name, name + '.jpg')
    os.makedirs(os.path.dirname(path))
    shutil.copyfile(os.path.join(photos, name + '.jpg'), path)
    paths[path] = label
  out = str(tmp_path / 'out')
  assert converters.convert('image_folder', out, source_dir=str(tmp_path / 'src'),
                            validation_fraction=0)['train'] == 2
  sources = file_sources(paths)
  assert_records_hold_each_source_once('image_folder', out, sources,
                                       splits=('train',),
                                       jpeg_tolerance=PHOTO_TOLERANCE)
  images, labels = read_split('image_folder', 'train', out)
  assert [image.shape for image in images] == [(427, 640, 3)] * 2
  for image, label in zip(images, labels):
    expected = pil_pixels(sources[sorted(paths)[label]][0])
    assert np.abs(image.astype(int) - expected).mean() < 2.0


def test_corrupt_image_is_named_and_nothing_is_half_written(tmp_path):
  make_image_folder(str(tmp_path / 'src'))
  bad = str(tmp_path / 'src' / 'dog' / 'img3.jpg')
  with open(bad, 'rb') as f:
    data = f.read()
  with open(bad, 'wb') as f:
    f.write(data[:len(data) // 2])  # truncated JPEG
  out = str(tmp_path / 'out')
  with pytest.raises(dataset_utils.ConversionError,
                     match=re.escape('cannot decode image %s' % bad)):
    converters.convert('image_folder', out, source_dir=str(tmp_path / 'src'),
                       num_shards=3, num_threads=2)
  for path in record_files('image_folder', 'train', out):
    count_records(path)  # a shard that exists is complete (truncation would raise)
  assert not os.path.exists(os.path.join(out, '%s_dataset.json' % 'image_folder'))
  assert not [n for n in os.listdir(out) if n.endswith('.tmp')]


def test_imagenet_labels_start_at_1_after_background(tmp_path):
  src = str(tmp_path / 'src')
  expected = []
  for split, count in (('train', 3), ('validation', 1)):
    for synset in ('n01440764', 'n01443537'):
      for i in range(count):
        path = os.path.join(src, split, synset, '%s_%d.JPEG' % (synset, i))
        save_image(path, random_image(8, 6), 'JPEG')
        expected.append((split, path, 1 + ('n01440764', 'n01443537').index(synset)))
  # A PNG posing as a JPEG, as in the real training set.
  disguised = os.path.join(src, 'train', 'n01443537', 'png_posing.JPEG')
  save_image(disguised, random_image(5, 5), 'PNG')
  expected.append(('train', disguised, 2))
  out = str(tmp_path / 'out')
  sizes = converters.convert('imagenet', out, source_dir=src)
  assert sizes == {'train': 7, 'validation': 2}
  for split in ('train', 'validation'):
    assert_records_hold_each_source_once('imagenet', out, file_sources(
        {p: label for s, p, label in expected if s == split}), splits=(split,))
  descriptor = dataset_factory.get_dataset('imagenet', 'train', out)
  assert descriptor.num_classes == 1001  # the canonical list, not the folders
  assert descriptor.labels_to_names[0] == 'background'
  assert descriptor.labels_to_names[1] == 'tench, Tinca tinca'
  assert descriptor.labels_to_names[2] == 'goldfish, Carassius auratus'
  assert descriptor.labels_to_names[1000] == 'toilet tissue, toilet paper, bathroom tissue'
  assert [os.path.basename(p) for p in record_files('imagenet', 'validation', out)] == [
      'validation-00000-of-00002', 'validation-00001-of-00002']


# --- digits ---------------------------------------------------------------------

def test_digits_holds_sklearns_1797_images_scaled_to_uint8(tmp_path):
  from sklearn.datasets import load_digits
  digits = load_digits()
  sizes = converters.convert('digits', str(tmp_path))
  assert sizes == {'train': 1437, 'validation': 360}
  order = np.random.RandomState(0).permutation(1797)  # the documented split
  for split, indices in (('validation', order[:360]), ('train', order[360:])):
    images, labels = read_split('digits', split, str(tmp_path), batch_size=500)
    expected = np.round(digits.images[indices] * 255 / 16).astype(np.uint8)
    np.testing.assert_array_equal(np.stack(images)[..., 0], expected)
    assert labels == digits.target[indices].tolist()
  descriptor = dataset_factory.get_dataset('digits', 'train', str(tmp_path))
  assert (descriptor.num_classes, descriptor.channels) == (10, 1)


# --- interruption, resumption, refusal -----------------------------------------

def test_interrupted_conversion_leaves_only_complete_shards_and_resumes(
    tmp_path, monkeypatch):
  out = str(tmp_path)
  real_encode = dataset_utils.encode_png
  calls = []

  def failing_encode(array):
    calls.append(1)
    if len(calls) == 500:  # in the second of four train shards (~359 each)
      raise RuntimeError('simulated crash')
    return real_encode(array)

  monkeypatch.setattr(dataset_utils, 'encode_png', failing_encode)
  with pytest.raises(RuntimeError, match='simulated crash'):
    converters.convert('digits', out, num_shards=4, num_threads=1)
  shards = record_files('digits', 'train', out)
  assert [os.path.basename(p) for p in shards] == [
      'digits_train-00000-of-00004.tfrecord']
  assert count_records(shards[0]) == 359  # linspace(0, 1437, 5) -> 0, 359, 718, ...
  assert not os.path.exists(os.path.join(out, 'digits_dataset.json'))
  assert not [n for n in os.listdir(out) if n.endswith('.tmp')]

  monkeypatch.setattr(dataset_utils, 'encode_png', real_encode)
  first_shard_stat = os.stat(shards[0])
  assert converters.convert('digits', out, num_shards=4, num_threads=1) == {
      'train': 1437, 'validation': 360}
  assert os.stat(shards[0]).st_mtime_ns == first_shard_stat.st_mtime_ns  # kept
  assert sum(count_records(p) for p in record_files('digits', 'train', out)) == 1437
  assert sum(count_records(p) for p in record_files('digits', 'validation', out)) == 360


def test_rerun_with_other_settings_is_refused(tmp_path):
  converters.convert('digits', str(tmp_path), num_shards=2)
  with pytest.raises(dataset_utils.ConversionError, match='does not write'):
    converters.convert('digits', str(tmp_path), num_shards=3)
  with pytest.raises(dataset_utils.ConversionError, match='other inputs or settings'):
    converters.convert('digits', str(tmp_path), num_shards=2, seed=1)


def test_tf_slim_records_in_the_way_are_refused(tmp_path):
  open(os.path.join(str(tmp_path), 'digits_train-00000-of-00009.tfrecord'), 'w').close()
  with pytest.raises(dataset_utils.ConversionError,
                     match='digits_train-00000-of-00009.tfrecord'):
    converters.convert('digits', str(tmp_path))


def test_unknown_dataset_name_suggests_the_closest(tmp_path):
  with pytest.raises(ValueError,
                     match="unknown dataset_name 'mnsit'; did you mean 'mnist'"):
    converters.convert('mnsit', str(tmp_path))


def test_download_without_network_fails_in_one_line(tmp_path, monkeypatch):
  def no_network(url, timeout=None):
    raise urllib.error.URLError('[Errno -3] Temporary failure in name resolution')

  monkeypatch.setattr(dataset_utils.urllib.request, 'urlopen', no_network)
  with pytest.raises(dataset_utils.ConversionError) as error:
    converters.convert('flowers', str(tmp_path), download=True)
  message = str(error.value)
  assert '\n' not in message
  assert 'cannot download flower_photos.tgz' in message
  assert 'http://download.tensorflow.org/example_images/flower_photos.tgz' in message
  assert not os.path.exists(os.path.join(str(tmp_path), 'flower_photos.tgz'))


def test_script_converts_digits_and_reports_errors_in_one_line(tmp_path, capsys):
  flag_values = absl_flags.FlagValues()
  download_and_convert_data.define_flags(flag_values)
  flag_values(['prog', '--dataset_name=digits', '--dataset_dir=%s' % tmp_path])
  assert download_and_convert_data.run(flag_values) == 0
  assert 'train 1437, validation 360' in capsys.readouterr().out
  flag_values(['prog', '--dataset_name=flowers', '--dataset_dir=%s' % tmp_path])
  assert download_and_convert_data.run(flag_values) == 1
  error = capsys.readouterr().err.strip().splitlines()[-1]
  assert error.startswith('error: missing ') and '--download' in error
