"""The code in README.md (and the pages of docs/) runs as written."""
import importlib.util
import os
import re
import shlex
import sys

import numpy as np
import pytest
import tensorflow as tf

from datasets import dataset_factory
from datasets import reader
from datasets import registry as dataset_registry
from nets import nets_factory, registry
from preprocessing import preprocessing_factory
from preprocessing import registry as preprocessing_registry
import scripts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
tf1 = tf.compat.v1


def readme_block(marker):
  """The python block after `<!-- readme:marker -->` in README.md or docs/."""
  pages = ['README.md'] + sorted(
      os.path.join('docs', name) for name in os.listdir(os.path.join(ROOT, 'docs'))
      if name.endswith('.md'))
  for page in pages:
    with open(os.path.join(ROOT, page)) as f:
      match = re.search(r'<!-- readme:%s -->\s*```python\n(.*?)```' % marker,
                        f.read(), re.S)
    if match:
      return match.group(1)
  raise AssertionError('no block marked readme:%s in %s' % (marker, pages))


def commands_after(marker):
  """The commands of the sh block that follows the python block `marker`,
  as argument lists (continuation lines joined)."""
  for page in ['README.md'] + sorted(
      os.path.join('docs', n) for n in os.listdir(os.path.join(ROOT, 'docs'))):
    with open(os.path.join(ROOT, page)) as f:
      match = re.search(r'<!-- readme:%s -->\s*```python\n.*?```\s*```sh\n(.*?)```'
                        % marker, f.read(), re.S)
    if match:
      return [shlex.split(line) for line in
              match.group(1).replace('\\\n', ' ').splitlines() if line.strip()]
  raise AssertionError('no sh block after readme:%s' % marker)


def run_script(command, cwd):
  """`python <script> <flags>` as written, the script from the checkout."""
  assert command[0] == 'python', command
  result = scripts.run(command[1], *command[2:], cwd=cwd, timeout=600,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  return result.stdout


def _input_fn():
  rng = np.random.RandomState(0)
  x = rng.randn(60, 5).astype(np.float32)
  y = np.argmax(x[:, :3], axis=1).astype(np.int64)
  return tf.data.Dataset.from_tensor_slices(({'x': x}, y)).repeat().batch(30)


@pytest.mark.parametrize('replication', ['', 'num_clones=2, clone_on_cpu=True'])
def test_readme_model_fn_trains_and_evaluates(tmp_path, replication):
  code = readme_block('model_fn')
  if replication:
    code = code.replace('replicate_model_fn(model_fn)',
                        'replicate_model_fn(model_fn, %s)' % replication)
  namespace = {'MODEL_DIR': str(tmp_path), 'input_fn': _input_fn}
  exec(compile(code, 'README.md', 'exec'), namespace)  # pylint: disable=exec-used
  estimator = namespace['estimator']
  assert estimator.get_variable_value('global_step') == 100
  metrics = estimator.evaluate(_input_fn, steps=2)
  assert metrics['accuracy'] > 0.8


def test_readme_recipe_adds_a_network_in_one_module(tmp_path, monkeypatch):
  # tiny_net is registered in a copy of the registry: the zoo is left as it was.
  monkeypatch.setattr(registry, '_NETWORKS', dict(registry._NETWORKS))  # pylint: disable=protected-access
  path = tmp_path / 'tiny_net.py'
  path.write_text(readme_block('new_network'))
  spec = importlib.util.spec_from_file_location('nets.tiny_net', str(path))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  assert 'tiny_net' in nets_factory.list_models('tiny*')
  info = nets_factory.get_info('tiny_net')
  assert (info.default_image_size, info.preprocessing_name) == (28, 'lenet')
  with tf.Graph().as_default():
    fn = nets_factory.get_network_fn('tiny_net', 4, weight_decay=0.1)
    logits, end_points = fn(tf1.placeholder(tf.float32, [2, 28, 28, 1]))
    assert logits.shape.as_list() == [2, 4]
    assert len(tf1.losses.get_regularization_losses()) == 2
    assert sorted(v.op.name for v in tf1.global_variables()) == [
        'TinyNet/conv1/biases', 'TinyNet/conv1/weights',
        'TinyNet/logits/biases', 'TinyNet/logits/weights']


def test_readme_tf_slim_paths_run_as_tf_slim_code():
  namespace = {}
  with tf.Graph().as_default():
    exec(compile(readme_block('tf_slim'), 'README.md', 'exec'), namespace)  # pylint: disable=exec-used
  assert namespace['logits'].shape.as_list() == [2, 400]
  assert namespace['end_points']['Mixed_5c'].shape.as_list() == [
      2, 8, 7, 7, 1024]
  assert namespace['net'].shape.as_list() == [2, 12, 12, 768]


def test_readme_recipe_adds_a_dataset_in_one_module(tmp_path, monkeypatch):
  """The recipe's module, converted by the script as the page says, from the
  directory it is in; its records hold the arrays, its names follow it."""
  from sklearn.datasets import load_digits  # pylint: disable=import-outside-toplevel
  (tmp_path / 'my_shapes.py').write_text(readme_block('new_dataset'))
  digits = load_digits()
  chosen = np.concatenate([np.flatnonzero(digits.target == 0)[:20],
                           np.flatnonzero(digits.target == 1)[:20]])
  np.random.RandomState(0).shuffle(chosen)
  gray = np.round(digits.images[chosen] * (255.0 / 16.0)).astype(np.uint8)
  images = np.stack([np.kron(g, np.ones((4, 4), np.uint8)) for g in gray])
  images = np.repeat(images[..., None], 3, axis=-1)  # [40, 32, 32, 3]
  labels = digits.target[chosen].astype(np.int64)
  np.savez(str(tmp_path / 'shapes.npz'), images=images, labels=labels)
  convert = commands_after('new_dataset')[0]
  assert convert[1] == 'download_and_convert_data.py'
  out = run_script(convert, cwd=str(tmp_path))
  assert 'converted my_shapes into data/shapes: train 30, validation 10' in out

  monkeypatch.chdir(str(tmp_path))
  monkeypatch.setattr(dataset_registry, '_DATASETS',
                      dict(dataset_registry._DATASETS))  # pylint: disable=protected-access
  monkeypatch.delitem(sys.modules, 'my_shapes', raising=False)
  descriptor = dataset_factory.get_dataset('my_shapes', 'validation', 'data/shapes')
  sys.modules.pop('my_shapes', None)
  assert (descriptor.num_samples, descriptor.num_classes, descriptor.channels) == (
      10, 2, 3)
  assert descriptor.labels_to_names == {0: 'circle', 1: 'square'}
  with tf.Graph().as_default():
    batch = tf1.data.make_one_shot_iterator(reader.make_dataset(
        descriptor, batch_size=10, is_training=False, num_epochs=1)).get_next()
    with tf1.Session() as session:
      read_images, read_labels = session.run(batch)
  np.testing.assert_array_equal(read_images, images[:10])
  np.testing.assert_array_equal(read_labels, labels[:10])


def test_readme_recipe_adds_a_preprocessing_in_one_module(tmp_path, monkeypatch):
  (tmp_path / 'my_preprocessing.py').write_text(readme_block('new_preprocessing'))
  monkeypatch.chdir(str(tmp_path))
  monkeypatch.setattr(preprocessing_registry, '_PREPROCESSINGS',
                      dict(preprocessing_registry._PREPROCESSINGS))  # pylint: disable=protected-access
  monkeypatch.delitem(sys.modules, 'my_preprocessing', raising=False)
  try:
    fn = preprocessing_factory.get_preprocessing('my_preprocessing')
    gray = preprocessing_factory.get_preprocessing('unit_range', use_grayscale=True)
  finally:
    sys.modules.pop('my_preprocessing', None)
  image = np.zeros((8, 6, 3), np.uint8)
  image[:, :3] = 255
  with tf.Graph().as_default():
    output = fn(tf.constant(image), 4, 6)
    output_gray = gray(tf.constant(image), 4, 6)
    with tf1.Session() as session:
      output, output_gray = session.run([output, output_gray])
  expected = np.where(np.arange(6) < 3, 1.0, -1.0)
  np.testing.assert_allclose(output, np.broadcast_to(expected[None, :, None],
                                                     (4, 6, 3)), atol=1e-6)
  assert output_gray.shape == (4, 6, 1)


@pytest.mark.slow
def test_readme_preprocessing_module_trains_through_the_script(tmp_path):
  (tmp_path / 'my_preprocessing.py').write_text(readme_block('new_preprocessing'))
  from datasets import converters  # pylint: disable=import-outside-toplevel
  converters.convert('digits', str(tmp_path / 'data' / 'digits'),
                     stream=open(os.devnull, 'w'))
  train = commands_after('new_preprocessing')[0]
  train = [a.replace('--max_number_of_steps=200', '--max_number_of_steps=5')
           for a in train]
  out = run_script(train + ['--batch_size=8'], cwd=str(tmp_path))
  assert 'Trained to step 5' in out
