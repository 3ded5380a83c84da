"""Data you can trust: metadata per dataset, verified and durable shards,
interchange with TF-Slim's records and file names, paths with `~`, and the
scripts' input checks."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from absl import flags as absl_flags

import download_and_convert_data
from datasets import converters
from datasets import dataset_factory
from datasets import dataset_utils
from datasets import reader
from test_datasets import READERS, start_reading
from test_converters import (make_cifar_source, make_flowers_source,
                             make_mnist_source, jpeg_bytes, pil_pixels, random_image,
                             read_split, record_files)

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def metadata(dataset_dir, name):
  with open(os.path.join(dataset_dir, '%s_dataset.json' % name)) as f:
    return json.load(f)


# --- 1. metadata per dataset ----------------------------------------------------

def test_two_datasets_in_one_directory_never_mix(tmp_path):
  out = str(tmp_path / 'out')
  mnist = make_mnist_source(str(tmp_path / 'mnist'))
  cifar = make_cifar_source(str(tmp_path / 'cifar'))
  converters.convert('mnist', out, source_dir=str(tmp_path / 'mnist'))
  converters.convert('cifar10', out, source_dir=str(tmp_path / 'cifar'))
  descriptor = dataset_factory.get_dataset('mnist', 'train', out)
  assert (descriptor.num_samples, descriptor.num_classes) == (5, 10)
  assert descriptor.labels_to_names[3] == 'three'  # not cifar10's 'cat'
  assert all(os.path.basename(f).startswith('mnist_train') for f in descriptor.files)
  images, labels = read_split('mnist', 'train', out)
  np.testing.assert_array_equal(np.stack(images)[..., 0], mnist['train'][0])
  assert labels == mnist['train'][1].tolist()
  descriptor = dataset_factory.get_dataset('cifar10', 'train', out)
  assert (descriptor.num_samples, descriptor.labels_to_names[3]) == (10, 'cat')
  images, labels = read_split('cifar10', 'test', out)
  np.testing.assert_array_equal(np.stack(images), np.stack(cifar['test'][0]))
  assert sorted(metadata(out, 'mnist')['splits']) == ['test', 'train']
  flowers = dataset_factory.get_dataset('flowers', 'train', out)
  with pytest.raises(ValueError, match="no files match '.*flowers_train_"):
    flowers.check_files()


def test_failed_conversion_leaves_the_previous_dataset_readable(tmp_path):
  out = str(tmp_path / 'out')
  mnist = make_mnist_source(str(tmp_path / 'mnist'))
  converters.convert('mnist', out, source_dir=str(tmp_path / 'mnist'))
  before = metadata(out, 'mnist')
  make_cifar_source(str(tmp_path / 'cifar'))
  archive = str(tmp_path / 'cifar' / 'cifar-10-python.tar.gz')
  with open(archive, 'rb') as f:
    data = f.read()
  with open(archive, 'wb') as f:
    f.write(data[:len(data) // 2])  # a download cut short
  with pytest.raises(dataset_utils.ConversionError) as error:
    converters.convert('cifar10', out, source_dir=str(tmp_path / 'cifar'))
  assert str(error.value).startswith('cannot read ') and archive in str(error.value)
  assert 'can be deleted' in str(error.value) and '\n' not in str(error.value)
  assert metadata(out, 'mnist') == before
  images, labels = read_split('mnist', 'test', out)
  assert labels == mnist['test'][1].tolist()
  assert dataset_factory.get_dataset('mnist', 'train', out).num_samples == 5


def test_unfinished_conversion_is_not_read_as_tf_slim_records(tmp_path, monkeypatch):
  real_encode = dataset_utils.encode_png
  calls = []

  def failing_encode(array):
    calls.append(1)
    if len(calls) == 3:
      raise RuntimeError('simulated crash')
    return real_encode(array)

  make_mnist_source(str(tmp_path))
  monkeypatch.setattr(dataset_utils, 'encode_png', failing_encode)
  with pytest.raises(RuntimeError):
    converters.convert('mnist', str(tmp_path / 'out'), source_dir=str(tmp_path),
                       num_shards=5, num_threads=1)
  assert record_files('mnist', 'train', str(tmp_path / 'out'))  # two shards kept
  descriptor = dataset_factory.get_dataset('mnist', 'train', str(tmp_path / 'out'))
  with pytest.raises(ValueError, match='the conversion of mnist into .* did not '
                     'finish .*run download_and_convert_data.py .* again'):
    start_reading(descriptor, 'tf.data')


# --- 4. durable, verified shards ------------------------------------------------

@pytest.fixture()
def digits_dir(tmp_path):
  converters.convert('digits', str(tmp_path), num_shards=2)
  return str(tmp_path)


def test_metadata_holds_each_shards_size_and_record_count(digits_dir):
  content = metadata(digits_dir, 'digits')
  assert content['dataset_name'] == 'digits' and content['num_classes'] == 10
  assert content['labels_to_names']['7'] == 'seven'
  for split, size in (('train', 1437), ('validation', 360)):
    shards = content['splits'][split]['shards']
    assert [s['file'] for s in shards] == [
        'digits_%s-%05d-of-00002.tfrecord' % (split, i) for i in range(2)]
    for shard in shards:
      path = os.path.join(digits_dir, shard['file'])
      assert shard['bytes'] == os.path.getsize(path)
      assert shard['records'] == dataset_utils.count_records(path)
    assert content['splits'][split]['num_samples'] == size == sum(
        s['records'] for s in shards)


@pytest.mark.parametrize('how', READERS)
def test_truncated_shard_stops_reading_with_one_line_naming_it(digits_dir, how):
  shard = os.path.join(digits_dir, 'digits_train-00001-of-00002.tfrecord')
  size = os.path.getsize(shard)
  with open(shard, 'r+b') as f:
    f.truncate(size // 2)
  descriptor = dataset_factory.get_dataset('digits', 'train', digits_dir)
  with pytest.raises(ValueError, match=re.escape(
      'shard %s is truncated: %d bytes, its conversion wrote %d'
      % (shard, size // 2, size))) as error:
    start_reading(descriptor, how)
  assert '\n' not in str(error.value)


def test_shard_truncated_after_the_first_read_stops_the_next(digits_dir):
  descriptor = dataset_factory.get_dataset('digits', 'train', digits_dir)
  start_reading(descriptor, 'tf.data')
  shard = os.path.join(digits_dir, 'digits_train-00001-of-00002.tfrecord')
  with open(shard, 'r+b') as f:
    f.truncate(os.path.getsize(shard) // 2)
  with pytest.raises(ValueError, match=re.escape('shard %s is truncated' % shard)):
    start_reading(descriptor, 'DatasetDataProvider')


@pytest.mark.parametrize('how', READERS)
def test_replaced_shard_of_the_same_size_is_named(digits_dir, how):
  shard = os.path.join(digits_dir, 'digits_validation-00000-of-00002.tfrecord')
  with open(shard, 'r+b') as f:
    data = bytearray(f.read())
    data[len(data) // 2] ^= 0xff
    f.seek(0)
    f.write(bytes(data))
  descriptor = dataset_factory.get_dataset('digits', 'validation', digits_dir)
  with pytest.raises(ValueError, match=re.escape(
      'shard %s was replaced or altered since its conversion' % shard)):
    start_reading(descriptor, how)


def test_replaced_shard_of_another_size_is_named(digits_dir):
  shard = os.path.join(digits_dir, 'digits_train-00000-of-00002.tfrecord')
  other = os.path.join(digits_dir, 'digits_validation-00000-of-00002.tfrecord')
  with open(other, 'rb') as f, open(shard, 'wb') as g:
    g.write(f.read())
  descriptor = dataset_factory.get_dataset('digits', 'train', digits_dir)
  with pytest.raises(ValueError, match=re.escape('shard %s is' % shard)):
    descriptor.check_files()


@pytest.mark.parametrize('how', READERS)
def test_missing_shard_is_named(digits_dir, how):
  shard = os.path.join(digits_dir, 'digits_train-00001-of-00002.tfrecord')
  os.remove(shard)
  descriptor = dataset_factory.get_dataset('digits', 'train', digits_dir)
  with pytest.raises(ValueError, match=re.escape('shard %s of digits train is missing'
                                                 % shard)):
    start_reading(descriptor, how)


def test_stray_file_matching_the_pattern_is_not_read(digits_dir):
  stray = os.path.join(digits_dir, 'digits_train-00007-of-00009.tfrecord')
  with tf.io.TFRecordWriter(stray) as writer:
    writer.write(b'not an example')
  descriptor = dataset_factory.get_dataset('digits', 'train', digits_dir)
  assert stray not in descriptor.files and len(descriptor.files) == 2
  _, labels = read_split('digits', 'train', digits_dir, batch_size=500)
  assert len(labels) == 1437


def test_shards_are_fsynced_before_rename_and_directory_before_metadata(
    tmp_path, monkeypatch):
  events = []
  real_fsync, real_replace = os.fsync, os.replace
  real_write_metadata = dataset_utils.write_metadata

  def fsync(fd):
    events.append(('fsync', os.readlink('/proc/self/fd/%d' % fd)))
    return real_fsync(fd)

  def replace(src, dst):
    events.append(('replace', str(src), str(dst)))
    return real_replace(src, dst)

  def write_metadata(*args, **kwargs):
    events.append(('metadata',))
    return real_write_metadata(*args, **kwargs)

  monkeypatch.setattr(os, 'fsync', fsync)
  monkeypatch.setattr(os, 'replace', replace)
  monkeypatch.setattr(dataset_utils, 'write_metadata', write_metadata)
  out = str(tmp_path)
  converters.convert('digits', out, num_shards=2, num_threads=1)
  shard_renames = [i for i, e in enumerate(events)
                   if e[0] == 'replace' and e[2].endswith('.tfrecord')]
  assert len(shard_renames) == 4
  for i in shard_renames:
    tmp = events[i][1]
    assert ('fsync', tmp) in events[:i]  # the data is on disk before the rename
  metadata_at = events.index(('metadata',))
  assert shard_renames[-1] < metadata_at
  directory_syncs = [i for i, e in enumerate(events) if e == ('fsync', out)]
  assert any(shard_renames[-1] < i < metadata_at for i in directory_syncs)


# --- 8. no scratch left behind --------------------------------------------------

def test_rerun_removes_what_an_interrupted_conversion_left(tmp_path):
  src = str(tmp_path / 'src')
  make_flowers_source(src)
  out = str(tmp_path / 'out')
  os.makedirs(out)
  finished = subprocess.Popen([sys.executable, '-c', 'pass'])
  finished.wait()
  dead = os.path.join(out, '.work-%d-abc' % finished.pid)  # a killed run's scratch
  os.makedirs(os.path.join(dead, 'flower_photos', 'daisy'))
  with open(os.path.join(dead, 'flower_photos', 'daisy', 'big.jpg'), 'wb') as f:
    f.write(b'\0' * (1 << 20))
  live = os.path.join(out, '.work-%d-live' % os.getpid())  # a running conversion's
  os.makedirs(live)
  stale = os.path.join(out, '.flowers_train_00000-of-00005.tfrecord.tmp')
  with open(stale, 'wb') as f:
    f.write(b'partial')
  converters.convert('flowers', out, source_dir=src)
  assert not os.path.exists(dead) and not os.path.exists(stale)
  assert os.path.isdir(live)
  assert [n for n in os.listdir(out) if n.startswith('.work-')] == [
      os.path.basename(live)]


# --- 7. interchange with TF-Slim ------------------------------------------------

def _tf_slim_example(encoded, image_format, height, width, label, extra=None):
  """A record as TF-Slim's converters wrote it (their keys, their formats)."""
  feature = {
      'image/encoded': dataset_utils.bytes_feature(encoded),
      'image/format': dataset_utils.bytes_feature(image_format),
      'image/class/label': dataset_utils.int64_feature(label),
      'image/height': dataset_utils.int64_feature(height),
      'image/width': dataset_utils.int64_feature(width),
  }
  feature.update(extra or {})
  return tf.train.Example(features=tf.train.Features(feature=feature))


def _read_all(descriptor):
  with tf.Graph().as_default():
    dataset = reader.make_dataset(descriptor, batch_size=1, preprocess_fn=lambda x: x,
                                  is_training=False, num_readers=1, num_epochs=1)
    next_batch = tf1.data.make_one_shot_iterator(dataset).get_next()
    out = []
    with tf1.Session() as sess:
      while True:
        try:
          images, labels = sess.run(next_batch)
        except tf.errors.OutOfRangeError:
          return out
        out.append((images[0], int(labels[0])))


@pytest.mark.parametrize('name, split, filename, image_format, channels', [
    ('mnist', 'train', 'mnist_train.tfrecord', b'png', 1),
    ('mnist', 'test', 'mnist_test.tfrecord', b'raw', 1),
    ('cifar10', 'train', 'cifar10_train.tfrecord', b'png', 3),
    ('cifar10', 'test', 'cifar10_test.tfrecord', b'RAW', 3),
    ('flowers', 'train', 'flowers_train_00000-of-00005.tfrecord', b'jpg', 3),
    ('imagenet', 'validation', 'validation-00000-of-00128', b'JPEG', 3),
])
def test_records_written_as_tf_slim_wrote_them_read_here(
    tmp_path, name, split, filename, image_format, channels):
  size = dataset_factory.get_info(name).image_size or (10, 14)
  pixels = [random_image(size[0], size[1], channels) for _ in range(3)]
  with tf.io.TFRecordWriter(str(tmp_path / filename)) as writer:
    for label, array in enumerate(list(pixels)):
      if image_format.lower() == b'raw':
        encoded = array.tobytes()
      elif image_format == b'png':
        encoded = dataset_utils.encode_png(array)
      else:  # a smooth image: JPEG decoders agree on it within a few levels
        smooth = np.add.outer(np.arange(size[0]) * 8, np.arange(size[1]) * 5)
        array = (smooth[..., None] + [0, 40, 80] + label).astype(np.uint8)
        encoded = jpeg_bytes(array, quality=100)
        pixels[label] = pil_pixels(encoded)  # what the JPEG holds
      extra = {}
      if name == 'imagenet':  # build_imagenet_data.py's extra keys
        extra = {'image/class/synset': dataset_utils.bytes_feature('n01440764'),
                 'image/object/bbox/xmin': dataset_utils.float_feature([0.1]),
                 'image/object/bbox/ymin': dataset_utils.float_feature([0.2]),
                 'image/object/bbox/xmax': dataset_utils.float_feature([0.9]),
                 'image/object/bbox/ymax': dataset_utils.float_feature([0.8]),
                 'image/object/bbox/label': dataset_utils.int64_feature([label + 1])}
      writer.write(_tf_slim_example(encoded, image_format, size[0], size[1],
                                    label + 1, extra).SerializeToString())
  descriptor = dataset_factory.get_dataset(name, split, str(tmp_path))
  records = _read_all(descriptor)
  assert [label for _, label in records] == [1, 2, 3]
  for (image, _), array in zip(records, pixels):
    expected = array.reshape(size[0], size[1], channels)
    tolerance = 8 if image_format.lower() in (b'jpg', b'jpeg') else 0
    assert image.shape == expected.shape
    assert np.abs(image.astype(int) - expected).max() <= tolerance


@pytest.mark.parametrize('name, make_source', [('mnist', make_mnist_source),
                                               ('cifar10', make_cifar_source)])
def test_one_shard_gets_the_name_tf_slims_pattern_reads(tmp_path, name, make_source):
  make_source(str(tmp_path))
  converters.convert(name, str(tmp_path), num_shards=1)
  for split in ('train', 'test'):
    tf_slim_file = str(tmp_path / ('%s_%s.tfrecord' % (name, split)))  # their pattern
    assert record_files(name, split, str(tmp_path)) == [tf_slim_file]
    assert dataset_utils.count_records(tf_slim_file) == (
        dataset_factory.get_dataset(name, split, str(tmp_path)).num_samples)


# --- 2. paths: ~ and $VARIABLES -------------------------------------------------

def test_tilde_and_variables_are_expanded_in_path_flags(tmp_path, monkeypatch):
  home = tmp_path / 'home'
  (home / 'Downloads').mkdir(parents=True)
  make_mnist_source(str(home / 'Downloads'))
  monkeypatch.setenv('HOME', str(home))
  monkeypatch.setenv('DATA_ROOT', str(tmp_path / 'data'))
  monkeypatch.chdir(tmp_path)
  flag_values = absl_flags.FlagValues()
  download_and_convert_data.define_flags(flag_values)
  flag_values(['prog', '--dataset_name=mnist', '--dataset_dir=$DATA_ROOT/mnist',
               '--source_dir=~/Downloads'])
  assert download_and_convert_data.run(flag_values) == 0
  assert not os.path.exists(tmp_path / '~') and not os.path.exists(tmp_path / '$DATA_ROOT')
  assert os.path.exists(tmp_path / 'data' / 'mnist' / 'mnist_dataset.json')
  monkeypatch.setenv('HOME', str(tmp_path))
  descriptor = dataset_factory.get_dataset('mnist', 'test', '~/data/mnist')
  assert descriptor.num_samples == 3
  assert descriptor.file_pattern.startswith(str(tmp_path / 'data' / 'mnist'))


def _script(tmp_path, script, *args):
  env = dict(os.environ, HOME=str(tmp_path), CUDA_VISIBLE_DEVICES='')
  return subprocess.run([sys.executable, os.path.join(ROOT, script), *args],
                        capture_output=True, text=True, env=env, cwd=str(tmp_path),
                        timeout=300)


def _error_lines(tmp_path, script, *args):
  """The stderr lines of a script run that must fail with exit status 1."""
  result = _script(tmp_path, script, *args)
  assert result.returncode == 1, result.stderr[-2000:]
  return result.stderr.strip().splitlines()


@pytest.mark.slow
def test_scripts_expand_paths_and_take_use_grayscale(tmp_path):
  lines = _error_lines(tmp_path, 'train_image_classifier.py',
                       '--dataset_name=mnist', '--dataset_dir=~/nowhere',
                       '--use_grayscale', '--model_name=lenet',
                       '--train_dir=~/runs')
  assert lines[-1] == (
      "train_image_classifier: error: dataset_dir '%s/nowhere' does not exist; run "
      "download_and_convert_data.py --dataset_name=mnist --dataset_dir=%s/nowhere "
      "first" % (tmp_path, tmp_path))
  assert not os.path.exists(tmp_path / '~')


@pytest.mark.slow
def test_eval_batch_size_0_is_one_clear_line(tmp_path):
  lines = _error_lines(tmp_path, 'eval_image_classifier.py',
                       '--dataset_name=mnist', '--dataset_dir=~/nowhere',
                       '--batch_size=0', '--use_grayscale',
                       '--model_name=lenet')
  assert not [line for line in lines if 'ZeroDivisionError' in line]
  assert lines[-1] == (
      'eval_image_classifier: error: --batch_size must be at least 1, got 0')


def test_tf_slim_records_beside_a_converted_dataset_do_not_take_its_labels(tmp_path):
  make_cifar_source(str(tmp_path / 'cifar'))
  converters.convert('cifar10', str(tmp_path), source_dir=str(tmp_path / 'cifar'))
  with tf.io.TFRecordWriter(str(tmp_path / 'mnist_train.tfrecord')) as writer:
    writer.write(_tf_slim_example(dataset_utils.encode_png(random_image(28, 28, 1)),
                                  b'png', 28, 28, 4).SerializeToString())
  descriptor = dataset_factory.get_dataset('mnist', 'train', str(tmp_path))
  assert descriptor.labels_to_names == {}  # labels.txt is cifar10's
  assert (descriptor.num_samples, descriptor.num_classes) == (60000, 10)  # published
  assert [label for _, label in _read_all(descriptor)] == [4]


def test_directory_of_an_earlier_version_is_upgraded_by_a_rerun(digits_dir):
  os.remove(os.path.join(digits_dir, 'digits_dataset.json'))
  with open(os.path.join(digits_dir, 'splits.json'), 'w') as f:  # what it wrote
    json.dump({'train': 1437, 'validation': 360, 'num_classes': 10}, f)
  descriptor = dataset_factory.get_dataset('digits', 'train', digits_dir)
  with pytest.raises(ValueError, match='the conversion of digits into .* was made by '
                     'an earlier version \\(no digits_dataset.json\\); run '
                     'download_and_convert_data.py .* again'):
    descriptor.check_files()
  shard = os.path.join(digits_dir, 'digits_train-00000-of-00002.tfrecord')
  mtime = os.stat(shard).st_mtime_ns
  converters.convert('digits', digits_dir, num_shards=2)
  assert os.stat(shard).st_mtime_ns == mtime  # kept, only described
  assert dataset_factory.get_dataset('digits', 'train', digits_dir).num_samples == 1437
