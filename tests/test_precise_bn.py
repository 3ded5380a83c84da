"""Precise batch-norm statistics (classification/precise_bn.py): each moving
mean and variance becomes the plain average of the statistic its layer's own
update uses, over every batch; the checkpoint is rewritten at its name and
step, never torn (runner/checkpoint_rewrite.py); and an unsettled
checkpoint is named by evaluation and the exporters."""
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from classification import moving_statistics
from classification import precise_bn
from runner import checkpoint_rewrite
from runner import faults
from nets import nets_factory
import scripts

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = 'mobilenet_v1_025'
SIZE = 32
FIRST_BN = 'MobilenetV1/Conv2d_0/BatchNorm/'


def _batches(count=3, batch=4, seed=0):
  rng = np.random.RandomState(seed)
  return rng.uniform(-1, 1, (count, batch, SIZE, SIZE, 3)).astype(np.float32)


def _input_fn(batches):
  def input_fn():
    labels = np.zeros(batches.shape[:2], np.int64)
    return tf.data.Dataset.from_tensor_slices((batches, labels))
  return input_fn


def _checkpoint(directory, step=600):
  """A mobilenet_v1_025 checkpoint with random weights and batch-norm
  statistics at their initial values (mean 0, variance 1), at `step`."""
  with tf.Graph().as_default():
    tf1.set_random_seed(1)
    network_fn = nets_factory.get_network_fn(MODEL, 3, is_training=True)
    network_fn(tf1.placeholder(tf.float32, [None, SIZE, SIZE, 3]))
    global_step = tf1.train.get_or_create_global_step()
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      session.run(global_step.assign(step))
      return tf1.train.Saver().save(session, os.path.join(directory, 'model.ckpt'),
                                    global_step=step)


def _layer_values(checkpoint, batches):
  """For each batch, the values the layers' own updates move each moving
  statistic towards, found by running every update once from 0 at its
  decay: variable = 0 - (0 - value) * (1 - decay) = value * (1 - decay)."""
  with tf.Graph().as_default() as graph:
    images = tf1.placeholder(tf.float32, [None, SIZE, SIZE, 3])
    nets_factory.get_network_fn(MODEL, 3, is_training=True)(images)
    updates = moving_statistics.moving_updates(graph)
    variables = {v.op.name: v for v in tf1.global_variables()}
    zero = tf.group(*[variables[u.name].assign(tf.zeros_like(variables[u.name]))
                      for u in updates])
    found = []
    with tf1.Session() as session:
      tf1.train.Saver().restore(session, checkpoint)
      factors = session.run({u.name: u.decay_factor for u in updates})
      for batch in batches:
        session.run(zero)
        session.run(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS),
                    {images: batch})
        values = session.run({name: variables[name] for name in factors})
        found.append({name: values[name] / factors[name] for name in values})
  return found


def test_updates_are_found_for_every_moving_statistic_with_the_arg_scope_decay():
  with tf.Graph().as_default() as graph:
    network_fn = nets_factory.get_network_fn(MODEL, 3, is_training=True)
    network_fn(tf1.placeholder(tf.float32, [2, SIZE, SIZE, 3]))
    updates = moving_statistics.moving_updates(graph)
    moving = sorted(v.op.name for v in tf1.global_variables()
                    if v.op.name.endswith(('moving_mean', 'moving_variance')))
    assert sorted(u.name for u in updates) == moving
    assert len(moving) == 2 * 27  # 27 batch-norm layers
    with tf1.Session() as session:
      assert moving_statistics.batch_norm_decay(graph, session) == 0.9997


def test_an_inference_graph_has_no_updates():
  with tf.Graph().as_default() as graph:
    nets_factory.get_network_fn(MODEL, 3, is_training=False)(
        tf1.placeholder(tf.float32, [2, SIZE, SIZE, 3]))
    assert moving_statistics.moving_updates(graph) == []
    assert moving_statistics.batch_norm_decay(graph) is None


def test_the_first_layers_statistic_is_its_batch_mean_and_sample_variance(tmp_path):
  checkpoint = _checkpoint(str(tmp_path))
  images = _batches(1)[0]
  values = _layer_values(checkpoint, [images])[0]
  weights = tf.train.load_variable(checkpoint, 'MobilenetV1/Conv2d_0/weights')
  with tf.Graph().as_default(), tf1.Session() as session:
    conv = session.run(tf.nn.conv2d(images, weights, 2, 'SAME'))
  pixels = conv.reshape(-1, conv.shape[-1]).astype(np.float64)
  np.testing.assert_allclose(values[FIRST_BN + 'moving_mean'],
                             pixels.mean(0), rtol=1e-4, atol=1e-5)
  # The fused kernel moves the variance towards the sample variance (n - 1).
  np.testing.assert_allclose(values[FIRST_BN + 'moving_variance'],
                             pixels.var(0, ddof=1), rtol=1e-3, atol=1e-5)


def test_recompute_sets_every_statistic_to_the_average_over_batches(tmp_path):
  checkpoint = _checkpoint(str(tmp_path))
  before = checkpoint_rewrite.read_tensors(checkpoint)
  batches = _batches(3)
  expected = _layer_values(checkpoint, batches)
  result = precise_bn.recompute(checkpoint, MODEL, 3, _input_fn(batches), 3)
  after = checkpoint_rewrite.read_tensors(checkpoint)
  for name in expected[0]:
    np.testing.assert_allclose(
        after[name], np.mean([e[name] for e in expected], axis=0),
        rtol=2e-4, atol=1e-6, err_msg=name)
  # Nothing else changed; the marker says how many batches made them.
  for name, value in before.items():
    if name not in expected[0]:
      np.testing.assert_array_equal(after[name], value, err_msg=name)
  assert int(after[precise_bn.MARKER]) == 3
  assert (result.layers, result.batches, result.images, result.step) == (
      27, 3, 12, 600)
  assert 'averages of 3 batches (12 images)' in result.line()
  assert tf.train.latest_checkpoint(str(tmp_path)) == checkpoint
  assert not [n for n in os.listdir(str(tmp_path))
              if n.startswith(checkpoint_rewrite.STAGING_PREFIX)]


def test_every_clone_slice_counts_as_a_batch(tmp_path):
  checkpoint = _checkpoint(str(tmp_path))
  batches = _batches(2, batch=8)
  halves = [half for b in batches for half in (b[:4], b[4:])]
  expected = _layer_values(checkpoint, halves)
  result = precise_bn.recompute(checkpoint, MODEL, 3, _input_fn(batches), 2,
                                num_clones=2)
  after = checkpoint_rewrite.read_tensors(checkpoint)
  name = FIRST_BN + 'moving_variance'
  np.testing.assert_allclose(after[name],
                             np.mean([e[name] for e in expected], axis=0),
                             rtol=2e-4, atol=1e-6)
  assert result.batches == 4 and int(after[precise_bn.MARKER]) == 4


def test_moving_averages_get_statistics_of_the_averaged_weights(tmp_path):
  checkpoint = _checkpoint(str(tmp_path))
  tensors = checkpoint_rewrite.read_tensors(checkpoint)
  shadowed = {}
  for name, value in list(tensors.items()):
    if name.startswith('MobilenetV1/') and value.dtype == np.float32:
      shadowed[name + precise_bn.MOVING_AVERAGE_SUFFIX] = value * 0.5
  tensors.update(shadowed)  # averages: the weights halved
  checkpoint_rewrite.write_tensors(checkpoint, tensors)
  halved = dict(tensors)
  for name in shadowed:
    halved[name[:-len(precise_bn.MOVING_AVERAGE_SUFFIX)]] = shadowed[name]
  reference = str(tmp_path / 'halved' / 'model.ckpt-600')
  os.makedirs(os.path.dirname(reference))
  checkpoint_rewrite.write_tensors(reference, halved)
  batches = _batches(1)
  of_weights = _layer_values(checkpoint, [batches[0]])[0]
  of_averages = _layer_values(reference, [batches[0]])[0]
  result = precise_bn.recompute(checkpoint, MODEL, 3, _input_fn(batches), 1)
  after = checkpoint_rewrite.read_tensors(checkpoint)
  assert result.moving_averages and 'their moving averages' in result.line()
  for name in (FIRST_BN + 'moving_mean', FIRST_BN + 'moving_variance'):
    np.testing.assert_allclose(after[name], of_weights[name],
                               rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(
        after[name + precise_bn.MOVING_AVERAGE_SUFFIX], of_averages[name],
        rtol=2e-4, atol=1e-6)
  assert not np.allclose(of_weights[FIRST_BN + 'moving_variance'],
                         of_averages[FIRST_BN + 'moving_variance'])


def test_a_network_without_batch_norm_is_refused_in_one_line(tmp_path):
  with tf.Graph().as_default():
    nets_factory.get_network_fn('cifarnet', 3)(
        tf1.placeholder(tf.float32, [None, 32, 32, 3]))
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      checkpoint = tf1.train.Saver().save(session, str(tmp_path / 'model.ckpt'))
  with pytest.raises(ValueError, match="model_name 'cifarnet' has no batch norm"):
    precise_bn.recompute(checkpoint, 'cifarnet', 3, _input_fn(_batches(1)), 1)


def test_a_split_shorter_than_the_batches_asked_for_is_named(tmp_path):
  checkpoint = _checkpoint(str(tmp_path))
  before = checkpoint_rewrite.read_tensors(checkpoint)
  with pytest.raises(ValueError, match='ends after 2 batches'):
    precise_bn.recompute(checkpoint, MODEL, 3, _input_fn(_batches(2)), 5)
  after = checkpoint_rewrite.read_tensors(checkpoint)
  assert sorted(after) == sorted(before)  # untouched


# -- the rewrite ----------------------------------------------------------------
def _saved(directory, steps=(10, 20)):
  with tf.Graph().as_default():
    v = tf1.get_variable('v', initializer=tf.zeros([3]))
    step = tf1.train.get_or_create_global_step()
    saver = tf1.train.Saver(max_to_keep=5)
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      for s in steps:
        session.run([v.assign(tf.fill([3], float(s))), step.assign(s)])
        last = saver.save(session, os.path.join(directory, 'model.ckpt'),
                          global_step=s)
  return last


def test_rewrite_keeps_the_name_and_the_other_checkpoints(tmp_path):
  last = _saved(str(tmp_path))
  tensors = checkpoint_rewrite.read_tensors(last)
  tensors['v'] = np.full([3], 7.0, np.float32)
  checkpoint_rewrite.rewrite(last, tensors)
  assert tf.train.latest_checkpoint(str(tmp_path)) == last
  state = tf.train.get_checkpoint_state(str(tmp_path))
  assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
      'model.ckpt-10', 'model.ckpt-20']
  assert list(tf.train.load_variable(last, 'v')) == [7.0] * 3
  assert list(tf.train.load_variable(
      str(tmp_path / 'model.ckpt-10'), 'v')) == [10.0] * 3


def test_a_rewrite_killed_before_its_commit_leaves_the_old_checkpoint(tmp_path, monkeypatch):
  last = _saved(str(tmp_path))

  def killed(*args):
    raise KeyboardInterrupt
  monkeypatch.setattr(checkpoint_rewrite, '_point_state', killed)
  tensors = checkpoint_rewrite.read_tensors(last)
  tensors['v'] = np.full([3], 7.0, np.float32)
  with pytest.raises(KeyboardInterrupt):
    checkpoint_rewrite.rewrite(last, tensors)
  assert faults.readable_checkpoint(str(tmp_path))[0] == last
  assert list(tf.train.load_variable(last, 'v')) == [20.0] * 3


def test_a_rewrite_killed_after_its_commit_is_read_whole_and_finished_later(tmp_path, monkeypatch):
  last = _saved(str(tmp_path))
  copied = []
  real_replace = os.replace

  def replace_once_then_die(source, target):
    if copied:  # the second file: killed between the two renames
      raise KeyboardInterrupt
    copied.append(target)
    real_replace(source, target)
  monkeypatch.setattr(checkpoint_rewrite.os, 'replace', replace_once_then_die)
  tensors = checkpoint_rewrite.read_tensors(last)
  tensors['v'] = np.full([3], 7.0, np.float32)
  with pytest.raises(KeyboardInterrupt):
    checkpoint_rewrite.rewrite(last, tensors)
  monkeypatch.setattr(checkpoint_rewrite.os, 'replace', real_replace)
  # Half the files replaced: the latest is the staged copy, whole.
  newest, skipped = faults.readable_checkpoint(str(tmp_path))
  assert skipped == [] and os.path.basename(newest) == 'model.ckpt-20'
  assert os.path.basename(os.path.dirname(newest)).startswith(
      checkpoint_rewrite.STAGING_PREFIX)
  assert list(tf.train.load_variable(newest, 'v')) == [7.0] * 3
  checkpoint_rewrite.finish_interrupted(str(tmp_path))
  assert tf.train.latest_checkpoint(str(tmp_path)) == last
  assert list(tf.train.load_variable(last, 'v')) == [7.0] * 3
  assert faults.checkpoint_problem(last) is None
  assert not [n for n in os.listdir(str(tmp_path))
              if n.startswith(checkpoint_rewrite.STAGING_PREFIX)]


# -- saying so --------------------------------------------------------------
def test_initial_share_is_decay_to_the_steps_and_more_through_averages():
  assert precise_bn.initial_share(0.9997, 600) == pytest.approx(0.8352, abs=1e-4)
  assert precise_bn.initial_share(0.9997, 0) == 1.0
  through = precise_bn.initial_share(0.9997, 600, 0.9999)
  assert 0.8352 < through < 1.0
  # Averages of a statistic that has settled add nothing of the start.
  assert precise_bn.initial_share(0.9, 2000, 0.9999) < 0.01


def test_unsettled_line_names_the_share_the_steps_and_the_flag(tmp_path):
  checkpoint = _checkpoint(str(tmp_path), step=600)
  record = {'batch_norm_decay': 0.9997}
  line = precise_bn.unsettled_line(checkpoint, record)
  assert '83% their initial values (600 steps at decay 0.9997)' in line
  assert '--precise_bn_batches' in line and checkpoint in line
  assert precise_bn.unsettled_line(checkpoint, None) is None  # trained elsewhere
  (tmp_path / 'later').mkdir()
  settled = _checkpoint(str(tmp_path / 'later'), step=5000)
  assert precise_bn.unsettled_line(settled, record) is None  # 22%
  precise_bn.recompute(checkpoint, MODEL, 3, _input_fn(_batches(1)), 1)
  assert precise_bn.unsettled_line(checkpoint, record) is None


def _trains(command):
  """Runs `command`, a training command of _five_steps'."""
  result = scripts.run(*command[1:], timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]


def _five_steps(digits, train_dir):
  """The training command of a 5-step run: its statistics unsettled."""
  return [sys.executable, os.path.join(ROOT, 'train_image_classifier.py'),
          '--dataset_name=digits', '--dataset_dir=%s' % digits,
          '--model_name=%s' % MODEL, '--train_image_size=%d' % SIZE,
          '--train_dir=%s' % train_dir, '--batch_size=8',
          '--max_number_of_steps=5', '--save_interval_steps=5']


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigterm_during_precise_batch_norm_stops_it_and_leaves_the_checkpoint(digits, tmp_path):
  train_dir = str(tmp_path / 'run')
  command = _five_steps(digits, train_dir)
  _trains(command)
  checkpoint = os.path.join(train_dir, 'model.ckpt-5')
  before = checkpoint_rewrite.read_tensors(checkpoint)
  process = subprocess.Popen(command + ['--precise_bn_batches=100000'],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
  try:
    for line in process.stdout:
      if line.startswith('Precise batch norm: 100000 batches'):
        break
    time.sleep(3)  # into the batches
    process.send_signal(15)
    rest = process.communicate(timeout=60)[0]
  finally:
    process.kill()
  assert process.returncode == 143, rest
  assert re.search(r'stopped by SIGTERM at step 5; checkpoint \S+model.ckpt-5 '
                   r'\(precise batch norm not done', rest), rest
  after = checkpoint_rewrite.read_tensors(checkpoint)
  assert sorted(after) == sorted(before)
  for name in before:
    np.testing.assert_array_equal(after[name], before[name])
  assert tf.train.latest_checkpoint(train_dir) == checkpoint
  assert not [n for n in os.listdir(train_dir)
              if n.startswith(checkpoint_rewrite.STAGING_PREFIX)]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_eval_and_both_exporters_warn_of_an_unsettled_checkpoint_until_precise_batch_norm(digits, tmp_path):
  train_dir = str(tmp_path / 'run')
  train = _five_steps(digits, train_dir)
  readers = {
      'eval_image_classifier': [
          '--dataset_name=digits', '--dataset_dir=%s' % digits,
          '--dataset_split_name=validation', '--checkpoint_path=%s' % train_dir],
      'export_model': [
          '--checkpoint_path=%s' % train_dir, '--format=tflite', '--overwrite',
          '--export_dir=%s' % (tmp_path / 'tflite')],
      'export_inference_graph': [
          '--checkpoint_path=%s' % train_dir, '--overwrite',
          '--output_file=%s' % (tmp_path / 'graph.pb')],
  }

  def warnings():
    """{script: its stderr's warning lines naming --precise_bn_batches}."""
    found = {}
    for script, flags in readers.items():
      result = scripts.run(script + '.py', *flags, timeout=300)
      assert result.returncode == 0, (script, result.stderr[-2000:])
      found[script] = [line for line in result.stderr.splitlines()
                       if line.startswith(script + ': warning: ') and
                       '--precise_bn_batches' in line]
    return found

  _trains(train)
  before = warnings()
  for script, lines in before.items():
    assert len(lines) == 1, (script, lines)
    assert re.search(r'the batch-norm moving statistics of \S+model.ckpt-5 are '
                     r'still \d+% their initial values \(5 steps', lines[0]), lines
  _trains(train + ['--precise_bn_batches=5'])
  assert warnings() == {script: [] for script in readers}
