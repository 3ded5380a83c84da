"""Multi-device rules: placement, batch norm, scopes, sparse and partial
gradients (see deployment/model_deploy.py)."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras
import tf_slim as slim

from deployment import cluster
from deployment import model_deploy
from runner import estimator as est
from runner.replicate import replicate_model_fn

tf1 = tf.compat.v1
CPUS = tf1.ConfigProto(device_count={'CPU': 3}, allow_soft_placement=True)
COMPUTE = ('MatMul', 'BiasAdd', 'Relu', 'SparseSoftmaxCrossEntropyWithLogits')


def _data(batch, seed=2, dims=6):
  rng = np.random.RandomState(seed)
  return (rng.randn(batch, dims).astype(np.float32),
          rng.randint(0, 3, size=batch).astype(np.int64))


# -- placement ----------------------------------------------------------------
def _every_layer_library(x, labels):
  """slim, tf.compat.v1.layers, get_variable and a Keras legacy layer."""
  h = slim.fully_connected(x, 8, scope='slim_fc')
  h = tf1.layers.dense(h, 8, activation=tf.nn.relu, name='tf1_dense')
  h = tf_keras.layers.Dense(8, name='keras_dense')(h)
  logits = tf.matmul(h, tf1.get_variable('plain', [8, 3]))
  tf1.losses.sparse_softmax_cross_entropy(labels, logits)
  return logits


def _placement_model_fn(features, labels, mode):
  logits = _every_layer_library(features, labels)
  loss = tf1.losses.get_total_loss()
  train_op = tf1.train.AdamOptimizer(0.1).minimize(
      loss, tf1.train.get_global_step())
  ema = tf1.train.ExponentialMovingAverage(0.9)
  with tf.control_dependencies([train_op]):
    train_op = ema.apply(tf1.trainable_variables())
  metrics = {'acc': tf1.metrics.accuracy(labels, tf.argmax(logits, 1))}
  return est.EstimatorSpec(mode, loss=loss, train_op=train_op,
                           eval_metric_ops=metrics)


def _assert_placed(graph, num_gpus):
  variables = [op for op in graph.get_operations()
               if op.type in model_deploy.VARIABLE_OP_TYPES]
  names = {op.name for op in variables}
  # Variables of every kind, each once, under one device's names.
  for name in ('global_step', 'slim_fc/weights', 'tf1_dense/kernel',
               'keras_dense/kernel', 'plain', 'plain/Adam', 'plain/Adam_1',
               'beta1_power', 'plain/ExponentialMovingAverage',
               'accuracy/total', 'accuracy/count'):
    assert name in names, (name, sorted(names))
  assert not [n for n in names if n.startswith('clone_')]
  assert {op.device for op in variables} == {'/device:CPU:0'}
  for i in range(num_gpus):
    mine = [op for op in graph.get_operations()
            if op.name.startswith('clone_%d/' % i)]
    compute = [op for op in mine if op.type in COMPUTE]
    assert len(compute) >= 10, i  # forward and backward
    assert {op.device for op in compute} == {'/device:GPU:%d' % i}
    assert not [op.name for op in mine if 'GPU' in op.device and
                op.device != '/device:GPU:%d' % i]
  applies = [op for op in graph.get_operations()
             if op.type.startswith('ResourceApply')]
  assert len(applies) == 7  # once per trainable variable, not per tower
  assert {op.device for op in applies} == {'/device:CPU:0'}


@pytest.mark.parametrize('gpus', [2, 4])
def test_replicate_places_every_variable_on_the_cpu_and_towers_on_gpus(gpus):
  """Built for GPUs on a machine without any: only the graph is inspected."""
  with tf.Graph().as_default() as graph:
    with tf.device('/device:CPU:0'):  # as the Estimator does
      tf1.train.get_or_create_global_step()
    fn = replicate_model_fn(_placement_model_fn,
                            devices=['/device:GPU:%d' % i for i in range(gpus)])
    with tf.device('/device:CPU:0'):
      x, y = tf.zeros([8, 6]), tf.zeros([8], tf.int64)
    fn(x, y, est.ModeKeys.TRAIN)
    _assert_placed(graph, gpus)


@pytest.mark.parametrize('gpus', [2, 4])
def test_deploy_places_every_variable_on_the_cpu_and_clones_on_gpus(gpus):
  with tf.Graph().as_default() as graph:
    config = model_deploy.DeploymentConfig(exact=True, num_clones=gpus)

    def clone_fn(x, y):
      logits = _every_layer_library(x, y)
      tf1.metrics.accuracy(y, tf.argmax(logits, 1))

    model = model_deploy.deploy(config, clone_fn,
                                [tf.zeros([8, 6]), tf.zeros([8], tf.int64)],
                                optimizer=tf1.train.AdamOptimizer(0.1))
    with tf1.device(config.device_function()):
      ema = tf1.train.ExponentialMovingAverage(0.9)
      with tf.control_dependencies([model.train_op]):
        ema.apply(tf1.trainable_variables())
    _assert_placed(graph, gpus)


def test_variables_device_is_honoured_for_every_kind_of_variable():
  with tf.Graph().as_default() as graph:
    with tf.device('/device:CPU:0'):  # as the Estimator does
      tf1.train.get_or_create_global_step()
    fn = replicate_model_fn(_placement_model_fn, num_clones=2,
                            variables_device='/device:GPU:0')
    fn(tf.zeros([8, 6]), tf.zeros([8], tf.int64), est.ModeKeys.TRAIN)
    devices = {op.name: op.device for op in graph.get_operations()
               if op.type in model_deploy.VARIABLE_OP_TYPES}
    assert devices.pop('global_step') == '/device:CPU:0'
    assert set(devices.values()) == {'/device:GPU:0'}, devices


def test_deploy_honours_variables_device_for_every_kind_of_variable():
  with tf.Graph().as_default() as graph:
    config = model_deploy.DeploymentConfig(exact=True, num_clones=2,
                                           variables_device='/device:GPU:1')

    def clone_fn(x, y):
      logits = _every_layer_library(x, y)
      tf1.metrics.accuracy(y, tf.argmax(logits, 1))

    model_deploy.deploy(config, clone_fn,
                        [tf.zeros([8, 6]), tf.zeros([8], tf.int64)],
                        optimizer=tf1.train.AdamOptimizer(0.1),
                        moving_averages=tf1.train.ExponentialMovingAverage(0.9))
    devices = {op.name: op.device for op in graph.get_operations()
               if op.type in model_deploy.VARIABLE_OP_TYPES}
    for name in ('global_step', 'plain/Adam', 'accuracy/total',
                 'slim_fc/weights/ExponentialMovingAverage'):
      assert name in devices, name
    assert set(devices.values()) == {'/device:GPU:1'}, devices


def test_variables_device_holds_for_a_clusters_task():
  task = cluster.Cluster({'worker': ['127.0.0.1:2222', '127.0.0.1:2223'],
                          'ps': ['127.0.0.1:2224']}, 'worker', 1)
  config = model_deploy.DeploymentConfig(exact=True,
      num_clones=2, variables_device='/device:CPU:0').for_task(task)
  assert (config.num_ps_tasks, config.replica_id) == (1, 1)
  assert config.variables_device() == '/device:CPU:0'


def test_deploy_applies_moving_averages_once_after_the_step():
  x, y = _data(6)
  with tf.Graph().as_default():
    config = model_deploy.DeploymentConfig(exact=True, num_clones=2, clone_on_cpu=True)

    def clone_fn(x, y):
      logits = slim.fully_connected(x, 3, activation_fn=None, scope='fc')
      tf1.losses.sparse_softmax_cross_entropy(y, logits)

    ema = tf1.train.ExponentialMovingAverage(0.5)
    model = model_deploy.deploy(
        config, clone_fn, [tf.constant(x), tf.constant(y)],
        optimizer=tf1.train.GradientDescentOptimizer(1.0),
        moving_averages=ema)
    weights = slim.get_model_variables('fc')
    with tf1.Session(config=CPUS) as sess:
      sess.run(tf1.global_variables_initializer())
      before = sess.run(weights)
      loss = sess.run(model.train_op)  # the train op gives the total loss
      after, averages = sess.run([weights, [ema.average(w) for w in weights]])
  assert np.ndim(loss) == 0 and loss > 0
  for start, end, average in zip(before, after, averages):
    assert not np.allclose(start, end)
    np.testing.assert_allclose(average, 0.5 * start + 0.5 * end, rtol=1e-5)


def test_keras_layers_share_their_variables_across_devices_and_train_alike():
  x, y = _data(12)

  def model_fn(features, labels, mode):
    logits = tf_keras.layers.Dense(3)(tf_keras.layers.Dense(5)(features))
    loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf1.train.MomentumOptimizer(0.1, 0.9).minimize(
        loss, tf1.train.get_global_step())
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op)

  results = []
  for clones in (None, 3):
    with tf.Graph().as_default():
      tf1.set_random_seed(0)
      tf1.train.get_or_create_global_step()
      fn = model_fn if clones is None else replicate_model_fn(
          model_fn, num_clones=clones, clone_on_cpu=True)
      spec = fn(tf.constant(x), tf.constant(y), est.ModeKeys.TRAIN)
      variables = {v.op.name: v for v in tf1.global_variables()}
      with tf1.Session(config=CPUS) as sess:
        sess.run(tf1.global_variables_initializer())
        start = {n: sess.run(v) for n, v in variables.items()}
        for _ in range(3):
          sess.run(spec.train_op)
        results.append((start, {n: sess.run(v) for n, v in variables.items()}))
  (start1, end1), (start3, end3) = results
  assert sorted(end1) == sorted(end3)  # the one-device names, made once
  assert len([n for n in end3 if n.endswith('kernel')]) == 2
  # Random initial values differ between graphs: compare the updates.
  for name in end1:
    if 'Momentum' not in name and name != 'global_step':
      delta1, delta3 = end1[name] - start1[name], end3[name] - start3[name]
      assert np.abs(delta3).max() > 0, name
  assert end3['global_step'] == 3


# -- batch norm ---------------------------------------------------------------
DECAY = 0.9


def _bn_net(x, library):
  if library == 'slim':
    h = slim.fully_connected(
        x, 4, activation_fn=tf.nn.relu, biases_initializer=None,
        normalizer_fn=slim.batch_norm,
        normalizer_params={'decay': DECAY, 'is_training': True},
        scope='hidden')
  else:
    h = tf1.layers.dense(x, 4, use_bias=False, name='hidden')
    h = tf.nn.relu(tf1.layers.batch_normalization(
        h, momentum=DECAY, training=True, name='hidden_bn'))
  return slim.fully_connected(h, 3, activation_fn=None, scope='logits')


def _bn_init(x, library):
  with tf.Graph().as_default():
    tf1.set_random_seed(5)
    _bn_net(tf.constant(x), library)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      return {v.op.name: sess.run(v) for v in tf1.global_variables()}


def _load(sess, values):
  for v in tf1.global_variables():
    if v.op.name in values:
      v.load(values[v.op.name], sess)


def _bn_model_fn(library):
  def model_fn(features, labels, mode):
    logits = _bn_net(features, library)
    loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    with tf.control_dependencies(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)):
      train_op = tf1.train.GradientDescentOptimizer(0.5).minimize(
          loss, tf1.train.get_global_step())
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op)
  return model_fn


def _bn_step(library, path, num_clones, x, y, init):
  """One training step; returns every global variable afterwards and the
  number of update ops the UPDATE_OPS collection ends with."""
  with tf.Graph().as_default():
    step = tf1.train.get_or_create_global_step()
    if path == 'deploy':
      config = model_deploy.DeploymentConfig(exact=True, num_clones=num_clones,
                                             clone_on_cpu=num_clones > 1)
      clone_fn = lambda images, labels: tf1.losses.sparse_softmax_cross_entropy(
          labels, _bn_net(images, library))
      train_op = model_deploy.deploy(
          config, clone_fn, [tf.constant(x), tf.constant(y)],
          optimizer=tf1.train.GradientDescentOptimizer(0.5)).train_op
    else:
      fn = _bn_model_fn(library)
      if num_clones > 1:
        fn = replicate_model_fn(fn, num_clones=num_clones, clone_on_cpu=True)
      train_op = fn(tf.constant(x), tf.constant(y), est.ModeKeys.TRAIN).train_op
    updates = len(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS))
    with tf1.Session(config=CPUS) as sess:
      sess.run(tf1.global_variables_initializer())
      _load(sess, init)
      sess.run(train_op)
      assert sess.run(step) == 1
      return {v.op.name: sess.run(v) for v in tf1.global_variables()}, updates


def _moving(state, which):
  return [v for k, v in state.items() if k.endswith(which)][0]


@pytest.mark.parametrize('path', ['deploy', 'replicate'])
@pytest.mark.parametrize('library', ['slim', 'tf1_layers'])
@pytest.mark.parametrize('num_clones', [2, 3])
def test_batch_norm_moving_statistics_follow_the_first_clone_once(
    library, path, num_clones):
  batch = 7
  x, y = _data(batch)
  init = _bn_init(x, library)
  state, updates = _bn_step(library, path, num_clones, x, y, init)
  assert updates == 2  # one moving mean and one moving variance update
  # The rule, computed independently: the first clone's slice, one update.
  first = x[:model_deploy.batch_split_sizes(batch, num_clones)[0]]
  kernel = [v for k, v in init.items()
            if k.startswith('hidden') and k.endswith(('weights', 'kernel'))][0]
  pre = first @ kernel
  mean = pre.mean(axis=0)
  # slim's (fused) batch norm keeps the unbiased batch variance, Keras' the
  # biased one: the rule is whatever one device does, on the first slice.
  variance = pre.var(axis=0, ddof=1 if library == 'slim' else 0)
  np.testing.assert_allclose(_moving(state, 'moving_mean'),
                             (1 - DECAY) * mean, atol=1e-5)
  np.testing.assert_allclose(_moving(state, 'moving_variance'),
                             DECAY + (1 - DECAY) * variance, atol=1e-4)


@pytest.mark.parametrize('path', ['deploy', 'replicate'])
def test_batch_norm_gradients_are_the_share_weighted_one_device_gradients(path):
  """With batch norm, each clone normalises its own slice: the step is the
  share-weighted sum of one device's gradients on each slice."""
  batch, lr = 7, 0.5
  x, y = _data(batch)
  init = _bn_init(x, 'slim')
  sizes = model_deploy.batch_split_sizes(batch, 2)
  expected = {k: v.copy() for k, v in init.items()}
  start = 0
  for size in sizes:
    xs, ys = x[start:start + size], y[start:start + size]
    start += size
    with tf.Graph().as_default():
      loss = tf1.losses.sparse_softmax_cross_entropy(
          ys, _bn_net(tf.constant(xs), 'slim'))
      variables = tf1.trainable_variables()
      grads = tf.gradients(loss, variables)
      with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        _load(sess, init)
        for v, g in zip(variables, sess.run(grads)):
          expected[v.op.name] -= lr * (size / batch) * g
  state, _ = _bn_step('slim', path, 2, x, y, init)
  for name in (v for v in expected if 'moving' not in v):
    np.testing.assert_allclose(state[name], expected[name], atol=1e-5,
                               err_msg=name)


# -- scopes ---------------------------------------------------------------------
def _linear_clone_fn(x, y):
  logits = slim.fully_connected(x, 3, activation_fn=None, scope='logits')
  tf1.losses.sparse_softmax_cross_entropy(y, logits)


@pytest.mark.parametrize('outer', [None, 'outer'])
def test_twelve_clones_each_own_exactly_their_loss(outer):
  x, y = _data(24)
  with tf.Graph().as_default() as graph:
    tf1.set_random_seed(0)
    config = model_deploy.DeploymentConfig(exact=True, num_clones=12, clone_on_cpu=True)
    inputs = [tf.constant(x), tf.constant(y)]
    if outer:
      with tf1.name_scope(outer):
        model = model_deploy.deploy(config, _linear_clone_fn, inputs,
                                    optimizer=tf1.train.AdamOptimizer(0.1))
    else:
      model = model_deploy.deploy(config, _linear_clone_fn, inputs,
                                  optimizer=tf1.train.AdamOptimizer(0.1))
    prefix = outer + '/' if outer else ''
    for i, clone in enumerate(model.clones):
      assert clone.scope == prefix + 'clone_%d/' % i
      assert len(clone.losses) == 1
      assert clone.losses[0].op.name.startswith(clone.scope)
    summaries = tf1.Summary()
    with tf1.Session(config=CPUS) as sess:
      sess.run(tf1.global_variables_initializer())
      summaries.ParseFromString(sess.run(model.summary_op))
      total = sess.run(model.total_loss)
    tags = sorted(v.tag for v in summaries.value)
    assert tags == sorted(['losses/clone_%d' % i for i in range(12)] +
                          ['losses/total'])
    assert np.isfinite(total)


def test_twelve_replicated_towers_take_the_one_device_step():
  x, y = _data(24)

  def model_fn(features, labels, mode):
    _linear_clone_fn(features, labels)
    loss = tf1.losses.get_total_loss()
    train_op = tf1.train.AdamOptimizer(0.1).minimize(
        loss, tf1.train.get_global_step())
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op)

  results = []
  for clones in (None, 12):
    with tf.Graph().as_default():
      tf1.train.get_or_create_global_step()
      fn = model_fn if clones is None else replicate_model_fn(
          model_fn, num_clones=clones, clone_on_cpu=True)
      with tf1.name_scope('outer'):
        spec = fn(tf.constant(x), tf.constant(y), est.ModeKeys.TRAIN)
      with tf1.Session(config=CPUS) as sess:
        sess.run(tf1.global_variables_initializer())
        _load(sess, {'logits/weights': np.full([6, 3], 0.1, np.float32)})
        losses = [sess.run([spec.train_op, spec.loss])[1] for _ in range(2)]
        results.append((losses, {v.op.name: sess.run(v)
                                 for v in tf1.global_variables()}))
  (losses1, one), (losses12, twelve) = results
  np.testing.assert_allclose(losses1, losses12, atol=1e-5)
  assert sorted(one) == sorted(twelve)
  for name in one:
    np.testing.assert_allclose(one[name], twelve[name], atol=1e-5,
                               err_msg=name)


# -- sparse and partial gradients -------------------------------------------------
def _embedding_model_fn(features, labels, mode):
  table = tf1.get_variable('table', [10, 4])
  logits = slim.fully_connected(
      tf.reduce_mean(tf.nn.embedding_lookup(table, features), axis=1), 3,
      activation_fn=None, scope='logits')
  loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
  train_op = tf1.train.AdamOptimizer(0.1).minimize(
      loss, tf1.train.get_global_step())
  return est.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _run_replicated(model_fn, clones, features, labels, init, steps=2):
  with tf.Graph().as_default():
    tf1.train.get_or_create_global_step()
    fn = model_fn if clones is None else replicate_model_fn(
        model_fn, num_clones=clones, clone_on_cpu=True)
    spec = fn(tf.constant(features), tf.constant(labels), est.ModeKeys.TRAIN)
    with tf1.Session(config=CPUS) as sess:
      sess.run(tf1.global_variables_initializer())
      _load(sess, init)
      for _ in range(steps):
        sess.run(spec.train_op)
      return {v.op.name: sess.run(v) for v in tf1.global_variables()}


def test_embedding_lookups_give_indexed_slices_that_combine_exactly():
  rng = np.random.RandomState(0)
  ids = rng.randint(0, 10, size=(9, 3)).astype(np.int64)
  ids[:4] = np.minimum(ids[:4], 4)  # rows 5..9 only in the second tower
  ids[4:] = np.maximum(ids[4:], 2)
  labels = rng.randint(0, 3, size=9).astype(np.int64)
  init = {'table': rng.randn(10, 4).astype(np.float32),
          'logits/weights': rng.randn(4, 3).astype(np.float32)}
  one = _run_replicated(_embedding_model_fn, None, ids, labels, init)
  two = _run_replicated(_embedding_model_fn, 2, ids, labels, init)
  assert sorted(one) == sorted(two)
  for name in one:
    np.testing.assert_allclose(one[name], two[name], atol=1e-5, err_msg=name)
  assert not np.allclose(one['table'], init['table'])


def test_a_variable_used_by_some_towers_only_gets_their_weighted_gradient():
  x, y = _data(8)
  towers = []

  def model_fn(features, labels, mode):
    towers.append(len(towers))
    logits = slim.fully_connected(features, 3, activation_fn=None,
                                  scope='logits')
    extra = tf1.get_variable('extra', [3], initializer=tf1.zeros_initializer())
    if towers[-1] == 0:  # only the first tower uses it
      logits += extra
    loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf1.train.GradientDescentOptimizer(1.0).minimize(
        loss, tf1.train.get_global_step())
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op)

  init = {'logits/weights': np.full([6, 3], 0.05, np.float32)}
  two = _run_replicated(model_fn, 2, x, y, init, steps=1)
  # Expected: the first tower's gradient on its slice, times its share 4/8.
  with tf.Graph().as_default():
    logits = tf.constant(x[:4]) @ tf.constant(init['logits/weights'])
    extra = tf.Variable(tf.zeros([3]))
    loss = tf1.losses.sparse_softmax_cross_entropy(y[:4], logits + extra)
    grad = tf.gradients(loss, extra)[0]
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      expected = -1.0 * 0.5 * sess.run(grad)
  np.testing.assert_allclose(two['extra'], expected, atol=1e-6)
  assert np.abs(expected).max() > 1e-3
