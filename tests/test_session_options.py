"""--precision and the thread flags: the session config they make, and
bfloat16 training that learns as float32 does, with float32 checkpoints."""
import os

import numpy as np
import pytest
import tensorflow as tf

from classification import classifier
from classification import optimization
from datasets import converters, dataset_factory
from deployment import session_options
from runner import estimator as est

tf1 = tf.compat.v1
ON = session_options.rewriter_config_pb2.RewriterConfig.ON


@pytest.mark.parametrize('precision, bf16, fp16', [
    ('float32', False, False), ('bfloat16', True, False)])
def test_precision_turns_the_mixed_precision_rewrite_on_or_off(
    precision, bf16, fp16):
  config = session_options.configure(precision=precision)
  rewrites = config.graph_options.rewrite_options
  assert (rewrites.auto_mixed_precision_onednn_bfloat16 == ON) == bf16
  assert (rewrites.auto_mixed_precision == ON) == fp16
  assert session_options.precision_of(config) == precision
  assert config.allow_soft_placement


def test_float32_turns_off_a_rewrite_a_config_had():
  config = session_options.configure(precision='bfloat16')
  session_options.configure(config, precision='float32')
  assert session_options.precision_of(config) == 'float32'


def _cpu_has_bfloat16():
  try:
    with open('/proc/cpuinfo') as f:
      flags = f.read()
  except OSError:
    return False
  return 'avx512_bf16' in flags or 'amx_bf16' in flags


@pytest.mark.skipif(not _cpu_has_bfloat16(), reason='no bfloat16 CPU units')
def test_bfloat16_session_computes_in_bfloat16():
  """The rewrite really runs: a float32 matmul comes out with bfloat16's
  8-bit mantissa, from the same graph a float32 session runs exactly."""
  rng = np.random.RandomState(0)
  a, b = rng.randn(64, 64).astype(np.float32), rng.randn(64, 64).astype(
      np.float32)
  with tf.Graph().as_default():
    x = tf1.placeholder(tf.float32, [64, 64])
    y = tf1.placeholder(tf.float32, [64, 64])
    product = tf.nn.relu(tf.matmul(x, y))
    results = {}
    for precision in ('float32', 'bfloat16'):
      with tf1.Session(config=session_options.configure(
          precision=precision)) as session:
        results[precision] = session.run(product, {x: a, y: b})
  want = np.maximum(a @ b, 0)
  np.testing.assert_allclose(results['float32'], want, rtol=1e-4, atol=1e-4)
  error = np.abs(results['bfloat16'] - want).max()
  assert 1e-3 < error < 0.5, error


def test_configure_keeps_the_devices_and_sets_the_threads():
  config = tf1.ConfigProto()
  config.device_count['CPU'] = 3
  same = session_options.configure(config, intra_op_threads=2,
                                   inter_op_threads=1)
  assert same is config
  assert config.device_count['CPU'] == 3
  assert config.intra_op_parallelism_threads == 2
  assert config.inter_op_parallelism_threads == 1
  default = session_options.configure()  # 0: left to TensorFlow
  assert default.intra_op_parallelism_threads == 0
  assert default.inter_op_parallelism_threads == 0


@pytest.mark.parametrize('precision, message', [
    ('fp16', '--precision=fp16 is not one of float32, bfloat16, float16'),
    ('float16', '--precision=float16 needs a GPU and none is visible'),
])
def test_precision_that_cannot_run_names_the_flag(precision, message):
  if precision == 'float16' and tf.config.list_physical_devices('GPU'):
    pytest.skip('a GPU is visible')
  with pytest.raises(ValueError, match=message):
    session_options.configure(precision=precision)


def test_negative_threads_name_the_flag():
  with pytest.raises(ValueError, match='--inter_op_threads must be 0'):
    session_options.configure(inter_op_threads=-1)


def test_loss_scaled_optimizer_takes_the_unscaled_step():
  """float16's dynamic loss scaling (checkable on a CPU in float32): the
  scaled loss's gradients are unscaled before the update, so the variables
  move exactly as without scaling."""
  def train(precision):
    with tf.Graph().as_default():
      v = tf1.get_variable('v', initializer=[1.0, -2.0, 3.0])
      optimizer = session_options.loss_scale_optimizer(
          tf1.train.MomentumOptimizer(0.1, 0.9), precision)
      step = optimizer.apply_gradients(optimizer.compute_gradients(
          tf.reduce_sum(v * v * v)))
      with tf1.Session() as session:
        session.run(tf1.global_variables_initializer())
        for _ in range(3):
          session.run(step)
        return session.run(v), [x.op.name for x in tf1.global_variables()]
  scaled, names = train('float16')
  plain, _ = train('float32')
  np.testing.assert_allclose(scaled, plain, rtol=1e-6)
  assert 'current_loss_scale' in names


@pytest.fixture(scope='module')
def digits_dir(tmp_path_factory):
  path = str(tmp_path_factory.mktemp('digits'))
  converters.convert('digits', path, stream=open(os.devnull, 'w'))
  return path


def _train_and_evaluate(digits_dir, train_dir, precision, steps):
  params = classifier.ClassifierParams(
      model_name='lenet', num_classes=10, num_samples_per_epoch=1437,
      batch_size=50, weight_decay=0.0, log_every_n_steps=10 ** 6,
      precision=precision, summarize_activations=False,
      optimizer=optimization.OptimizerParams(
          optimizer='sgd', learning_rate=0.02,
          learning_rate_decay_type='fixed'))

  def estimator(session_precision):
    config = est.RunConfig(
        tf_random_seed=0, log_step_count_steps=None, save_summary_steps=None,
        session_config=session_options.configure(precision=session_precision))
    return est.Estimator(classifier.model_fn, train_dir, config=config,
                         params={'classifier': params})
  train = dataset_factory.get_dataset('digits', 'train', digits_dir)
  estimator(precision).train(classifier.make_input_fn(
      train, 'lenet', 50, is_training=True, num_readers=1, deterministic=True,
      seed=0), max_steps=steps)
  validation = dataset_factory.get_dataset('digits', 'validation', digits_dir)
  # Evaluated in float32 whatever the training's precision.
  return estimator('float32').evaluate(classifier.make_input_fn(
      validation, 'lenet', 120, is_training=False, num_epochs=1,
      deterministic=True), steps=3)['Accuracy']


@pytest.mark.slow
def test_bfloat16_training_learns_as_float32_does_and_saves_float32(
    digits_dir, tmp_path):
  bf16 = _train_and_evaluate(digits_dir, str(tmp_path / 'bf16'), 'bfloat16',
                             100)
  fp32 = _train_and_evaluate(digits_dir, str(tmp_path / 'fp32'), 'float32',
                             100)
  assert fp32 > 0.9  # learned: the comparison means something
  assert bf16 >= fp32 - 0.005, (bf16, fp32)  # within half a point
  dtypes = tf.train.load_checkpoint(str(tmp_path / 'bf16')
                                    ).get_variable_to_dtype_map()
  fp32_names = tf.train.load_checkpoint(str(tmp_path / 'fp32')
                                        ).get_variable_to_dtype_map()
  assert sorted(dtypes) == sorted(fp32_names)  # the same checkpoint layout
  assert {name: dtype for name, dtype in dtypes.items()
          if dtype not in (tf.float32, tf.int64)} == {}


def _training_graph(precision):
  """What classifier.model_fn builds to train resnet_v1_50 in `precision`
  on two CPU clones with plain SGD: (graph, EstimatorSpec)."""
  graph = tf.Graph()
  with graph.as_default():
    images = tf.random.stateless_uniform((4, 64, 64, 3), (1, 2))
    labels = tf.constant([0, 1, 2, 3], tf.int64)
    params = classifier.ClassifierParams(
        model_name='resnet_v1_50', num_classes=5, batch_size=2,
        precision=precision, summarize_activations=False,
        optimizer=optimization.OptimizerParams(
            optimizer='sgd', learning_rate=0.1,
            learning_rate_decay_type='fixed'),
        deployment=classifier.model_deploy.DeploymentConfig(
            num_clones=2, clone_on_cpu=True))
    spec = classifier.model_fn(images, labels, est.ModeKeys.TRAIN,
                               {'classifier': params})
  return graph, spec


@pytest.fixture(scope='module')
def training_graphs():
  return {precision: _training_graph(precision)
          for precision in ('float32', 'bfloat16')}


def _ops(graph, op_type):
  return [op for op in graph.get_operations() if op.type == op_type]


def _variables(graph):
  with graph.as_default():
    return [(v.op.name, v.shape.as_list(), v.dtype.base_dtype)
            for v in tf1.global_variables()]


def test_bfloat16_network_keeps_float32_variables_and_computes_in_bfloat16(
    training_graphs):
  fp32, _ = training_graphs['float32']
  bf16, bf16_spec = training_graphs['bfloat16']
  # The checkpoint's names, shapes and float32 types, slots included.
  assert _variables(bf16) == _variables(fp32)
  assert bf16_spec.loss.dtype == tf.float32
  convolutions = _ops(bf16, 'Conv2D')
  assert len(convolutions) == 2 * 54  # 53 and the logits per clone
  assert {op.get_attr('T') for op in convolutions} == {tf.bfloat16}
  # Batch norm on bfloat16 activations, float32 scale/offset/statistics.
  norms = _ops(bf16, 'FusedBatchNormV3')
  assert len(norms) == len(_ops(fp32, 'FusedBatchNormV3')) == 2 * 53
  assert {(op.get_attr('T'), op.get_attr('U')) for op in norms} == {
      (tf.bfloat16, tf.float32)}
  # Each weight cast once for both clones: conv kernels, the logits' bias.
  weight_casts = [op for op in _ops(bf16, 'Cast')
                  if op.inputs[0].op.type == 'ReadVariableOp']
  assert len(weight_casts) == 54 + 1
  assert {op.inputs[0].op.inputs[0].op.name for op in weight_casts} == {
      name for name, _, _ in _variables(bf16)
      if name.endswith(('/weights', '/biases'))}
  # Weight decay once (not per clone), float32, as float32's.
  with fp32.as_default():
    fp32_decay = tf1.losses.get_regularization_losses()
  with bf16.as_default():
    bf16_decay = tf1.losses.get_regularization_losses()
  assert len(bf16_decay) == len(fp32_decay) == 54
  assert {loss.dtype for loss in bf16_decay} == {tf.float32}


def test_float32_and_float16_networks_are_built_as_ever():
  network_fn = lambda images: (images, {})  # noqa: E731
  for precision in ('float32', 'float16'):
    assert session_options.network_in_precision(network_fn,
                                                precision) is network_fn
