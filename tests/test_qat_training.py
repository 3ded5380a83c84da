"""Quantization-aware training through the scripts beyond one device (issue
53, item 2): clones and a parameter-server cluster share one set of ranges
under the names an eval graph restores; moving averages, precise batch norm
and fine-tuning a float checkpoint keep them; TF-Slim's
nets/mobilenet_v1_train.py and mobilenet_v1_eval.py."""
import os
import re
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

import quantization
from classification import classifier
from classification import precise_bn
from deployment import launch
from deployment import model_deploy
from nets import nets_factory
import chaos
import scripts

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LENET = ['--model_name=lenet', '--dataset_name=digits', '--optimizer=sgd',
         '--learning_rate=0.05', '--learning_rate_decay_type=fixed',
         '--weight_decay=0', '--random_seed=0', '--log_every_n_steps=20']


def _run(script, *args, timeout=300):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  return scripts.run(os.path.join(ROOT, script), *args, env=env,
                     timeout=timeout)


def _one_device_ranges(quant_delay=10):
  """The quantization variables of LeNet's training graph on one device:
  what a one-clone run's checkpoint holds and an eval graph reads."""
  with tf.Graph().as_default():
    logits, _ = nets_factory.get_network_fn('lenet', 10, is_training=True)(
        tf1.placeholder(tf.float32, [2, 28, 28, 3]))
    tf1.losses.softmax_cross_entropy(tf.one_hot([0, 1], 10), logits)
    quantization.create_training_graph(quant_delay=quant_delay)
    return sorted(v.op.name for v in tf1.global_variables()
                  if '_quant' in v.op.name or 'quantization' in v.op.name)


def _eval_ranges():
  with tf.Graph().as_default():
    nets_factory.get_network_fn('lenet', 10)(
        tf1.placeholder(tf.float32, [2, 28, 28, 3]))
    quantization.create_eval_graph()
    return sorted(v.op.name for v in tf1.global_variables()
                  if '_quant/' in v.op.name)


def _quantization_names(checkpoint_dir):
  return sorted(n for n, _ in tf.train.list_variables(checkpoint_dir)
                if '_quant' in n or 'quantization' in n)


def _accuracy(output):
  return float(output.split('Accuracy = ')[1].split()[0])


# -- clones in one process ---------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize('layout', model_deploy.VARIABLE_UPDATES)
def test_clones_share_one_set_of_ranges_that_the_first_clone_writes(layout):
  with tf.Graph().as_default() as graph:
    config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True,
                                           exact=True, variable_update=layout)
    params = classifier.ClassifierParams(model_name='lenet', num_classes=10,
                                         quantize_delay=10, deployment=config)
    network = nets_factory.get_network_fn('lenet', 10, is_training=True)

    def clone_fn(images, labels):
      logits, _ = network(images)
      tf1.losses.softmax_cross_entropy(tf.one_hot(labels, 10), logits)

    tf1.set_random_seed(0)
    model = model_deploy.deploy(
        config, clone_fn, [tf.random.uniform([4, 28, 28, 3]),
                           tf.constant([0, 1, 2, 3])],
        optimizer=tf1.train.GradientDescentOptimizer(0.01),
        rewrite_graph=classifier._quantization_rewrite(params, training=True))
    names = sorted(v.op.name for v in tf1.global_variables()
                   if '_quant' in v.op.name or 'quantization' in v.op.name)
    assert names == _one_device_ranges()
    fake_quants = [op for op in graph.get_operations()
                   if op.type == 'FakeQuantWithMinMaxVars']
    # the same quantizers on each clone, every clone's reading the first
    # clone's updated range (no clone_1/ variables, no second update)
    by_name = {op.name: op for op in fake_quants}
    second_clone = [n for n in by_name if n.startswith('clone_1/')]
    assert len(second_clone) * 2 == len(fake_quants) >= 2 * 8
    assert sorted(n[len('clone_1/'):] for n in second_clone) == sorted(
        n for n in by_name if not n.startswith('clone_1/'))
    first = by_name['LeNet/conv2/act_quant/FakeQuantWithMinMaxVars']
    second = by_name['clone_1/LeNet/conv2/act_quant/FakeQuantWithMinMaxVars']

    def reads(fake_quant):  # (variable, after which update) of min and max
      return [(t.op.inputs[0].name, [c.name for c in t.op.control_inputs])
              for t in fake_quant.inputs[1:]]
    assert reads(second) == reads(first) == [
        ('LeNet/conv2/act_quant/min:0', ['LeNet/conv2/act_quant/AssignMinEma']),
        ('LeNet/conv2/act_quant/max:0', ['LeNet/conv2/act_quant/AssignMaxEma'])]
    assert not [op for op in graph.get_operations()
                if op.name.startswith('clone_1/') and 'Ema' in op.name]
    with tf1.Session(config=tf1.ConfigProto(
        device_count={'CPU': 2})) as session:
      session.run(tf1.global_variables_initializer())
      session.run(tf1.local_variables_initializer())  # replicated copies
      for _ in range(3):
        session.run(model.train_op)
      variables = {v.op.name: v for v in tf1.global_variables()}
      low, high, step = session.run([
          variables['LeNet/conv1/weights_quant/min'],
          variables['LeNet/conv1/weights_quant/max'],
          variables['fake_quantization_step']])
      weights = session.run(variables['LeNet/conv1/weights'])
  assert step == 3
  # written from the weights of the last step, before its update
  assert abs(low - weights.min()) < 0.01 and abs(high - weights.max()) < 0.01


def test_collective_all_reduce_in_a_cluster_is_refused_in_one_line():
  config = model_deploy.DeploymentConfig(
      num_replicas=2, variable_update='collective_all_reduce')
  params = classifier.ClassifierParams(model_name='lenet', num_classes=10,
                                       quantize_delay=0, deployment=config)
  with pytest.raises(ValueError, match=(
      r'^--quantize_delay does not run with '
      r'--variable_update=collective_all_reduce in a cluster \(2 workers\): '
      r'each worker would learn ranges of its own')):
    classifier._quantization_rewrite(params, training=True)


# -- through the scripts -------------------------------------------------------
def _float_checkpoint(directory):
  """A LeNet checkpoint trained in float (no ranges), at step 0."""
  with tf.Graph().as_default():
    tf1.set_random_seed(0)
    nets_factory.get_network_fn('lenet', 10)(  # digits: grayscale
        tf1.placeholder(tf.float32, [1, 28, 28, 1]))
    tf1.train.get_or_create_global_step()
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      return tf1.train.Saver().save(session,
                                    os.path.join(directory, 'model.ckpt'))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_clones_fine_tune_a_float_checkpoint_with_averages_into_qat(
    digits_dir, tmp_path):
  """--num_clones=2, --moving_average_decay and --checkpoint_path of a
  float checkpoint in one run: the ranges start fresh (one line), the
  checkpoint holds one device's range names, evaluation restores them."""
  float_checkpoint = _float_checkpoint(str(tmp_path / 'float'))
  train_dir = str(tmp_path / 'qat')
  trained = _run('train_image_classifier.py', *LENET,
                 '--dataset_dir=' + digits_dir, '--train_dir=' + train_dir,
                 '--num_clones=2', '--clone_on_cpu', '--batch_size=25',
                 '--max_number_of_steps=120', '--quantize_delay=40',
                 '--moving_average_decay=0.99',
                 '--checkpoint_path=' + float_checkpoint)
  assert trained.returncode == 0, trained.stderr[-3000:]
  assert ('Quantization ranges start fresh: %s holds none (trained in float)'
          % float_checkpoint) in trained.stdout.splitlines(), trained.stdout
  names = _quantization_names(train_dir)
  assert names == _one_device_ranges()
  assert set(_eval_ranges()) <= set(names)
  assert not [n for n in names if n.startswith('clone_')]
  assert tf.train.load_variable(train_dir, 'fake_quantization_step') == 120
  assert 'LeNet/conv1/weights/ExponentialMovingAverage' in dict(
      tf.train.list_variables(train_dir))
  high = tf.train.load_variable(train_dir, 'LeNet/fc3/act_quant/max')
  assert 0 < high != 6.0  # learned, not the initial range

  evaluated = _run('eval_image_classifier.py', '--dataset_name=digits',
                   '--dataset_dir=' + digits_dir,
                   '--dataset_split_name=validation',
                   '--checkpoint_path=' + train_dir,
                   '--moving_average_decay=0.99',  # as TF-Slim's: given
                   '--eval_dir=' + str(tmp_path / 'eval'))
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  first = evaluated.stdout.splitlines()[0]
  assert first.endswith(' --quantize'), first  # from the training record
  assert _accuracy(evaluated.stdout) > 0.8, evaluated.stdout


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_parameter_server_cluster_shares_the_ranges_on_the_ps(digits,
                                                                 tmp_path):
  train_dir = tmp_path / 'run'
  status = launch.run(
      1, 2, chaos.lenet_on_digits(digits, train_dir, 30,
                                  '--log_every_n_steps=10',
                                  '--save_interval_secs=2',
                                  '--async_worker_warmup_steps=0',
                                  '--quantize_delay=10'),
      grace_secs=30, out=open(tmp_path / 'log', 'w'))
  log = (tmp_path / 'log').read_text()
  assert status == 0, log[-3000:]
  assert tf.train.load_variable(str(train_dir), 'global_step') >= 30
  assert _quantization_names(str(train_dir)) == _one_device_ranges()
  # Both workers' runs count (asynchronous: one global step each).
  assert tf.train.load_variable(str(train_dir), 'fake_quantization_step') >= 30


# -- precise batch norm --------------------------------------------------------
MOBILENET, SIZE = 'mobilenet_v1_025', 32


def _qat_checkpoint(directory, act_max):
  """A mobilenet_v1_025 checkpoint of quantization-aware training whose
  activation ranges are [0, act_max]."""
  with tf.Graph().as_default():
    tf1.set_random_seed(1)
    logits, _ = nets_factory.get_network_fn(MOBILENET, 3, is_training=True)(
        tf1.placeholder(tf.float32, [2, SIZE, SIZE, 3]))
    tf1.losses.softmax_cross_entropy(tf.one_hot([0, 0], 3), logits)
    tf1.train.get_or_create_global_step()
    quantization.create_training_graph(quant_delay=0)
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      for v in tf1.global_variables():
        if v.op.name.endswith('/act_quant/max'):
          session.run(v.assign(act_max))
      return tf1.train.Saver().save(session,
                                    os.path.join(directory, 'model.ckpt'))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_precise_batch_norm_runs_the_quantized_network_and_moves_weight_ranges(
    tmp_path):
  rng = np.random.RandomState(0)
  batches = rng.uniform(-1, 1, (2, 4, SIZE, SIZE, 3)).astype(np.float32)

  def input_fn():
    return tf.data.Dataset.from_tensor_slices(
        (batches, np.zeros(batches.shape[:2], np.int64)))

  statistics, ranges = {}, {}
  for act_max in (6.0, 0.05):
    directory = str(tmp_path / str(act_max))
    checkpoint = _qat_checkpoint(directory, act_max)
    before = {n: tf.train.load_variable(checkpoint, n)
              for n, _ in tf.train.list_variables(checkpoint) if '_quant/' in n}
    precise_bn.recompute(checkpoint, MOBILENET, 3, input_fn, 2, num_clones=2)
    ranges[act_max] = before
    after = {n: tf.train.load_variable(checkpoint, n) for n in before}
    for name, value in before.items():  # the activations' as trained
      if '/weights_quant/' not in name:
        np.testing.assert_array_equal(after[name], value, err_msg=name)
    # the weights': what the next training step writes, the folded weights'
    # min and max with the new moving variance
    def load(name):
      return tf.train.load_variable(checkpoint, 'MobilenetV1/Conv2d_0/' + name)
    folded = load('weights') * load('BatchNorm/gamma') / np.sqrt(
        load('BatchNorm/moving_variance') + 0.001)
    layer = 'MobilenetV1/MobilenetV1/Conv2d_0/weights_quant/'
    np.testing.assert_allclose(
        [after[layer + 'min'], after[layer + 'max']],
        [min(folded.min(), 0), max(folded.max(), 0)], rtol=1e-5)
    assert after[layer + 'max'] != before[layer + 'max']
    statistics[act_max] = {
        n: tf.train.load_variable(checkpoint, n)
        for n in ('MobilenetV1/Conv2d_0/BatchNorm/moving_mean',
                  'MobilenetV1/Conv2d_1_depthwise/BatchNorm/moving_mean')}
    shutil.rmtree(directory)
  # The first layer reads the images (no range): the same statistics; the
  # second reads the first's activations quantized to [0, 6] or [0, 0.05].
  first, second = sorted(statistics[6.0])
  np.testing.assert_allclose(statistics[6.0][first], statistics[0.05][first],
                             rtol=1e-5, atol=1e-6)
  assert np.abs(statistics[6.0][second] -
                statistics[0.05][second]).max() > 1e-3


# -- TF-Slim's nets/mobilenet_v1_train.py and mobilenet_v1_eval.py -------------
MOBILENET_DIGITS = ['--dataset_name=digits', '--num_classes=10',
                    '--depth_multiplier=0.25', '--image_size=32']


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_mobilenet_v1_scripts_train_and_evaluate_on_digits(digits_dir,
                                                           tmp_path):
  train_dir = str(tmp_path / 'mobilenet')
  trained = _run('nets/mobilenet_v1_train.py', *MOBILENET_DIGITS,
                 '--dataset_dir=' + digits_dir, '--checkpoint_dir=' + train_dir,
                 '--number_of_steps=5', '--batch_size=16',
                 '--log_every_n_steps=5', '--quantize')
  assert trained.returncode == 0, trained.stderr[-3000:]
  assert 'Trained to step 5; checkpoint ' in trained.stdout, trained.stdout
  names = dict(tf.train.list_variables(train_dir))
  assert names['MobilenetV1/Conv2d_0/weights'] == [3, 3, 1, 8]  # grayscale
  assert tf.train.load_variable(train_dir, 'global_step') == 5
  # --quantize: TF-Slim's ranges of all 28 layers, batch norm folded
  ranges = [n for n in names if n.endswith(('_quant/min', '_quant/max'))]
  assert len(ranges) == 28 * 4, ranges
  for name in ('MobilenetV1/MobilenetV1/Conv2d_0/act_quant/min',
               'MobilenetV1/MobilenetV1/Conv2d_13_pointwise/weights_quant/max',
               'MobilenetV1/Logits/Conv2d_1c_1x1/weights_quant/min'):
    assert name in names, name
  assert tf.train.load_variable(train_dir, 'fake_quantization_step') == 5
  evaluated = _run('nets/mobilenet_v1_eval.py', *MOBILENET_DIGITS,
                   '--dataset_dir=' + digits_dir,
                   '--checkpoint_dir=' + train_dir, '--num_examples=64',
                   '--batch_size=32', '--eval_dir=' + str(tmp_path / 'eval'),
                   '--quantize')
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  assert 0.0 <= _accuracy(evaluated.stdout) <= 1.0
  assert re.search(r'on digits/validation', evaluated.stdout), evaluated.stdout
  refused = _run('nets/mobilenet_v1_eval.py', '--dataset_name=digits',
                 '--dataset_dir=' + digits_dir, '--checkpoint_dir=' + train_dir)
  assert refused.returncode == 1
  assert refused.stderr.strip().splitlines()[-1] == (
      'mobilenet_v1_eval: error: --num_classes=1001, but dataset digits has '
      '10 classes; pass --num_classes=10')
