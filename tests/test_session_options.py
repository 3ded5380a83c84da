"""--precision and the thread flags: the session config they make, and
bfloat16 training that learns as float32 does, with float32 checkpoints; on
a CPU without bfloat16 units, the one line saying what bfloat16 does there."""

import os

import numpy as np
import pytest
import tensorflow as tf

from classification import classifier
from classification import optimization
from datasets import dataset_factory
from deployment import session_options
from runner import estimator as est
import scripts

tf1 = tf.compat.v1
ON = session_options.rewriter_config_pb2.RewriterConfig.ON
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


@pytest.mark.skipif(not _cpu_has_bfloat16(), reason='no bfloat16 CPU units')
def test_bfloat16_step_keeps_activations_in_bfloat16_and_casts_each_weight_once():
  """The graph a bfloat16 training step runs (after grappler's rewrite):
  convolutions and batch norm in bfloat16 with float32 scale, offset and
  statistics, each weight cast once and its gradient cast back once, the
  optimizer in float32 -- no casts around batch norm."""
  with tf.Graph().as_default():
    images = tf.random.stateless_uniform((2, 64, 64, 3), (1, 2))
    params = classifier.ClassifierParams(
        model_name='mobilenet_v1_025', num_classes=5, batch_size=2,
        precision='bfloat16', summarize_activations=False,
        optimizer=optimization.OptimizerParams(
            optimizer='momentum', learning_rate_decay_type='fixed'))
    spec = classifier.model_fn(images, tf.constant([0, 1], tf.int64),
                               est.ModeKeys.TRAIN, {'classifier': params})
    trainable = tf1.trainable_variables()
    weights = [v for v in trainable if '/BatchNorm/' not in v.op.name]
    with tf1.Session(config=session_options.configure(
        precision='bfloat16')) as session:
      session.run(tf1.global_variables_initializer())
      metadata = tf1.RunMetadata()
      session.run(spec.train_op, options=tf1.RunOptions(
          output_partition_graphs=True), run_metadata=metadata)
  nodes = [node for graph in metadata.partition_graphs for node in graph.node]

  def dtype(node, attr='T'):
    return tf.as_dtype(node.attr[attr].type)
  casts = [(dtype(n, 'SrcT'), dtype(n, 'DstT')) for n in nodes
           if n.op == 'Cast']
  # The weights (28 convolutions, the logits' bias) and the images.
  assert casts.count((tf.float32, tf.bfloat16)) == len(weights) + 1 == 30
  assert casts.count((tf.bfloat16, tf.float32)) == len(weights)  # gradients
  convolutions = [n for n in nodes if 'Conv2D' in n.op or 'Depthwise' in n.op]
  # Forward, input and filter gradients (the images need no gradient).
  assert len(convolutions) == 3 * 28 - 1
  assert {dtype(n) for n in convolutions} == {tf.bfloat16}
  norms = [n for n in nodes if 'FusedBatchNorm' in n.op]
  assert len(norms) == 2 * 27  # forward and gradient of each
  assert {(dtype(n), dtype(n, 'U')) for n in norms} == {
      (tf.bfloat16, tf.float32)}
  updates = [n for n in nodes if n.op == 'ResourceApplyMomentum']
  assert len(updates) == len(trainable)
  assert {dtype(n) for n in updates} == {tf.float32}


# -- bfloat16 on a CPU without bfloat16 units ---------------------------------
CPUS = {  # /proc/cpuinfo of one core: (model, flags)
    'sapphire_rapids': ('Intel(R) Xeon(R) Platinum 8480+',
                        'fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile'),
    'genoa': ('AMD EPYC 9654 96-Core Processor', 'fpu avx2 avx512f '
              'avx512_bf16'),
    'cascade_lake': ('Intel(R) Xeon(R) Gold 6248', 'fpu avx2 avx512f '
                     'avx512_vnni'),
    'milan': ('AMD EPYC', 'fpu avx avx2 fma f16c'),
    'graviton3': (None, None),  # aarch64: no model name, no x86 flags
}


@pytest.fixture
def cpu(monkeypatch, tmp_path):
  """cpu(name): this process's CPU is CPUS[name] for session_options, whose
  note is not yet said."""
  monkeypatch.setattr(session_options, '_bfloat16_noted', False)

  def make(name):
    model, flags = CPUS[name]
    path = tmp_path / 'cpuinfo'
    path.write_text(''.join(
        'processor\t: %d\nmodel name\t: %s\nflags\t\t: %s\n\n' % (
            i, model, flags) if model else
        'processor\t: %d\nFeatures\t: fp asimd sve bf16\n\n' % i
        for i in range(2)))
    monkeypatch.setattr(session_options, 'CPUINFO', str(path))
    return model
  return make


@pytest.mark.parametrize('name, compute, says', [
    ('sapphire_rapids', 'units', None),
    ('genoa', 'units', None),
    ('cascade_lake', 'converted', 'this run computes in bfloat16 by '
     'conversions on AVX-512'),
    ('milan', 'float32', 'this run computes in float32'),
    ('graviton3', 'unknown', None),
])
def test_bfloat16_says_once_in_one_line_what_it_does_without_bfloat16_units(
    cpu, capsys, name, compute, says):
  model = cpu(name)
  assert session_options.bfloat16_compute() == compute
  for _ in range(3):  # a run's sessions: training, precise batch norm, ...
    config = session_options.configure(precision='bfloat16')
    assert session_options.precision_of(config) == 'bfloat16'
  lines = capsys.readouterr().err.splitlines()
  if says is None:
    assert lines == []
    return
  assert len(lines) == 1, lines
  assert (': warning: --precision=bfloat16: this CPU (%s) has no bfloat16 '
          'units (neither AMX nor AVX512-BF16)' % model) in lines[0]
  assert says in lines[0]


def test_float32_says_nothing_of_bfloat16(cpu, capsys):
  cpu('milan')
  session_options.configure(precision='float32')
  assert capsys.readouterr().err == ''
  assert not session_options._bfloat16_noted  # pylint: disable=protected-access


def _tensorflow_computes_bfloat16_here():
  """TensorFlow's own answer (oneDNN's CPU check), or None if this build
  does not expose it."""
  try:
    from tensorflow.python.util import _pywrap_utils  # pylint: disable=import-outside-toplevel
    return _pywrap_utils.IsDataTypeSupportedByOneDNNOnThisCPU(
        tf.bfloat16.as_datatype_enum)
  except (ImportError, AttributeError):
    return None


def test_the_note_tells_what_the_session_runs_on_this_cpu():
  """On the machine running the test: a bfloat16 session's graph as run has
  bfloat16 ops exactly where bfloat16_compute says it computes in bfloat16,
  which is where TensorFlow's own CPU check says it can."""
  compute = session_options.bfloat16_compute()
  if compute == 'unknown':
    pytest.skip('no x86 CPU flags in /proc/cpuinfo')
  tensorflow_says = _tensorflow_computes_bfloat16_here()
  if tensorflow_says is not None:
    assert tensorflow_says == (compute != 'float32'), (
        compute, session_options.cpu_description())
  with tf.Graph().as_default():
    x = tf.random.stateless_uniform((4, 8, 8, 3), (1, 2))
    kernel = tf1.get_variable('kernel', (3, 3, 3, 8))
    y = tf.reduce_sum(tf.nn.relu(tf.nn.conv2d(x, kernel, 1, 'SAME')))
    with tf1.Session(config=session_options.configure(
        precision='bfloat16')) as session:
      session.run(tf1.global_variables_initializer())
      metadata = tf1.RunMetadata()
      session.run(y, options=tf1.RunOptions(output_partition_graphs=True),
                  run_metadata=metadata)
  bf16 = [n.name for g in metadata.partition_graphs for n in g.node
          if tf.bfloat16.as_datatype_enum in (
              n.attr['T'].type, n.attr['DstT'].type)]
  assert bool(bf16) == (compute != 'float32'), (compute, bf16)


@pytest.mark.slow
def test_a_bfloat16_run_says_it_once_whatever_its_sessions(digits_dir, tmp_path):
  """Training with precise batch norm configures two sessions, evaluation
  one: each run says it in one line, on a CPU without bfloat16 units; on
  one with them, nothing."""
  train_dir = str(tmp_path / 'run')
  runs = {
      'train_image_classifier': [
          '--model_name=mobilenet_v1_025', '--train_image_size=32',
          '--train_dir=' + train_dir, '--batch_size=8',
          '--max_number_of_steps=2', '--precise_bn_batches=1'],
      'eval_image_classifier': [
          '--model_name=mobilenet_v1_025', '--eval_image_size=32',
          '--checkpoint_path=' + train_dir, '--batch_size=8',
          '--max_num_batches=1', '--dataset_split_name=validation']}
  note = session_options.bfloat16_note()
  for script, flags in runs.items():
    result = scripts.run(os.path.join(ROOT, script + '.py'), *flags,
                         '--dataset_name=digits', '--dataset_dir=' + digits_dir,
                         '--precision=bfloat16', timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    said = [line for line in result.stderr.splitlines()
            if '--precision=bfloat16' in line]
    assert said == ([] if note is None else
                    ['%s: warning: %s' % (script, note)]), result.stderr
