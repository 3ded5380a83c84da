"""A TF-Slim user's own dataset module (written as TF-Slim's datasets/flowers.py
is: get_split -> slim.dataset.Dataset with a TFExampleDecoder, SPLITS_TO_SIZES,
_NUM_CLASSES, labels.txt) plugs in unchanged: by its import path as
--dataset_name, or by a registration call. Its records here are real JPEGs
converted by download_and_convert_data.py --dataset_name=image_folder."""
import os
import shutil
import sys

import numpy as np
import PIL.Image
import pytest
import tensorflow as tf
import tf_slim as slim

from datasets import converters
from datasets import dataset_factory
from datasets import reader
from datasets import registry
from runner import estimator as est
from serving import exporter
import scripts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE = os.path.join(ROOT, 'tests', 'data', 'shapes_tf_slim.py')
CLASSES = ('ring', 'stick', 'swan')  # scikit-learn's digits 0, 1, 2
PER_CLASS = 15
tf1 = tf.compat.v1


def _env():
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')


def script(name, *args, cwd):
  """Runs one of the project's scripts as a user does, from `cwd`."""
  result = scripts.run(name, *args, cwd=cwd, env=_env(), timeout=600)
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  return result.stdout


@pytest.fixture(scope='module')
def workdir(tmp_path_factory):
  """A user's directory: JPEG folders, their conversion in data/, and the
  TF-Slim module shapes.py."""
  from sklearn.datasets import load_digits
  root = tmp_path_factory.mktemp('user')
  digits = load_digits()
  for label, name in enumerate(CLASSES):
    folder = root / 'photos' / name
    folder.mkdir(parents=True)
    images = digits.images[digits.target == label][:PER_CLASS]
    for i, image in enumerate(images):
      pixels = np.round(image * (255.0 / 16.0)).astype(np.uint8)
      rgb = np.stack([pixels, 255 - pixels, pixels // 2], axis=-1)
      PIL.Image.fromarray(rgb).resize((28, 28), PIL.Image.BILINEAR).save(
          str(folder / ('%s_%02d.jpg' % (name, i))), quality=95)
  out = script('download_and_convert_data.py', '--dataset_name=image_folder',
               '--dataset_dir=data', '--source_dir=photos',
               '--validation_fraction=0.2', cwd=str(root))
  assert 'train 36, validation 9' in out
  shutil.copy(MODULE, str(root / 'shapes.py'))
  return root


@pytest.fixture
def user_module(workdir, monkeypatch):
  """In this process: the user's directory as cwd, a scratch registry."""
  monkeypatch.chdir(str(workdir))
  monkeypatch.setattr(registry, '_DATASETS', dict(registry._DATASETS))  # pylint: disable=protected-access
  monkeypatch.delitem(sys.modules, 'shapes', raising=False)
  yield workdir
  sys.modules.pop('shapes', None)


def _read_all(descriptor):
  with tf.Graph().as_default():
    dataset = reader.make_dataset(descriptor, batch_size=100, is_training=False,
                                  num_epochs=1, deterministic=True)
    batch = tf1.data.make_one_shot_iterator(dataset).get_next()
    with tf1.Session() as session:
      return session.run(batch)


def test_module_path_as_dataset_name_describes_its_split(user_module):
  descriptor = dataset_factory.get_dataset('shapes', 'validation', 'data')
  assert (descriptor.name, descriptor.num_samples, descriptor.num_classes,
          descriptor.channels) == ('shapes', 9, 3, 3)
  assert descriptor.labels_to_names == dict(enumerate(CLASSES))
  assert [os.path.basename(f) for f in descriptor.files] == [
      'image_folder_validation-00000-of-00001.tfrecord']
  assert dataset_factory.get_info('shapes').splits == {'train': 36,
                                                       'validation': 9}
  # What an export of a network trained on it labels its outputs with.
  assert exporter.dataset_classes('shapes', 'data') == (
      3, dict(enumerate(CLASSES)), 3)


def test_its_decoder_reads_the_records_as_ours_does(user_module):
  """The module's TFExampleDecoder (tfexample_decoder.Image: the tf-slim
  breakage tf_compat fixes) inside our tf.data reader: the same JPEG pixels
  and labels as the records' own descriptor gives."""
  theirs = _read_all(dataset_factory.get_dataset('shapes', 'train', 'data'))
  ours = _read_all(dataset_factory.get_dataset('image_folder', 'train', 'data'))
  assert theirs[0].shape == (36, 28, 28, 3)
  np.testing.assert_array_equal(theirs[0], ours[0])
  np.testing.assert_array_equal(theirs[1], ours[1])
  assert sorted(np.bincount(theirs[1])) == [12, 12, 12]


def test_its_decoder_stays_its_own_and_is_callable_as_ours(user_module):
  """The module's TFExampleDecoder, left as it was, read through the
  Dataset's `decoder(serialized)` (this project's earlier API): the pixels
  and label our own descriptor decodes."""
  theirs = dataset_factory.get_dataset('shapes', 'train', 'data')
  ours = dataset_factory.get_dataset('image_folder', 'train', 'data')
  module_decoder = sys.modules['shapes'].get_split('train', 'data').decoder
  assert type(theirs.decoder).__name__ == type(module_decoder).__name__
  assert isinstance(theirs.decoder, type(module_decoder))
  assert not callable(module_decoder)
  with tf.Graph().as_default():
    serialized = tf1.data.make_one_shot_iterator(
        tf.data.TFRecordDataset(list(ours.files)).take(1)).get_next()
    with tf1.Session() as session:
      (image, label), (our_image, our_label) = session.run(
          [theirs.decoder(serialized), ours.decoder(serialized)])
  np.testing.assert_array_equal(image, our_image)
  assert label == our_label


def test_its_missing_records_are_named_when_read(user_module):
  os.makedirs('empty', exist_ok=True)
  descriptor = dataset_factory.get_dataset('shapes', 'train', 'empty')
  assert (descriptor.num_samples, descriptor.num_classes) == (36, 3)
  with pytest.raises(ValueError, match=r"^no files match 'empty/image_folder_"
                     r"train-\*.tfrecord' \(dataset 'shapes', split 'train', "
                     r"from shapes.get_split\)$"):
    descriptor.check_files()


def test_a_registration_call_plugs_in_the_same_module(user_module):
  sys.path.insert(0, str(user_module))
  try:
    import shapes  # pylint: disable=import-outside-toplevel
  finally:
    sys.path.remove(str(user_module))
  registry.register_dataset('my_shapes', get_split=shapes.get_split,
                            splits=shapes.SPLITS_TO_SIZES)
  descriptor = dataset_factory.get_dataset('my_shapes', 'train', 'data')
  assert (descriptor.num_samples, descriptor.num_classes) == (36, 3)
  with pytest.raises(ValueError, match="unknown split_name 'test' for dataset "
                     "'my_shapes' \\(valid: train, validation\\)"):
    dataset_factory.get_dataset('my_shapes', 'test', 'data')


def test_unknown_names_and_modules_without_a_dataset_are_one_line(user_module):
  with pytest.raises(ValueError, match=r"^unknown dataset_name 'shapez' \(known: "
                     r"cifar10, digits, flowers, image_folder, imagenet, mnist, "
                       r"visualwakewords; "
                     r"or a dataset module on the Python path\)$"):
    dataset_factory.get_dataset('shapez', 'train', 'data')
  with pytest.raises(ValueError, match=r"dataset 'shapes' is read by "
                     r"shapes.get_split \(a TF-Slim dataset module\): its records "
                     r"are made by its own converter, not here"):
    converters.convert('shapes', 'out')
  (user_module / 'not_a_dataset.py').write_text('X = 1\n')
  with pytest.raises(ValueError, match="module 'not_a_dataset' .* registers no "
                     'dataset and has no get_split'):
    dataset_factory.get_dataset('not_a_dataset', 'train', 'data')
  (user_module / 'broken_dataset.py').write_text('import no_such_package\n')
  with pytest.raises(ValueError, match="dataset module 'broken_dataset' cannot be "
                     "imported: No module named 'no_such_package'"):
    dataset_factory.get_dataset('broken_dataset', 'train', 'data')


def test_a_dataset_reading_another_conversions_records_keeps_their_names(
    user_module):
  """labels.txt written by the image_folder conversion belongs to its
  records, also when another registered name reads them (it was dropped as
  'another dataset's labels'); beside other records it stays foreign."""
  registry.register_dataset('pets', convert=lambda options: None,
                            splits={'train': 36, 'validation': 9},
                            num_classes=3,
                            read_pattern='image_folder_%s-*.tfrecord')
  descriptor = dataset_factory.get_dataset('pets', 'validation', 'data')
  assert descriptor.labels_to_names == dict(enumerate(CLASSES))
  # The control: records of its own beside that conversion do not take them.
  registry.register_dataset('other', convert=lambda options: None,
                            splits={'train': 1}, num_classes=3)
  shutil.copy('data/image_folder_validation-00000-of-00001.tfrecord',
              'data/other_train-00000-of-00001.tfrecord')
  try:
    assert dataset_factory.get_dataset('other', 'train', 'data').labels_to_names == {}
  finally:
    os.remove('data/other_train-00000-of-00001.tfrecord')


def test_dataset_data_provider_feeds_the_runner(user_module, tmp_path):
  """TF-Slim's own reading path (DatasetDataProvider: queue runners) works
  under the runner's MonitoredTrainingSession too."""
  sys.path.insert(0, str(user_module))
  try:
    import shapes  # pylint: disable=import-outside-toplevel
  finally:
    sys.path.remove(str(user_module))
  seen = []

  def input_fn():
    provider = slim.dataset_data_provider.DatasetDataProvider(
        shapes.get_split('train', 'data'), num_readers=1, shuffle=False)
    image, label = provider.get(['image', 'label'])
    image = tf.image.resize(tf.cast(image, tf.float32), [28, 28])
    return tf1.train.batch([image, label], batch_size=6)

  def model_fn(features, labels, mode):
    logits = tf1.layers.dense(tf1.layers.flatten(features), 3)
    loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    seen_op = tf1.py_func(lambda l: seen.extend(l.tolist()) or 0, [labels],
                          tf.int64)
    with tf.control_dependencies([seen_op]):
      train_op = tf1.train.GradientDescentOptimizer(1e-4).minimize(
          loss, tf1.train.get_or_create_global_step())
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op)

  runner = est.Estimator(model_fn, model_dir=str(tmp_path / 'run'))
  runner.train(input_fn, max_steps=3)
  assert runner.get_variable_value('global_step') == 3
  assert len(seen) == 18 and set(seen) <= {0, 1, 2}


@pytest.mark.slow
def test_tf_slim_module_trains_and_evaluates_through_the_scripts(workdir):
  common = ['--dataset_name=shapes', '--dataset_dir=data', '--model_name=lenet',
            '--batch_size=12']
  out = script('train_image_classifier.py', *common, '--train_dir=run',
               '--dataset_split_name=train', '--max_number_of_steps=100',
               '--optimizer=sgd', '--learning_rate=0.01',
               '--learning_rate_decay_type=fixed', '--weight_decay=0',
               '--save_interval_secs=600', '--log_every_n_steps=50',
               '--random_seed=0', cwd=str(workdir))
  assert 'Trained to step 100' in out
  out = script('eval_image_classifier.py', *common, '--checkpoint_path=run',
               '--dataset_split_name=validation', cwd=str(workdir))
  accuracy = float(out.split('Accuracy = ')[1].split()[0])
  assert accuracy >= 7 / 9, out
  # Class names follow the dataset: the module's labels.txt.
  rows = [line.split()[:3] for line in out.splitlines()
          if line.split()[1:2] and line.split()[1] in CLASSES]
  assert rows == [['0', 'ring', '3'], ['1', 'stick', '3'], ['2', 'swan', '3']]
