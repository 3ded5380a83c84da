"""N clones take exactly the step one device takes on the whole batch, with
every optimizer, through model_deploy and through replicate_model_fn."""
import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from deployment import model_deploy
from runner import estimator as est
from runner.replicate import TowerOptimizer, replicate_model_fn

tf1 = tf.compat.v1
TWO_CPUS = tf1.ConfigProto(device_count={'CPU': 2}, allow_soft_placement=True)
STEPS = 3

# Every tf.compat.v1.train optimizer, as a user would configure it.
OPTIMIZERS = {
    'GradientDescent': lambda: tf1.train.GradientDescentOptimizer(0.5),
    'Momentum': lambda: tf1.train.MomentumOptimizer(0.1, 0.9),
    'MomentumNesterov': lambda: tf1.train.MomentumOptimizer(
        0.1, 0.9, use_nesterov=True),
    'Adam': lambda: tf1.train.AdamOptimizer(0.05),
    'Adagrad': lambda: tf1.train.AdagradOptimizer(0.3),
    'Adadelta': lambda: tf1.train.AdadeltaOptimizer(1.0),
    'RMSProp': lambda: tf1.train.RMSPropOptimizer(0.01, momentum=0.9),
    'RMSPropCentered': lambda: tf1.train.RMSPropOptimizer(
        0.01, momentum=0.9, centered=True),
    'Ftrl': lambda: tf1.train.FtrlOptimizer(0.3, l1_regularization_strength=0.01),
    'ProximalAdagrad': lambda: tf1.train.ProximalAdagradOptimizer(
        0.3, l2_regularization_strength=0.01),
    'ProximalGradientDescent': lambda: tf1.train.ProximalGradientDescentOptimizer(
        0.3, l1_regularization_strength=0.01),
}


def _data(batch, seed=1):
  rng = np.random.RandomState(seed)
  return (rng.randn(batch, 6).astype(np.float32),
          rng.randint(0, 3, size=batch).astype(np.int64))


def _net(x):
  """A small net without batch norm, with an auto-named and a named layer."""
  h = slim.fully_connected(x, 8, weights_regularizer=slim.l2_regularizer(0.01))
  return slim.fully_connected(h, 3, activation_fn=None, scope='logits')


def _initial_values(x):
  with tf.Graph().as_default():
    tf1.set_random_seed(3)
    _net(tf.constant(x))
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      return {v.op.name: sess.run(v) for v in tf1.global_variables()}


def _load(sess, values):
  """Loads `values`; a moving average starts at its variable's value."""
  for v in tf1.global_variables():
    name = v.op.name
    if name.endswith('/ExponentialMovingAverage'):
      name = name[:-len('/ExponentialMovingAverage')]
    if name in values:
      v.load(values[name], sess)


def _state(sess):
  """Every global variable: model variables, slots, optimizer state, step."""
  return {v.op.name: sess.run(v) for v in tf1.global_variables()}


def _assert_same(a, b, atol=1e-5):
  assert sorted(a) == sorted(b)
  for k in a:
    np.testing.assert_allclose(a[k], b[k], atol=atol, err_msg=k)
  return max(float(np.max(np.abs(np.asarray(a[k], np.float64) - b[k])))
             for k in a)


def _run(train_op, loss, init, steps=STEPS):
  with tf1.Session(config=TWO_CPUS) as sess:
    sess.run(tf1.global_variables_initializer())
    sess.run(tf1.local_variables_initializer())
    _load(sess, init)
    losses = [sess.run([train_op, loss])[1] for _ in range(steps)]
    return _state(sess), losses


# -- model_deploy -------------------------------------------------------------
def _deploy_run(num_clones, x, y, init, make_optimizer):
  with tf.Graph().as_default():
    config = model_deploy.DeploymentConfig(exact=True, num_clones=num_clones,
                                           clone_on_cpu=True)

    def clone_fn(images, labels):
      tf1.losses.sparse_softmax_cross_entropy(labels, _net(images))

    model = model_deploy.deploy(config, clone_fn,
                                [tf.constant(x), tf.constant(y)],
                                optimizer=make_optimizer())
    return _run(model.train_op, model.total_loss, init)


# -- replicate_model_fn -------------------------------------------------------
def _model_fn_factory(build_train_op, ema_decay=None):
  """A 1.x single-device model_fn, unchanged whatever the device count."""

  def model_fn(features, labels, mode, params):
    logits = _net(features['x'])
    predictions = {'classes': tf.argmax(logits, 1),
                   'probabilities': tf.nn.softmax(logits)}
    if mode == est.ModeKeys.PREDICT:
      return est.EstimatorSpec(mode, predictions=predictions)
    tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    loss = tf1.losses.get_total_loss()
    train_op = None
    if mode == est.ModeKeys.TRAIN:
      train_op = build_train_op(loss)
      if ema_decay:  # as the seed question's model_fn does
        ema = tf1.train.ExponentialMovingAverage(ema_decay)
        with tf.control_dependencies([train_op]):
          train_op = ema.apply(tf1.trainable_variables())
    metrics = {'accuracy': tf1.metrics.accuracy(labels,
                                                predictions['classes'])}
    return est.EstimatorSpec(mode, predictions=predictions, loss=loss,
                             train_op=train_op, eval_metric_ops=metrics)

  return model_fn


def _replicated_run(model_fn, num_clones, x, y, init, outer_scope=None):
  with tf.Graph().as_default():
    tf1.train.get_or_create_global_step()
    fn = (model_fn if num_clones is None else
          replicate_model_fn(model_fn, num_clones=num_clones, clone_on_cpu=True))
    if outer_scope:
      with tf1.name_scope(outer_scope):
        spec = fn({'x': tf.constant(x)}, tf.constant(y), est.ModeKeys.TRAIN, {})
    else:
      spec = fn({'x': tf.constant(x)}, tf.constant(y), est.ModeKeys.TRAIN, {})
    return _run(spec.train_op, spec.loss, init)


def _minimize(make_optimizer):
  return lambda loss: make_optimizer().minimize(
      loss, global_step=tf1.train.get_global_step())


@pytest.mark.parametrize('batch', [12, 7], ids=['even', 'uneven'])
@pytest.mark.parametrize('name', sorted(OPTIMIZERS))
def test_every_optimizer_on_2_and_3_clones_takes_the_one_device_steps(
    name, batch):
  """Variables and slots after 3 steps equal one device on the whole batch,
  through model_deploy.deploy and replicate_model_fn(minimize)."""
  x, y = _data(batch)
  init = _initial_values(x)
  make = OPTIMIZERS[name]
  one, one_losses = _deploy_run(1, x, y, init, make)
  model_fn = _model_fn_factory(_minimize(make))
  single, single_losses = _replicated_run(model_fn, None, x, y, init)
  slots = [k for k in one if k not in init and k != 'global_step']
  if name not in ('GradientDescent', 'ProximalGradientDescent'):
    assert slots, 'the optimizer made no slots'
  for clones in (2, 3):
    deployed, losses = _deploy_run(clones, x, y, init, make)
    _assert_same(one, deployed)
    np.testing.assert_allclose(losses, one_losses, atol=1e-5)
    replicated, losses = _replicated_run(model_fn, clones, x, y, init)
    _assert_same(single, replicated)
    np.testing.assert_allclose(losses, single_losses, atol=1e-5)
  assert one['global_step'] == single['global_step'] == STEPS
  assert not np.allclose(init['logits/weights'], one['logits/weights'])


class ClippedMomentum(tf1.train.MomentumOptimizer):
  """A user's optimizer class that overrides apply_gradients."""

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    clipped = [(tf.clip_by_value(g, -10.0, 10.0), v) for g, v in grads_and_vars]
    return super().apply_gradients(clipped, global_step, name)


TRAIN_OPS = {
    'create_train_op(Adam)': lambda loss: slim.learning.create_train_op(
        loss, tf1.train.AdamOptimizer(0.05)),
    'create_train_op(RMSProp)': lambda loss: slim.learning.create_train_op(
        loss, tf1.train.RMSPropOptimizer(0.01, momentum=0.9)),
    'optimize_loss(instance)': lambda loss: slim.optimize_loss(
        loss, tf1.train.get_global_step(), learning_rate=None,
        optimizer=tf1.train.AdamOptimizer(0.05)),
    'optimize_loss(callable)': lambda loss: slim.optimize_loss(
        loss, tf1.train.get_global_step(), learning_rate=0.1,
        optimizer=lambda lr: tf1.train.MomentumOptimizer(lr, momentum=0.5)),
    'TowerOptimizer(subclass)': lambda loss: TowerOptimizer(
        ClippedMomentum(0.1, 0.9)).minimize(
            loss, global_step=tf1.train.get_global_step()),
}
TRAIN_OPS.update({
    'optimize_loss(%s)' % opt: (
        lambda opt: lambda loss: slim.optimize_loss(
            loss, tf1.train.get_global_step(), learning_rate=0.05,
            optimizer=opt))(opt)
    for opt in ('Adagrad', 'Adam', 'Ftrl', 'Momentum', 'RMSProp', 'SGD')})


@pytest.mark.parametrize('batch', [12, 7], ids=['even', 'uneven'])
@pytest.mark.parametrize('how', sorted(TRAIN_OPS))
def test_unchanged_model_fn_on_n_devices_takes_the_single_device_steps(
    how, batch):
  x, y = _data(batch)
  init = _initial_values(x)
  model_fn = _model_fn_factory(TRAIN_OPS[how])
  one, losses1 = _replicated_run(model_fn, None, x, y, init)
  for clones in (2, 3):
    many, losses = _replicated_run(model_fn, clones, x, y, init)
    _assert_same(one, many)
    np.testing.assert_allclose(losses, losses1, atol=1e-5)
  assert one['global_step'] == STEPS


def test_moving_averages_built_in_the_model_fn_update_once_after_the_step():
  x, y = _data(10)
  init = _initial_values(x)
  model_fn = _model_fn_factory(_minimize(OPTIMIZERS['Momentum']),
                               ema_decay=0.5)
  one, _ = _replicated_run(model_fn, None, x, y, init)
  two, _ = _replicated_run(model_fn, 2, x, y, init)
  shadows = [k for k in one if k.endswith('/ExponentialMovingAverage')]
  assert len(shadows) == 4
  _assert_same(one, two)


def test_per_tower_gradient_clipping_differs_from_one_device_but_trains():
  """optimize_loss clips each tower's own gradients (documented)."""
  x, y = _data(16)
  init = _initial_values(x)
  clip = lambda loss: slim.optimize_loss(
      loss, tf1.train.get_global_step(), learning_rate=0.5, optimizer='SGD',
      clip_gradients=0.05)
  model_fn = _model_fn_factory(clip)
  with tf.Graph().as_default():
    tf1.train.get_or_create_global_step()
    spec = replicate_model_fn(model_fn, num_clones=2, clone_on_cpu=True)(
        {'x': tf.constant(x)}, tf.constant(y), est.ModeKeys.TRAIN, {})
    state, losses = _run(spec.train_op, spec.loss, init, steps=20)
  assert state['global_step'] == 20
  assert losses[-1] < losses[0] - 0.05


def test_outer_name_scope_and_replication_still_take_the_one_device_step():
  x, y = _data(8)
  init = _initial_values(x)
  model_fn = _model_fn_factory(_minimize(OPTIMIZERS['Adam']))
  one, losses1 = _replicated_run(model_fn, None, x, y, init, outer_scope='outer')
  two, losses2 = _replicated_run(model_fn, 2, x, y, init, outer_scope='outer')
  assert 'outer/beta1_power' in two
  _assert_same(one, two)
  np.testing.assert_allclose(losses1, losses2, atol=1e-5)


def test_uneven_batch_gives_remainder_to_last_clone():
  assert model_deploy.batch_split_sizes(7, 2) == [3, 4]
  assert model_deploy.batch_split_sizes(10, 4) == [2, 2, 2, 4]


def test_replicated_eval_and_predict_cover_every_tower_in_input_order(tmp_path):
  x, y = _data(9)
  model_fn = _model_fn_factory(_minimize(OPTIMIZERS['Adam']))
  config = est.RunConfig(session_config=TWO_CPUS, tf_random_seed=0,
                         log_step_count_steps=None)
  single = est.Estimator(model_fn, str(tmp_path), config=config)
  input_fn = lambda: ({'x': tf.constant(x)}, tf.constant(y))
  single.train(input_fn, steps=3)
  multi = est.Estimator(
      replicate_model_fn(model_fn, num_clones=2, clone_on_cpu=True),
      str(tmp_path), config=config)
  one_input = lambda: tf.data.Dataset.from_tensors(({'x': x}, y))
  want = single.evaluate(one_input)
  got = multi.evaluate(one_input)
  assert got['accuracy'] == pytest.approx(want['accuracy'])
  assert got['loss'] == pytest.approx(want['loss'], abs=1e-6)
  p1 = [p['classes'] for p in single.predict(one_input)]
  p2 = [p['classes'] for p in multi.predict(one_input)]
  assert len(p2) == 9 and p1 == p2
  # A batch smaller than the tower count evaluates too (empty towers).
  tiny = lambda: tf.data.Dataset.from_tensors(({'x': x[:1]}, y[:1]))
  assert est.Estimator(
      replicate_model_fn(model_fn, num_clones=3, clone_on_cpu=True),
      str(tmp_path), config=config).evaluate(tiny)['accuracy'] == pytest.approx(
          single.evaluate(tiny)['accuracy'])
