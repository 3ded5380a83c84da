"""model_deploy called the way TF-Slim calls it does what TF-Slim's does.

The cases are those of TF-Slim's own research/slim/deployment/
model_deploy_test.py (device strings, clone scopes, round-robin parameter
servers, every clone's update ops, clone losses divided by num_clones,
summaries on the CPU), written here as the project's own tests and run with
TensorFlow 2's resource variables and with TensorFlow 1's reference
variables. The project's exact semantics (`exact=True`) are tested in
test_multi_device.py and test_replicate.py; the contrast is at the end.
"""
import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from deployment import model_deploy

tf1 = tf.compat.v1
CPU0 = '/device:CPU:0'


@pytest.fixture(params=['resource', 'reference'])
def variables(request):
  """Which kind of variable tf.compat.v1 makes: TF 2's resource variables
  or TF 1's reference variables (TF-Slim's), restored afterwards."""
  was_resource = tf1.resource_variables_enabled()
  if request.param == 'reference':
    tf1.disable_resource_variables()
  try:
    yield request.param
  finally:
    if was_resource:
      tf1.enable_resource_variables()
    else:
      tf1.disable_resource_variables()


def canonical(device):
  return tf.DeviceSpec.from_string(device or '').to_string()


def assert_device(actual, expected):
  assert canonical(actual) == canonical(expected), (actual, expected)


def data():
  """16 one-hot rows whose hot column encodes a random binary label."""
  rng = np.random.RandomState(0)
  labels = rng.randint(0, 2, size=(16, 1)).astype(np.float32)
  inputs = np.zeros((16, 4), np.float32)
  for i in range(16):
    inputs[i, int(2 * labels[i, 0] + rng.randint(0, 2))] = 1
  return tf.constant(inputs), tf.constant(labels)


def logistic(inputs, labels):
  with tf1.variable_scope(None, 'LogisticClassifier', [inputs, labels]):
    predictions = slim.fully_connected(inputs, 1, activation_fn=tf.sigmoid,
                                       scope='fully_connected')
    slim.losses.log_loss(predictions, labels)
    return predictions


def batch_norm_classifier(inputs, labels):
  with tf1.variable_scope(None, 'BatchNormClassifier', [inputs, labels]):
    inputs = slim.batch_norm(inputs, decay=0.1, fused=True)
    predictions = slim.fully_connected(inputs, 1, activation_fn=tf.sigmoid,
                                       scope='fully_connected')
    slim.losses.log_loss(predictions, labels)
    return predictions


# --- DeploymentConfig: TF-Slim's device strings -------------------------------

@pytest.mark.parametrize('kwargs,clones,scopes,cpu', [
    ({}, ['GPU:0'], [''], CPU0),
    ({'clone_on_cpu': True}, ['CPU:0'], [''], CPU0),
    ({'num_clones': 2}, ['GPU:0', 'GPU:1'], ['clone_0', 'clone_1'], CPU0),
    ({'num_clones': 3, 'clone_on_cpu': True}, ['CPU:0'] * 3,
     ['clone_0', 'clone_1', 'clone_2'], CPU0),
    ({'num_ps_tasks': 1}, ['/job:worker/device:GPU:0'], [''],
     '/job:worker/device:CPU:0'),
    ({'num_clones': 2, 'num_ps_tasks': 1},
     ['/job:worker/device:GPU:0', '/job:worker/device:GPU:1'],
     ['clone_0', 'clone_1'], '/job:worker/device:CPU:0'),
    ({'num_replicas': 2, 'num_ps_tasks': 2}, ['/job:worker/device:GPU:0'],
     [''], '/job:worker/device:CPU:0'),
    ({'num_replicas': 2, 'num_clones': 2, 'num_ps_tasks': 2},
     ['/job:worker/device:GPU:0', '/job:worker/device:GPU:1'],
     ['clone_0', 'clone_1'], '/job:worker/device:CPU:0'),
])
def test_device_strings_and_scopes_are_tf_slims(kwargs, clones, scopes, cpu):
  config = model_deploy.DeploymentConfig(**kwargs)
  for i, (device, scope) in enumerate(zip(clones, scopes)):
    assert_device(config.clone_device(i), device)
    assert config.clone_scope(i) == scope
  assert_device(config.optimizer_device(), cpu)
  assert_device(config.inputs_device(), cpu)
  if not kwargs.get('num_ps_tasks'):
    assert config.caching_device() is None
    assert_device(config.variables_device(), CPU0)
  else:
    with tf.Graph().as_default():
      assert config.caching_device()(tf.no_op()) == ''
  with pytest.raises(ValueError, match='clone_index'):
    config.clone_device(len(clones))


@pytest.mark.parametrize('num_ps_tasks,tasks', [(1, [0, 0, 0]), (2, [0, 1, 0])])
def test_variables_go_round_robin_over_the_ps_tasks(variables, num_ps_tasks,
                                                     tasks):
  config = model_deploy.DeploymentConfig(num_ps_tasks=num_ps_tasks)
  with tf.Graph().as_default():
    with tf1.device(config.variables_device()):
      a = tf1.Variable(0)
      b = tf1.Variable(0)
      c = tf.no_op()
      d = slim.variable('a', [], caching_device=config.caching_device())
    for variable, task in zip((a, b, d), tasks):
      assert_device(variable.device, '/job:ps/task:%d/device:CPU:0' % task)
    assert c.device == ''
    assert d.value().device == ''  # cached where it is read: the worker
    if variables == 'reference':  # TF 1: a variable is read where it lives
      assert_device(a.value().device, a.device)
      assert_device(b.value().device, b.device)


# --- create_clones --------------------------------------------------------------

def test_one_clone_keeps_the_names_and_puts_variables_on_the_cpu(variables):
  with tf.Graph().as_default():
    config = model_deploy.DeploymentConfig(num_clones=1)
    clones = model_deploy.create_clones(config, logistic, data())
    clone = clones[0]
    assert len(slim.get_variables()) == 2
    for v in slim.get_variables():
      assert_device(v.device, CPU0)
      assert_device(v.value().device, CPU0)
    assert clone.outputs.op.name == 'LogisticClassifier/fully_connected/Sigmoid'
    assert (clone.scope, len(clone)) == ('', 3)
    assert_device(clone.device, 'GPU:0')
    assert len(slim.losses.get_losses()) == 1
    assert tf1.get_collection(tf1.GraphKeys.UPDATE_OPS) == []


def test_every_clone_gets_the_same_arguments_and_keeps_its_update_ops(variables):
  with tf.Graph().as_default():
    inputs, labels = data()
    seen = []

    def model_fn(images, targets):
      seen.append((images, targets))
      return batch_norm_classifier(images, targets)

    config = model_deploy.DeploymentConfig(num_clones=4)
    clones = model_deploy.create_clones(config, model_fn, [inputs, labels])
    assert seen == [(inputs, labels)] * 4  # not split: TF-Slim's clones
    assert len(slim.get_variables()) == 5
    for v in slim.get_variables():
      assert_device(v.device, CPU0)
      assert_device(v.value().device, CPU0)
    assert len(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)) == 8
    for i, clone in enumerate(clones):
      assert clone.outputs.op.name == (
          'clone_%d/BatchNormClassifier/fully_connected/Sigmoid' % i)
      assert clone.scope == 'clone_%d/' % i
      assert len(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS, clone.scope)) == 2
      assert_device(clone.device, 'GPU:%d' % i)
      assert clone.weight == 0.25


@pytest.mark.parametrize('num_clones,num_ps_tasks', [(1, 1), (2, 2)])
def test_clones_with_parameter_servers(variables, num_clones, num_ps_tasks):
  with tf.Graph().as_default():
    config = model_deploy.DeploymentConfig(num_clones=num_clones,
                                           num_ps_tasks=num_ps_tasks)
    clones = model_deploy.create_clones(config, batch_norm_classifier, data())
    assert len(slim.get_variables()) == 5
    for i, v in enumerate(slim.get_variables()):
      assert_device(v.device, '/job:ps/task:%d/device:CPU:0' % (i % num_ps_tasks))
      assert_device(v.value().device, v.device)
    for i, clone in enumerate(clones):
      prefix = 'clone_%d/' % i if num_clones > 1 else ''
      assert clone.scope == prefix
      assert clone.outputs.op.name == (
          prefix + 'BatchNormClassifier/fully_connected/Sigmoid')
      assert_device(clone.device, '/job:worker/device:GPU:%d' % i)


# --- optimize_clones --------------------------------------------------------------

@pytest.mark.parametrize('kwargs,model_fn,updates,gradient_device,variable_device', [
    ({}, logistic, 0, 'GPU:0', CPU0),
    ({}, batch_norm_classifier, 2, 'GPU:0', CPU0),
    ({'num_clones': 4}, batch_norm_classifier, 8, '', CPU0),
    ({'num_clones': 4, 'clone_on_cpu': True}, batch_norm_classifier, 8, '', CPU0),
    ({'num_ps_tasks': 1}, batch_norm_classifier, 2, '/job:worker/device:GPU:0',
     '/job:ps/task:0/device:CPU:0'),
])
def test_optimize_clones_sums_the_clones_gradients_where_tf_slim_does(
    variables, kwargs, model_fn, updates, gradient_device, variable_device):
  with tf.Graph().as_default():
    config = model_deploy.DeploymentConfig(**kwargs)
    clones = model_deploy.create_clones(config, model_fn, data())
    assert len(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)) == updates
    total_loss, grads_and_vars = model_deploy.optimize_clones(
        clones, tf1.train.GradientDescentOptimizer(1.0))
    assert len(grads_and_vars) == len(tf1.trainable_variables())
    assert total_loss.op.name == 'total_loss'
    for grad, var in grads_and_vars:
      assert_device(grad.device, gradient_device)
      assert_device(var.device, variable_device)


def test_clone_losses_are_divided_by_num_clones():
  """TF-Slim's clones each take a batch of their own and the step is their
  average: two clones fed the same batch report one clone's loss and apply
  one clone's gradient (a sum of the two would double the step: the
  divergence TF-Slim's own script hit before)."""
  results = []
  for num_clones in (1, 2):
    with tf.Graph().as_default():
      tf1.set_random_seed(0)
      config = model_deploy.DeploymentConfig(num_clones=num_clones,
                                             clone_on_cpu=True)
      batch = data()  # as a queue's dequeue: no tensor among the arguments
      clones = model_deploy.create_clones(config, lambda: logistic(*batch))
      total_loss, grads_and_vars = model_deploy.optimize_clones(
          clones, tf1.train.GradientDescentOptimizer(1.0))
      with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        sess.run([v.assign(tf.ones_like(v) * 0.1) for v in slim.get_variables()])
        results.append(sess.run([total_loss] + [g for g, _ in grads_and_vars]))
  for one, two in zip(*results):
    np.testing.assert_allclose(one, two, rtol=1e-6)


# --- deploy --------------------------------------------------------------------

def test_deploy_trains_with_every_clone_on_cpu0_and_the_first_clones_updates(
    variables):
  with tf.Graph().as_default():
    tf1.set_random_seed(0)
    config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
    model = model_deploy.deploy(config, batch_norm_classifier, data(),
                                optimizer=tf1.train.GradientDescentOptimizer(1.0))
    assert len(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)) == 4
    assert len(model.clones) == 2
    assert model.total_loss.op.name == 'total_loss'
    assert model.summary_op.op.name == 'summary_op/summary_op'
    assert model.train_op.op.name == 'train_op'
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      mean = slim.get_variables_by_name('moving_mean')[0]
      variance = slim.get_variables_by_name('moving_variance')[0]
      initial_loss = sess.run(model.total_loss)
      np.testing.assert_allclose(sess.run(mean), [0.0] * 4)
      np.testing.assert_allclose(sess.run(variance), [1.0] * 4)
      for _ in range(10):
        sess.run(model.train_op)
      assert sess.run(model.total_loss) < initial_loss / 5.0
      # decay 0.1, 10 steps: the moving statistics are the batch's.
      np.testing.assert_allclose(sess.run(mean), [0.125, 0.25, 0.375, 0.25],
                                 rtol=1e-5, atol=1e-6)
      np.testing.assert_allclose(
          sess.run(variance),
          np.array([0.109375, 0.1875, 0.234375, 0.1875]) * 16 / 15,
          rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('training', [True, False])
def test_summaries_are_built_on_the_cpu_never_a_clones_gpu(training):
  with tf.Graph().as_default():
    config = model_deploy.DeploymentConfig(num_clones=2)

    def model_fn():
      inputs = tf.constant(1.0, shape=(10, 20), dtype=tf.float32)
      slim.fully_connected(inputs, 30,
                           weights_regularizer=slim.l2_regularizer(0.001))

    optimizer = tf1.train.GradientDescentOptimizer(1.0) if training else None
    model = model_deploy.deploy(config, model_fn, optimizer=optimizer)
    assert model.summary_op.op.inputs
    for summary in model.summary_op.op.inputs:
      assert summary.device == CPU0


# --- the same mechanism, exact -------------------------------------------------

def test_exact_splits_the_batch_and_places_cpu_clones_on_their_own_devices():
  with tf.Graph().as_default():
    config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True,
                                           exact=True)
    seen = []

    def model_fn(images, targets):
      seen.append(images.shape[0])
      return logistic(images, targets)

    clones = model_deploy.create_clones(config, model_fn, data())
    assert seen == [8, 8]  # halves of the 16 rows
    assert [clone.device for clone in clones] == ['/device:CPU:0',
                                                  '/device:CPU:1']
    assert [clone.scope for clone in clones] == ['clone_0/', 'clone_1/']
    with tf1.Session(config=tf1.ConfigProto(device_count={'CPU': 2})) as sess:
      assert sess.run([c.weight for c in clones]) == [0.5, 0.5]
      sizes = sess.run([tf.shape(c.outputs)[0] for c in clones])
    assert sizes == [8, 8]


def test_replicated_layouts_are_exact_by_construction():
  config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True,
                                         variable_update='replicated')
  assert config.exact
  with pytest.raises(ValueError, match='exact by construction'):
    model_deploy.DeploymentConfig(num_clones=2, variable_update='replicated',
                                  exact=False)


@pytest.mark.parametrize('optimizer', ['momentum', 'adam'])
def test_clones_fed_one_batch_take_one_clones_steps_with_slot_optimizers(
    variables, optimizer):
  """Three clones of a batch-norm model, each fed the same batch (as clones
  dequeuing equal batches would be), trained through `deploy` with a slot
  optimizer for 3 steps, end with one clone's weights, slots and moving
  statistics: the clones' average is one clone's step."""
  make = {'momentum': lambda: tf1.train.MomentumOptimizer(0.1, 0.9),
          'adam': lambda: tf1.train.AdamOptimizer(0.05)}[optimizer]
  results = []
  for num_clones in (1, 3):
    with tf.Graph().as_default():
      tf1.set_random_seed(0)
      config = model_deploy.DeploymentConfig(num_clones=num_clones,
                                             clone_on_cpu=True)
      batch = data()
      model = model_deploy.deploy(
          config, lambda: batch_norm_classifier(*batch), optimizer=make())
      with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        for _ in range(3):
          sess.run(model.train_op)
        names = sorted(v.op.name for v in tf1.global_variables())
        values = dict(zip(names, sess.run(
            [v for v in sorted(tf1.global_variables(),
                               key=lambda v: v.op.name)])))
        results.append(values)
  one, three = results
  assert sorted(one) == sorted(three)  # no per-clone slots or statistics
  assert any('/Momentum' in n or '/Adam' in n for n in one)
  for name in one:
    np.testing.assert_allclose(one[name], three[name], rtol=1e-5, atol=1e-6,
                               err_msg=name)
