"""N clones take exactly the step one device takes on the whole batch."""
import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from deployment import estimator as est
from deployment import model_deploy
from deployment.replicate import TowerOptimizer, replicate_model_fn

tf1 = tf.compat.v1
TWO_CPUS = tf1.ConfigProto(device_count={'CPU': 2}, allow_soft_placement=True)


def _data(batch):
  rng = np.random.RandomState(1)
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
  for v in tf1.global_variables():
    if v.op.name in values:
      v.load(values[v.op.name], sess)


def _values(sess):
  return {v.op.name: sess.run(v) for v in tf1.trainable_variables()}


def _assert_same(a, b):
  assert sorted(a) == sorted(b)
  for k in a:
    np.testing.assert_allclose(a[k], b[k], atol=1e-5, err_msg=k)


def _deploy_step(num_clones, x, y, init):
  with tf.Graph().as_default():
    config = model_deploy.DeploymentConfig(num_clones=num_clones,
                                           clone_on_cpu=True)

    def clone_fn(images, labels):
      tf1.losses.sparse_softmax_cross_entropy(labels, _net(images))

    model = model_deploy.deploy(config, clone_fn, [tf.constant(x),
                                                   tf.constant(y)],
                                optimizer=tf1.train.GradientDescentOptimizer(0.5))
    with tf1.Session(config=TWO_CPUS) as sess:
      sess.run(tf1.global_variables_initializer())
      _load(sess, init)
      loss = sess.run(model.train_op)
      devices = sorted({c.device for c in model.clones})
      return _values(sess), loss, devices


@pytest.mark.parametrize('batch', [8, 7])
def test_two_deployed_clones_equal_one_clone_on_whole_batch(batch):
  x, y = _data(batch)
  init = _initial_values(x)
  one, loss1, _ = _deploy_step(1, x, y, init)
  two, loss2, devices = _deploy_step(2, x, y, init)
  assert devices == ['/device:CPU:0', '/device:CPU:1']
  _assert_same(one, two)
  assert loss1 == pytest.approx(loss2, abs=1e-6)
  assert not np.allclose(init['logits/weights'], one['logits/weights'])


def test_uneven_batch_gives_remainder_to_last_clone():
  assert model_deploy.batch_split_sizes(7, 2) == [3, 4]
  assert model_deploy.batch_split_sizes(10, 4) == [2, 2, 2, 4]


def _model_fn_factory(build_train_op):
  """A 1.x single-device model_fn, unchanged whatever the device count."""

  def model_fn(features, labels, mode, params):
    logits = _net(features['x'])
    predictions = {'classes': tf.argmax(logits, 1),
                   'probabilities': tf.nn.softmax(logits)}
    if mode == est.ModeKeys.PREDICT:
      return est.EstimatorSpec(mode, predictions=predictions)
    tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    loss = tf1.losses.get_total_loss()
    train_op = build_train_op(loss) if mode == est.ModeKeys.TRAIN else None
    metrics = {'accuracy': tf1.metrics.accuracy(labels,
                                                predictions['classes'])}
    return est.EstimatorSpec(mode, predictions=predictions, loss=loss,
                             train_op=train_op, eval_metric_ops=metrics)

  return model_fn


TRAIN_OPS = {
    'optimize_loss': lambda loss: slim.optimize_loss(
        loss, tf1.train.get_global_step(), learning_rate=0.5, optimizer='SGD'),
    'create_train_op': lambda loss: slim.learning.create_train_op(
        loss, tf1.train.GradientDescentOptimizer(0.5)),
    'minimize': lambda loss: tf1.train.GradientDescentOptimizer(0.5).minimize(
        loss, global_step=tf1.train.get_global_step()),
    'tower_optimizer': lambda loss: TowerOptimizer(
        tf1.train.GradientDescentOptimizer(0.5)).minimize(
            loss, global_step=tf1.train.get_global_step()),
}


def _replicated_step(model_fn, num_clones, x, y, init):
  with tf.Graph().as_default():
    step = tf1.train.get_or_create_global_step()
    fn = (model_fn if num_clones is None else
          replicate_model_fn(model_fn, num_clones=num_clones, clone_on_cpu=True))
    spec = fn({'x': tf.constant(x)}, tf.constant(y), est.ModeKeys.TRAIN, {})
    with tf1.Session(config=TWO_CPUS) as sess:
      sess.run(tf1.global_variables_initializer())
      _load(sess, init)
      loss = sess.run(spec.loss)
      sess.run(spec.train_op)
      return _values(sess), loss, sess.run(step)


@pytest.mark.parametrize('batch', [8, 7])
@pytest.mark.parametrize('how', sorted(TRAIN_OPS))
def test_unchanged_model_fn_on_two_devices_takes_the_single_device_step(
    how, batch):
  x, y = _data(batch)
  init = _initial_values(x)
  model_fn = _model_fn_factory(TRAIN_OPS[how])
  one, loss1, step1 = _replicated_step(model_fn, None, x, y, init)
  two, loss2, step2 = _replicated_step(model_fn, 2, x, y, init)
  _assert_same(one, two)
  assert loss1 == pytest.approx(loss2, abs=1e-6)
  assert step1 == step2 == 1


def test_replicated_eval_and_predict_cover_every_tower_in_input_order(tmp_path):
  x, y = _data(9)
  model_fn = _model_fn_factory(TRAIN_OPS['minimize'])
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
