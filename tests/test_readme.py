"""The code in README.md (and the pages of docs/) runs as written."""
import importlib.util
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from nets import nets_factory, registry

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
