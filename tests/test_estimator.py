"""A 1.x-style model_fn through the Estimator-compatible runner."""
import os

import numpy as np
import pytest
import tensorflow as tf

from runner import estimator as tf_estimator  # the only changed import

tf1 = tf.compat.v1


def model_fn(features, labels, mode, params):
  """Written for tf.estimator 1.x: a linear classifier with Adam."""
  logits = tf1.layers.dense(features['x'], params['n_classes'])
  predictions = {'classes': tf.argmax(logits, axis=1),
                 'probabilities': tf.nn.softmax(logits)}
  if mode == tf_estimator.ModeKeys.PREDICT:
    return tf_estimator.EstimatorSpec(
        mode, predictions=predictions,
        export_outputs={'serving_default':
                        tf_estimator.export.PredictOutput(predictions)})
  loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
  if mode == tf_estimator.ModeKeys.EVAL:
    return tf_estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
        'accuracy': tf1.metrics.accuracy(labels, predictions['classes'])})
  train_op = tf1.train.AdamOptimizer(0.1).minimize(
      loss, global_step=tf1.train.get_global_step())
  return tf_estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _data():
  rng = np.random.RandomState(0)
  x = rng.randn(200, 4).astype(np.float32)
  y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
  return x, y


def _input_fn(x, y, epochs=None, shuffle=True):
  def input_fn():
    ds = tf.data.Dataset.from_tensor_slices(({'x': x}, y))
    if shuffle:
      ds = ds.shuffle(200, seed=0)
    return ds.repeat(epochs).batch(20)
  return input_fn


@pytest.fixture
def trained(tmp_path):
  x, y = _data()
  config = tf_estimator.RunConfig(tf_random_seed=0, save_checkpoints_steps=50,
                                  log_step_count_steps=None)
  estimator = tf_estimator.Estimator(model_fn, str(tmp_path / 'model'),
                                     config=config, params={'n_classes': 2})
  estimator.train(_input_fn(x, y), steps=60)
  return estimator, x, y


def test_train_saves_checkpoints_and_resumes(trained):
  estimator, x, y = trained
  assert tf_estimator.global_step_of(estimator.latest_checkpoint()) == 60
  estimator.train(_input_fn(x, y), steps=15)
  assert tf_estimator.global_step_of(estimator.latest_checkpoint()) == 75
  estimator.train(_input_fn(x, y), max_steps=50)  # already past: no-op
  assert tf_estimator.global_step_of(estimator.latest_checkpoint()) == 75


def test_evaluate_learns_and_writes_summaries(trained):
  estimator, x, y = trained
  metrics = estimator.evaluate(_input_fn(x, y, epochs=1, shuffle=False))
  assert metrics['global_step'] == 60
  assert metrics['accuracy'] > 0.95
  assert set(metrics) == {'accuracy', 'loss', 'global_step'}
  events = os.listdir(os.path.join(estimator.model_dir, 'eval'))
  assert any(e.startswith('events.out') for e in events)
  two = estimator.evaluate(_input_fn(x, y, epochs=1, shuffle=False), steps=2)
  assert two['accuracy'] != pytest.approx(0)


def test_predict_and_exported_saved_model_agree(trained, tmp_path):
  estimator, x, y = trained
  predict_in = lambda: tf.data.Dataset.from_tensor_slices({'x': x[:7]}).batch(3)
  predicted = list(estimator.predict(predict_in))
  assert len(predicted) == 7
  probabilities = np.stack([p['probabilities'] for p in predicted])
  classes = [p['classes'] for p in predicted]
  only = list(estimator.predict(predict_in, predict_keys=['classes']))
  assert [sorted(p) for p in only] == [['classes']] * 7

  receiver = tf_estimator.export.build_raw_serving_input_receiver_fn(
      {'x': tf.zeros([1, 4])})
  export_dir = estimator.export_saved_model(str(tmp_path / 'export'), receiver)
  assert os.path.isdir(export_dir)
  assert not [d for d in os.listdir(tmp_path / 'export') if d.startswith('.')]
  with tf.Graph().as_default(), tf1.Session() as sess:
    meta = tf1.saved_model.loader.load(sess, ['serve'], export_dir)
    signature = meta.signature_def['serving_default']
    feed = {signature.inputs['x'].name: x[:7]}
    out = sess.run({k: v.name for k, v in signature.outputs.items()}, feed)
  np.testing.assert_allclose(out['probabilities'], probabilities, rtol=1e-6)
  assert list(out['classes']) == classes


def test_variable_values_and_names(trained):
  estimator, _, _ = trained
  names = estimator.get_variable_names()
  assert 'dense/kernel' in names and 'global_step' in names
  assert estimator.get_variable_value('dense/kernel').shape == (4, 2)


def test_train_and_evaluate_alternates_until_max_steps(tmp_path):
  x, y = _data()
  config = tf_estimator.RunConfig(tf_random_seed=0, save_checkpoints_steps=20,
                                  log_step_count_steps=None)
  estimator = tf_estimator.Estimator(model_fn, str(tmp_path), config=config,
                                     params={'n_classes': 2})
  result = tf_estimator.train_and_evaluate(
      estimator, tf_estimator.TrainSpec(_input_fn(x, y), max_steps=40),
      tf_estimator.EvalSpec(_input_fn(x, y, epochs=1, shuffle=False),
                            steps=None))
  assert result['global_step'] == 40
  assert result['accuracy'] > 0.9


def test_evaluate_without_checkpoint_names_the_model_dir(tmp_path):
  estimator = tf_estimator.Estimator(model_fn, str(tmp_path),
                                     params={'n_classes': 2})
  with pytest.raises(ValueError, match='no checkpoint in model_dir'):
    estimator.evaluate(_input_fn(*_data(), epochs=1))


def test_model_dir_that_is_a_file_is_refused(tmp_path):
  path = tmp_path / 'file'
  path.write_text('keep me')
  with pytest.raises(ValueError, match="model_dir '.*file' is a file"):
    tf_estimator.Estimator(model_fn, str(path))
  assert path.read_text() == 'keep me'


def test_run_config_reads_the_cluster_from_tf_config(monkeypatch):
  monkeypatch.setenv('TF_CONFIG', '{"cluster": {"chief": ["h0:1"], "worker": '
                     '["h1:1", "h2:1"], "ps": ["h3:1"]}, "task": {"type": '
                     '"worker", "index": 1}}')
  config = tf_estimator.RunConfig()
  assert (config.task_type, config.task_id) == ('worker', 1)
  assert not config.is_chief
  assert config.num_ps_replicas == 1 and config.num_worker_replicas == 3
  assert config.master == 'grpc://h2:1'


def test_exported_saved_model_initialises_local_variables_and_tables(
    trained, tmp_path):
  """A serving graph with a table (class names) and a local variable (a
  running count, as streaming metrics keep) works after a plain load."""
  estimator, x, _ = trained

  def serving_model_fn(features, labels, mode, params):
    logits = tf1.layers.dense(features['x'], params['n_classes'])
    classes = tf.argmax(logits, axis=1)
    names = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant([0, 1], tf.int64), tf.constant(['neg', 'pos'])), '?')
    seen = tf1.get_local_variable('seen', [], tf.int64,
                                  initializer=tf1.zeros_initializer())
    counted = tf1.assign_add(seen, tf.shape(classes, out_type=tf.int64)[0])
    predictions = {'names': names.lookup(classes), 'seen': counted + 0}
    return tf_estimator.EstimatorSpec(
        mode, predictions=predictions,
        export_outputs={'serving_default':
                        tf_estimator.export.PredictOutput(predictions)})

  exporter = tf_estimator.Estimator(serving_model_fn, estimator.model_dir,
                                    params=estimator.params)
  receiver = tf_estimator.export.build_raw_serving_input_receiver_fn(
      {'x': tf.zeros([1, 4])})
  export_dir = exporter.export_saved_model(str(tmp_path / 'export'), receiver)
  classes = [p['classes'] for p in estimator.predict(
      lambda: tf.data.Dataset.from_tensor_slices({'x': x[:5]}).batch(5))]
  with tf.Graph().as_default(), tf1.Session() as sess:
    meta = tf1.saved_model.loader.load(sess, ['serve'], export_dir)
    signature = meta.signature_def['serving_default']
    fetch = {k: v.name for k, v in signature.outputs.items()}
    out = sess.run(fetch, {signature.inputs['x'].name: x[:5]})
  assert [n.decode() for n in out['names']] == [
      ['neg', 'pos'][c] for c in classes]
  assert out['seen'] == 5  # started from zero: the local variable was initialised
