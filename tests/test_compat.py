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
  loss = tf.reduce_mean(slim.flatten(y))
  step = tf1.train.get_or_create_global_step()
  optimizers.optimize_loss(loss, step, 0.1, 'SGD')
  assert len(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)) == 2
print('ok')
'''


def _run(first_import, program=USE_SLIM):
  code = (first_import + '\n' if first_import else '') + program
  return subprocess.run([sys.executable, '-c', code], cwd=ROOT,
                        capture_output=True, text=True, timeout=300,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))


@pytest.mark.parametrize('module', [
    'nets.nets_factory', 'nets.lenet', 'datasets.dataset_factory',
    'preprocessing.preprocessing_factory', 'deployment.model_deploy',
    'runner.estimator', 'classification.classifier', 'tf_compat'])
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


# A TF-Slim dataset module's decoder (as datasets/flowers.py builds it) on a
# real JPEG record: tfexample_decoder.Image reads control_flow_ops.case/cond.
DECODE_JPEG = '''
import io
import numpy as np, PIL.Image
import tensorflow as tf, tf_slim as slim
tf1 = tf.compat.v1
data = io.BytesIO()
PIL.Image.fromarray(np.full((6, 5, 3), 200, np.uint8)).save(data, 'JPEG')
example = tf.train.Example(features=tf.train.Features(feature={
    'image/encoded': tf.train.Feature(bytes_list=tf.train.BytesList(value=[data.getvalue()])),
    'image/format': tf.train.Feature(bytes_list=tf.train.BytesList(value=[b'jpg'])),
    'image/class/label': tf.train.Feature(int64_list=tf.train.Int64List(value=[3]))}))
with tf.Graph().as_default():
  decoder = slim.tfexample_decoder.TFExampleDecoder(
      {'image/encoded': tf1.FixedLenFeature((), tf.string, default_value=''),
       'image/format': tf1.FixedLenFeature((), tf.string, default_value='png'),
       'image/class/label': tf1.FixedLenFeature([], tf.int64)},
      {'image': slim.tfexample_decoder.Image(),
       'label': slim.tfexample_decoder.Tensor('image/class/label')})
  image, label = decoder.decode(tf.constant(example.SerializeToString()),
                                ['image', 'label'])
  with tf1.Session() as session:
    image, label = session.run([image, label])
assert image.shape == (6, 5, 3) and abs(int(image.mean()) - 200) <= 2, image.shape
assert label == 3
print('ok')
'''


def test_tf_slim_example_decoder_decodes_a_jpeg_after_the_compat_module():
  result = _run('import tf_compat', DECODE_JPEG)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.strip().endswith('ok')


def test_without_the_compat_module_tf_slim_image_decoder_fails():
  """The control: control_flow_ops no longer has the case tf-slim calls."""
  result = _run('', DECODE_JPEG)
  assert result.returncode != 0
  assert ("module 'tensorflow.python.ops.control_flow_ops' has no attribute "
          "'case'") in result.stderr


def test_variables_hash_by_identity_without_a_context_walk_while_a_net_is_built(
    monkeypatch):
  """Root cause 3 of tf_compat: tf-keras' legacy layers hash every global
  variable per weight they add; inside `identity_hashing` (where the factory
  builds networks) each hash must not walk the context stack."""
  import tensorflow as tf
  from tensorflow.python.framework import ops
  import tf_compat

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
    with tf_compat.identity_hashing():
      assert hash_and_compare(variable) is True
    assert not walks
    # The control: outside the block, TF 2's tensor equality walks the stack
    # on every hash (the switch was restored).
    hash_and_compare(variable)
    assert walks


# A TF2 user's program: eager, Keras 3. Importing the project and using it
# (a zoo network in a graph of its own, model_deploy and the runner) must
# leave the program's eager computations and Keras model working as before.
EAGER_PROGRAM = '''
import tempfile
import numpy as np
import tensorflow as tf
%(keras_before)s
from classification import classifier  # noqa: F401
from deployment import model_deploy
from nets import nets_factory
from runner import estimator
%(keras_after)s
tf1 = tf.compat.v1


def check_the_program_is_untouched():
  assert tf.executing_eagerly()
  equal = tf.constant([1, 2]) == tf.constant([1, 3])
  assert equal.numpy().tolist() == [True, False], equal
  assert keras.__version__.startswith('3.'), keras.__version__
  assert tf.keras.layers.Dense is keras.layers.Dense  # tf.keras is Keras 3
  model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
  model.compile(optimizer='sgd', loss='mse')
  loss = model.fit(np.ones((8, 4)), np.zeros((8, 2)), verbose=0).history['loss']
  assert len(loss) == 1 and np.isfinite(loss[0]), loss


def clone(images, labels):
  network_fn = nets_factory.get_network_fn('lenet', 10, is_training=True)
  logits, _ = network_fn(images)
  tf1.losses.sparse_softmax_cross_entropy(labels, logits)
  return logits


def model_fn(features, labels, mode):
  training = mode == estimator.ModeKeys.TRAIN
  deployed = model_deploy.deploy(
      model_deploy.DeploymentConfig(exact=True), clone, [features, labels],
      optimizer=tf1.train.GradientDescentOptimizer(0.01) if training else None)
  return estimator.EstimatorSpec(mode, loss=deployed.total_loss,
                                 train_op=deployed.train_op)


def input_fn():
  return tf.data.Dataset.from_tensors(
      (tf.zeros([2, 28, 28, 3]), tf.zeros([2], tf.int64))).repeat()


check_the_program_is_untouched()
with tf.Graph().as_default():
  images = tf1.placeholder(tf.float32, [2, 28, 28, 3])
  logits, _ = nets_factory.get_network_fn('lenet', 10)(images)
  with tf1.Session() as session:
    session.run(tf1.global_variables_initializer())
    assert session.run(logits, {images: np.zeros([2, 28, 28, 3])}).shape == (2, 10)
runner = estimator.Estimator(model_fn, model_dir=tempfile.mkdtemp())
runner.train(input_fn, max_steps=1)
assert runner.get_variable_value('global_step') == 1
assert runner.evaluate(input_fn, steps=1)['global_step'] == 1
check_the_program_is_untouched()
print('ok')
'''


@pytest.mark.parametrize('keras_first', [True, False])
def test_importing_the_project_leaves_an_eager_keras_3_program_alone(
    keras_first):
  imports = {'keras_before': 'import keras' if keras_first else '',
             'keras_after': '' if keras_first else 'import keras'}
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  result = subprocess.run([sys.executable, '-c', EAGER_PROGRAM % imports],
                          cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip().endswith('ok')
