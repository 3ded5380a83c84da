"""tf-slim works on TF 2.21 whichever project module is imported first."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USE_SLIM = '''
import tensorflow as tf, tf_slim as slim
from tf_slim.layers import optimizers
tf1 = tf.compat.v1
with tf.Graph().as_default():
  x = tf1.placeholder(tf.float32, [2, 4, 4, 3])
  y = slim.batch_norm(slim.conv2d(x, 3, [3, 3]), is_training=True)
  loss = tf.reduce_mean(tf1.layers.flatten(y))
  step = tf1.train.get_or_create_global_step()
  optimizers.optimize_loss(loss, step, 0.1, 'SGD')
  assert len(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)) == 2
print('ok')
'''


def _run(first_import):
  code = (first_import + '\n' if first_import else '') + USE_SLIM
  return subprocess.run([sys.executable, '-c', code], cwd=ROOT,
                        capture_output=True, text=True, timeout=300,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))


@pytest.mark.parametrize('module', [
    'nets.nets_factory', 'nets.lenet', 'datasets.dataset_factory',
    'preprocessing.preprocessing_factory', 'deployment.model_deploy',
    'runner.estimator', 'classifier', 'tf_compat'])
def test_slim_batch_norm_and_optimize_loss_work_after_any_project_import(
    module):
  result = _run('import ' + module)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.strip().endswith('ok')


def test_without_the_compat_module_tf_slim_batch_norm_fails():
  """The control: the failure the compat module exists to fix."""
  result = _run('')
  assert result.returncode != 0
  assert "No module named 'tf_keras.legacy_tf_layers'" in result.stderr


def test_variables_hash_by_identity_without_a_context_walk(monkeypatch):
  """Root cause 3 of tf_compat: tf-keras' legacy layers hash every global
  variable per weight they add; each hash must not walk the context stack."""
  import tensorflow as tf
  from tensorflow.python.framework import ops
  from tensorflow.python.framework import tensor as tensor_lib
  import tf_compat  # noqa: F401

  walks = []
  real = ops.executing_eagerly_outside_functions

  def hash_and_compare(variable):
    with monkeypatch.context() as patch:
      patch.setattr(ops, 'executing_eagerly_outside_functions',
                    lambda: walks.append(1) or real())
      assert hash(variable) == id(variable)
      assert len({variable, variable}) == 1
      return variable == variable

  with tf.Graph().as_default():
    variable = tf.compat.v1.get_variable('v', [2])
    assert hash_and_compare(variable) is True
    assert not walks
    # The control: TF 2's tensor equality walks the stack on every hash.
    monkeypatch.setattr(tensor_lib.Tensor, '_USE_EQUALITY', True)
    hash_and_compare(variable)
    assert walks
