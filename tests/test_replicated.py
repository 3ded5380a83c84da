"""Replicated all-reduce (`variable_update='replicated'`) on logical CPU
devices: a copy of every trainable variable per clone, gradients summed by
collective ops, the same step as the parameter-server layout and one device,
checkpoints of one model."""
import os
import re

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
import tf_slim as slim

from deployment import launch
from deployment import model_deploy
from runner import estimator as est
from test_training import EVAL, LENET_FLAGS, TRAIN, run  # noqa: F401
from benchmarks import task_resources
import scripts

STEP = re.compile(r'^step (\d+)/\d+ ', re.M)

tf1 = tf.compat.v1
CPUS = tf1.ConfigProto(device_count={'CPU': 3})
OPTIMIZERS = {
    'sgd': lambda: tf1.train.GradientDescentOptimizer(0.5),
    'momentum': lambda: tf1.train.MomentumOptimizer(0.1, 0.9),
    'adam': lambda: tf1.train.AdamOptimizer(0.05),
    'rmsprop': lambda: tf1.train.RMSPropOptimizer(0.05, momentum=0.9),
}


def _data(batch=8, seed=0):
  rng = np.random.RandomState(seed)
  return (rng.rand(batch, 6, 6, 3).astype(np.float32),
          rng.randint(0, 4, size=batch).astype(np.int64))


def _model_fn(batch_norm=True):
  """conv (+ batch norm) + dense: trainable, non-trainable and sliced
  statistics."""

  def model(images, labels):
    normalizer = slim.batch_norm if batch_norm else None
    net = slim.conv2d(images, 4, [3, 3], normalizer_fn=normalizer,
                      normalizer_params={'is_training': True}, scope='conv')
    logits = slim.fully_connected(slim.flatten(net), 4, activation_fn=None,
                                  scope='fc')
    tf1.losses.sparse_softmax_cross_entropy(labels, logits)

  return model


def _deploy(update, clones, optimizer, batch_norm=True, seed=0):
  """A graph with the deployed model; returns (train_op, clones)."""
  tf1.set_random_seed(seed)
  images, labels = _data()
  config = model_deploy.DeploymentConfig(exact=True,
      num_clones=clones, clone_on_cpu=True,
      variable_update=update if clones > 1 else 'parameter_server')
  model = model_deploy.deploy(
      config, _model_fn(batch_norm), [tf.constant(images), tf.constant(labels)],
      optimizer=OPTIMIZERS[optimizer]())
  return model.train_op, model.clones


def _values(sess, variables):
  return sess.run({v.op.name: v for v in variables})


def _assert_copies_equal(local, originals, clones):
  """Every 'clone_<k>/<name>' (copy or slot) equals '<name>'."""
  assert len(local) == (clones - 1) * len(
      [n for n in originals if not n.endswith(('moving_mean',
                                               'moving_variance',
                                               '_power', 'global_step'))])
  for name, value in local.items():
    prefix, original = name.split('/', 1)
    assert prefix.startswith('clone_') and prefix != 'clone_0'
    np.testing.assert_allclose(value, originals[original], rtol=1e-6,
                               atol=1e-7, err_msg=name)


def _train(update, clones, optimizer, steps=3, batch_norm=True):
  """Clone 0's (global) variables after `steps` steps; copies checked equal
  to them after every step."""
  with tf.Graph().as_default():
    train_op, _ = _deploy(update, clones, optimizer, batch_norm)
    with tf1.Session(config=CPUS) as sess:
      sess.run(tf1.global_variables_initializer())
      sess.run(tf1.local_variables_initializer())
      for _ in range(steps):
        sess.run(train_op)
        values = _values(sess, tf1.global_variables())
        if update == 'replicated':
          _assert_copies_equal(_values(sess, tf1.local_variables()), values,
                               clones)
  return values


def _assert_same(expected, actual):
  assert sorted(expected) == sorted(actual)
  for name in expected:
    np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5,
                               atol=1e-6, err_msg=name)


@pytest.mark.parametrize('optimizer,clones', [
    ('sgd', 2), ('momentum', 2), ('adam', 2), ('rmsprop', 2),
    pytest.param('momentum', 3, marks=pytest.mark.slow),
    pytest.param('adam', 3, marks=pytest.mark.slow)])
def test_replicated_takes_the_parameter_server_step(optimizer, clones):
  """Batch norm included: each clone normalizes its own slice in both."""
  replicated = _train('replicated', clones, optimizer)
  assert replicated['global_step'] == 3
  _assert_same(_train('parameter_server', clones, optimizer), replicated)


@pytest.mark.parametrize('optimizer,clones', [
    ('momentum', 3), pytest.param('adam', 2, marks=pytest.mark.slow)])
def test_replicated_takes_one_devices_step_on_the_whole_batch(optimizer,
                                                              clones):
  """Without batch norm (whose statistics are per slice) the step is one
  device's."""
  _assert_same(_train('parameter_server', 1, optimizer, batch_norm=False),
               _train('replicated', clones, optimizer, batch_norm=False))


def test_each_clone_reduces_each_trainable_variable_on_its_own_device():
  with tf.Graph().as_default() as graph:
    _, clones = _deploy('replicated', 3, 'momentum')
    trainable = tf1.trainable_variables()
    reduces = [op for op in graph.get_operations()
               if op.type in ('CollectiveReduceV2', 'CollectiveReduce')]
    assert len(reduces) == 3 * len(trainable) == 3 * 4
    assert sorted(op.device for op in reduces) == sorted(
        ['/device:CPU:%d' % i for i in range(3)] * 4)
    for variable in trainable:  # clone 0's, on clone 0's device
      assert variable.device == '/device:CPU:0'
    for k, clone in enumerate(clones):
      copies = list((clone.copies or {}).values())
      assert len(copies) == (4 if k else 0)
      for copy in copies:
        assert copy.op.name.startswith('clone_%d/' % k)
        assert copy.device == '/device:CPU:%d' % k
    slots = [v for v in tf1.local_variables() if v.op.name.endswith(
        '/Momentum')]
    assert len(slots) == 2 * 4
    for slot in slots:
      assert slot.device == '/device:CPU:' + slot.op.name[len('clone_')]
    assert {v.op.name for v in tf1.model_variables()} == {
        'conv/weights', 'conv/BatchNorm/beta', 'conv/BatchNorm/moving_mean',
        'conv/BatchNorm/moving_variance', 'fc/weights', 'fc/biases'}


def test_keras_and_tf1_layers_and_get_variable_get_copies_too():
  def model(features, labels):
    hidden = tf_keras.layers.Dense(5)(features)
    hidden = tf1.layers.dense(hidden, 4)
    logits = tf.matmul(hidden, tf1.get_variable('plain', [4, 3]))
    tf1.losses.sparse_softmax_cross_entropy(labels, logits)

  with tf.Graph().as_default() as graph:
    config = model_deploy.DeploymentConfig(exact=True, num_clones=2, clone_on_cpu=True,
                                           variable_update='replicated')
    clones = model_deploy.create_clones(
        config, model, [tf.zeros([4, 6]), tf.zeros([4], tf.int64)])
    trainable = tf1.trainable_variables()
    assert len(trainable) == 5
    copies = clones[1].copies
    assert {v.ref() for v in trainable} == set(copies)
    # Clone 1's layers read its copies only.
    matmuls = [op for op in graph.get_operations()
               if op.type == 'MatMul' and op.name.startswith('clone_1/')]
    read = {op.inputs[1].op.inputs[0].op.name for op in matmuls}
    assert read == {copies[v.ref()].op.name for v in trainable
                    if v.shape.rank == 2}


def test_checkpoint_holds_one_model_and_resuming_resyncs_the_copies(
    tmp_path):
  prefix = str(tmp_path / 'model.ckpt')
  with tf.Graph().as_default():
    train_op, _ = _deploy('replicated', 2, 'adam')
    with tf1.Session(config=CPUS) as sess:
      sess.run(tf1.global_variables_initializer())
      sess.run(tf1.local_variables_initializer())
      for _ in range(3):
        sess.run(train_op)
      checkpoint = tf1.train.Saver().save(sess, prefix)
  with tf.Graph().as_default():
    _deploy('parameter_server', 1, 'adam')
    one_device = {v.op.name for v in tf1.global_variables()}
  assert {name for name, _ in tf.train.list_variables(checkpoint)} == (
      one_device)

  def resume(update):
    """Restored values (and copies) before the 4th step, values after it."""
    with tf.Graph().as_default():
      train_op, _ = _deploy(update, 2, 'adam', seed=1)  # other initial values
      creator = tf1.train.ChiefSessionCreator(
          checkpoint_filename_with_path=checkpoint, config=CPUS)
      with tf1.train.MonitoredSession(session_creator=creator) as sess:
        restored = _values(sess, tf1.global_variables())
        copies = _values(sess, tf1.local_variables())
        sess.run(train_op)
        return restored, copies, _values(sess, tf1.global_variables())

  restored, copies, after = resume('replicated')
  assert restored['global_step'] == 3 and after['global_step'] == 4
  assert any('Adam' in name for name in copies)
  _assert_copies_equal(copies, restored, 2)
  _assert_same(resume('parameter_server')[2], after)


def test_bad_replicated_config_names_the_argument():
  with pytest.raises(ValueError, match=r"^variable_update='replicated' needs "
                     r'num_clones > 1, got 1$'):
    model_deploy.DeploymentConfig(exact=True, num_clones=1, variable_update='replicated')
  with pytest.raises(ValueError, match=r"^variable_update='replicated' runs "
                     r'without parameter servers, got num_ps_tasks=1$'):
    model_deploy.DeploymentConfig(exact=True, num_clones=2, num_ps_tasks=1,
                                  variable_update='replicated')
  with pytest.raises(ValueError, match=r'^variable_update must be one of '
                     r"parameter_server, replicated, collective_all_reduce, "
                     r"got 'mirrored'$"):
    model_deploy.DeploymentConfig(exact=True, num_clones=2, variable_update='mirrored')


@pytest.mark.slow
def test_script_trains_replicated_and_eval_reads_the_checkpoint(digits_dir,
                                                                 tmp_path):
  """Long enough to see a leak: the process holds its threads and memory
  flat over the run (benchmarks/task_resources.py)."""
  train_dir = str(tmp_path / 'replicated')
  flags = [f for f in LENET_FLAGS if not f.startswith(('--batch_size',
                                                       '--optimizer'))]
  steps = 300
  trainer = launch.Task('trainer', [
      TRAIN, *flags, '--dataset_dir=' + digits_dir, '--train_dir=' + train_dir,
      '--train_image_size=16', '--batch_size=16', '--num_clones=2',
      '--clone_on_cpu', '--variable_update=replicated', '--optimizer=momentum',
      '--max_number_of_steps=%d' % steps, '--log_every_n_steps=10'], '',
                        out=open(os.devnull, 'w'), cwd=scripts.ROOT)
  sampler = task_resources.sample_while(
      lambda: {'trainer': trainer.process.pid},
      lambda: task_resources.last_step(STEP, trainer.output()))
  try:
    assert trainer.wait(300) == 0, trainer.output()[-3000:]
  finally:
    sampler.stop()
    trainer.stop()
  print(sampler.table())
  problems = sampler.problems(
      steps, names=['trainer'],
      max_rss_growth=task_resources.SHORT_RUN_RSS_GROWTH)
  assert not problems, '%s\n%s' % (problems, sampler.table())
  checkpoint = tf.train.latest_checkpoint(train_dir)
  assert est.global_step_of(checkpoint) == steps
  names = [name for name, _ in tf.train.list_variables(checkpoint)]
  assert 'LeNet/conv1/weights/Momentum' in names
  assert not [name for name in names if name.startswith('clone_')]
  evaluated = run(EVAL, '--model_name=lenet', '--dataset_name=digits',
                  '--dataset_split_name=validation',
                  '--dataset_dir=' + digits_dir, '--checkpoint_path=' +
                  train_dir, '--eval_dir=' + str(tmp_path / 'eval'))
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  assert 'Accuracy = ' in evaluated.stdout



@pytest.mark.parametrize('optimizer,clones', [
    ('Momentum', 2), ('Adam', 2), ('Adam', 3), ('RMSProp', 3)])
def test_replicate_model_fn_replicated_takes_the_parameter_server_step(
    optimizer, clones):
  """An unchanged single-device model_fn (optimizer.minimize over the
  trainable variables) through replicate_model_fn(variable_update=
  'replicated'): each tower differentiates by its copies, one all-reduce per
  variable and tower, the step and the saved variables are the
  parameter-server layout's."""
  import test_replicate as single  # pylint: disable=import-outside-toplevel
  from runner.replicate import replicate_model_fn  # pylint: disable=import-outside-toplevel
  x, y = single._data(12)  # pylint: disable=protected-access
  init = single._initial_values(x)  # pylint: disable=protected-access
  model_fn = single._model_fn_factory(single._minimize(  # pylint: disable=protected-access
      single.OPTIMIZERS[optimizer]))
  results = {}
  for update in ('parameter_server', 'replicated'):
    with tf.Graph().as_default() as graph:
      tf1.train.get_or_create_global_step()
      spec = replicate_model_fn(model_fn, num_clones=clones, clone_on_cpu=True,
                                variable_update=update)(
                                    {'x': tf.constant(x)}, tf.constant(y),
                                    est.ModeKeys.TRAIN, {})
      with tf1.Session(config=CPUS) as sess:
        sess.run(tf1.global_variables_initializer())
        single._load(sess, init)  # pylint: disable=protected-access
        sess.run(tf1.local_variables_initializer())  # copies: loaded values
        for _ in range(3):
          sess.run(spec.train_op)
        results[update] = values = _values(sess, tf1.global_variables())
        copies = _values(sess, [v for v in tf1.local_variables()
                                if v.op.name.startswith('clone_')])
    if update == 'replicated':
      reduces = [op for op in graph.get_operations()
                 if op.type == 'CollectiveReduceV2']
      assert len(reduces) == clones * len(
          graph.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES))
      slots = [n for n in values if n not in init and n != 'global_step' and
               '_power' not in n]
      # Every copy and every slot of a copy equals clone 0's.
      assert len(copies) == (clones - 1) * (len(init) + len(slots))
      for name, value in copies.items():
        np.testing.assert_allclose(value, values[name.split('/', 1)[1]],
                                   rtol=1e-6, atol=1e-7, err_msg=name)
    else:
      assert not copies
  assert results['replicated']['global_step'] == 3
  _assert_same(results['parameter_server'], results['replicated'])
  assert not np.allclose(init['logits/weights'],
                         results['replicated']['logits/weights'])
