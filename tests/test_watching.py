"""Watching a run: TensorBoard summaries read back with TensorBoard's own
reader, evaluation beside training, per-class results, progress lines, and
TensorFlow's noise kept off the terminal.

One short digits run (20 steps) and one evaluation of it, through the
scripts, serve the whole module.
"""
import csv
import io
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import json
import logging

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image
from tensorboard.backend.event_processing import event_accumulator

from classification import classifier
from classification import eval_report
from classification import optimization
from classification import progress
from datasets import dataset_factory, dataset_utils
from deployment import model_deploy
from runner import estimator as est
from runner import faults
from runner import hooks as runner_hooks
import scripts

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, 'train_image_classifier.py')
EVAL = os.path.join(ROOT, 'eval_image_classifier.py')
STEPS = 20
ESSENTIAL_SCALARS = ('losses/total', 'losses/clone_0', 'learning_rate',
                     'images_per_sec', 'Accuracy')
# The last line's rate also covers the final summaries (and says so).
PROGRESS = re.compile(r'^step (\d+)/20 \((\d+)%\): loss = ([\d.]+) '
                      r'\(([\d.]+) images/sec(?: incl\. the final summaries)?; '
                      r'50 images/step\), ETA (\w+)$', re.M)


def run(script, *args, env=None, timeout=600):
  # The scripts' own defaults decide what reaches the terminal.
  env = dict(os.environ if env is None else env)
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)
  return scripts.run(script, *args, env=env, timeout=timeout)


def eval_args(digits_dir, checkpoint_path, *more):
  return ('--model_name=lenet', '--dataset_name=digits',
          '--dataset_split_name=validation', '--dataset_dir=' + digits_dir,
          '--checkpoint_path=' + checkpoint_path, '--batch_size=100') + more


class Run(object):
  """The module's training and evaluation, and what they printed."""

  def __init__(self, root, digits_dir):
    self.digits_dir = digits_dir  # the run's shared conversion: read only
    self.train_dir = str(root / 'lenet')
    self.trained = run(
        TRAIN, '--model_name=lenet', '--dataset_name=digits',
        '--dataset_dir=' + self.digits_dir, '--train_dir=' + self.train_dir,
        '--optimizer=sgd', '--learning_rate=0.01',
        '--learning_rate_decay_type=fixed', '--weight_decay=0',
        '--batch_size=50', '--random_seed=0',
        '--max_number_of_steps=%d' % STEPS, '--log_every_n_steps=5',
        '--save_summaries_steps=5')
    assert self.trained.returncode == 0, self.trained.stderr[-3000:]
    self.evaluated = run(EVAL, *eval_args(self.digits_dir, self.train_dir,
                                          '--log_every_n_secs=0'))
    assert self.evaluated.returncode == 0, self.evaluated.stderr[-3000:]
    self.eval_dir = os.path.join(self.train_dir, 'eval')

  def printed(self, name):
    return float(re.search(r'^%s = ([\d.]+)$' % name, self.evaluated.stdout,
                           re.M).group(1))


@pytest.fixture(scope='module')
def digits_run(tmp_path_factory, digits_dir):
  return Run(tmp_path_factory.mktemp('watching'), digits_dir)


def events(path):
  accumulator = event_accumulator.EventAccumulator(path, size_guidance={
      event_accumulator.SCALARS: 0, event_accumulator.IMAGES: 0,
      event_accumulator.HISTOGRAMS: 1})
  accumulator.Reload()
  return accumulator


def scalars(accumulator, tag):
  return [(e.step, e.value) for e in accumulator.Scalars(tag)]


# -- the training run's summaries --------------------------------------------
@pytest.mark.slow
def test_training_writes_the_essentials_with_readable_tags(digits_run):
  train = events(digits_run.train_dir)
  tags = train.Tags()
  for tag in ESSENTIAL_SCALARS:
    assert tag in tags['scalars'], tag
  every = tags['scalars'] + tags['histograms'] + tags['images']
  # No '_1' that TensorFlow adds to make an op name unique.
  assert not [t for t in every if re.search(r'_\d+$', t) and
              not re.fullmatch(r'losses/clone_\d+', t)], every
  assert 'network/sparsity/conv1' in tags['scalars']
  assert 'network/activations/conv1' in tags['histograms']
  assert 'network/variables/LeNet/conv1/weights' in tags['histograms']
  # TensorBoard orders sections by name and opens the first two: the
  # essentials come before the network's internals.
  sections = {t.split('/')[0] for t in every}
  assert sections == {'Accuracy', 'images_per_sec', 'learning_rate', 'losses',
                      'network'}
  assert max(sections - {'network'}) < 'network'


@pytest.mark.slow
def test_training_summaries_have_the_expected_steps_and_values(digits_run):
  train = events(digits_run.train_dir)
  printed = [(int(step), float(loss), float(rate)) for step, _, loss, rate, _
             in PROGRESS.findall(digits_run.trained.stdout)]
  assert [step for step, _, _ in printed] == [5, 10, 15, 20]
  # Every 5 steps from the first, and the last step too.
  total = scalars(train, 'losses/total')
  assert [step for step, _ in total] == [1, 6, 11, 16, 20]
  assert total[-1][1] == pytest.approx(printed[-1][1], abs=5e-5)
  assert scalars(train, 'losses/clone_0') == total  # one clone, no decay
  assert [v for _, v in scalars(train, 'learning_rate')] == [
      pytest.approx(0.01)] * 5
  accuracy = scalars(train, 'Accuracy')
  assert [step for step, _ in accuracy] == [1, 6, 11, 16, 20]
  assert all(0 <= v <= 1 and (v * 50) == pytest.approx(round(v * 50))
             for _, v in accuracy)  # a share of the 50 images of a step
  rates = scalars(train, 'images_per_sec')
  assert [step for step, _ in rates] == [5, 10, 15, 20]
  for (_, logged), (_, _, rate) in zip(rates, printed):
    assert logged == pytest.approx(rate, abs=0.05)


# -- the evaluation: beside training, per class ----------------------------------
@pytest.mark.slow
def test_eval_summaries_sit_beside_training_at_the_checkpoint_step(digits_run):
  evaluation = events(digits_run.eval_dir)
  assert sorted(evaluation.Tags()['scalars']) == ['Accuracy', 'Recall_5',
                                                  'loss']
  for name in ('Accuracy', 'Recall_5'):
    (step, value), = scalars(evaluation, name)
    assert step == STEPS
    assert value == pytest.approx(digits_run.printed(name), abs=5e-5)
  image, = evaluation.Images('confusion_matrix')
  assert image.step == STEPS
  png = Image.open(io.BytesIO(image.encoded_image_string))
  assert png.format == 'PNG'
  assert png.size == (image.width, image.height) and image.width >= 400


@pytest.mark.slow
def test_confusion_matrix_counts_every_image_and_its_diagonal_is_the_accuracy(
    digits_run):
  with open(os.path.join(digits_run.eval_dir,
                         'confusion_matrix-%d.csv' % STEPS)) as f:
    rows = list(csv.reader(f))
  assert rows[0] == ['true_label', 'true_name'] + [str(i) for i in range(10)]
  matrix = np.array([[int(c) for c in row[2:]] for row in rows[1:]])
  assert matrix.shape == (10, 10)
  assert matrix.sum() == 360
  assert round(np.trace(matrix) / matrix.sum(), 4) == digits_run.printed(
      'Accuracy')
  with open(os.path.join(digits_run.eval_dir,
                         'per_class_accuracy-%d.csv' % STEPS)) as f:
    per_class = list(csv.DictReader(f))
  assert [int(r['images']) for r in per_class] == matrix.sum(axis=1).tolist()
  assert [int(r['correct']) for r in per_class] == np.diag(matrix).tolist()


@pytest.mark.slow
def test_per_class_table_names_the_classes_from_labels_txt(digits_run):
  names = dataset_utils.read_label_file(digits_run.digits_dir)
  rows = re.findall(r'^(\d+) (\w+) +(\d+) +([\d.]+) +((?:[ .\d]+))$',
                    digits_run.evaluated.stdout, re.M)
  assert [(int(label), name) for label, name, *_ in rows] == sorted(
      names.items())
  total = 0
  for _, _, images, accuracy, counts in rows:
    counts = [int(c) if c != '.' else 0 for c in counts.split()]
    assert len(counts) == 10 and sum(counts) == int(images)
    total += int(images)
  assert total == 360


# -- progress ------------------------------------------------------------------
@pytest.mark.slow
def test_training_lines_carry_the_step_fraction_and_an_eta(digits_run):
  lines = PROGRESS.findall(digits_run.trained.stdout)
  assert [(s, p) for s, p, _, _, _ in lines] == [
      ('5', '25'), ('10', '50'), ('15', '75'), ('20', '100')]
  assert lines[-1][4] == '0s'


@pytest.mark.slow
def test_evaluation_shows_batches_done_of_the_total(digits_run):
  lines = re.findall(r'^eval: batch (\d)/4 \((\d+)%\), ETA \w+$',
                     digits_run.evaluated.stdout, re.M)
  assert lines == [('1', '25'), ('2', '50'), ('3', '75'), ('4', '100')]


@pytest.mark.slow
def test_tensorflow_noise_stays_off_the_terminal(digits_run):
  for result in (digits_run.trained, digits_run.evaluated):
    assert result.stderr == ''
    assert not re.search(r'INFO:tensorflow|absl::InitializeLog|Warning|'
                         r'deprecated|^[IWE]\d{4} ', result.stdout, re.M)


# A script as the scripts are: quiet_tensorflow first, absl's flags, a
# MonitoredTrainingSession (which logs "Graph was finalized" at INFO).
QUIET_THEN_SESSION = '''
import quiet_tensorflow
from absl import app
import tensorflow as tf


def main(_):
  tf1 = tf.compat.v1
  with tf.Graph().as_default():
    tf1.train.get_or_create_global_step()
    five = tf.constant(2) + 3
    with tf1.train.MonitoredTrainingSession() as session:
      print(session.run(five))


app.run(main)
'''


@pytest.mark.parametrize('level, args, noisy', [
    (None, [], False), ('0', [], True),
    ('3', ['--verbosity=1'], True)])  # setup_env.sh's 3: the flag wins
def test_quiet_tensorflow_drops_start_up_and_info_lines_unless_asked_for(
    level, args, noisy):
  """The controls: --verbosity or TF_CPP_MIN_LOG_LEVEL=0 show what
  TensorFlow prints, C++ and Python."""
  env = dict(os.environ)
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)
  if level is not None:
    env['TF_CPP_MIN_LOG_LEVEL'] = level
  result = subprocess.run([sys.executable, '-c', QUIET_THEN_SESSION] + args,
                          cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout == '5\n'
  for line in (r'absl::InitializeLog|^I\d{4} ', r'Graph was finalized'):
    assert bool(re.search(line, result.stderr, re.M)) == noisy, (
        line, result.stderr[-2000:])
  if not noisy:
    assert result.stderr == ''


# What a script's start-up imports, then scikit-learn and matplotlib as the
# digits converter and the confusion matrix import them.
STARTUP_IMPORTS = '''
import sys
%s
import tensorflow as tf
import tf_slim
from classification import classifier
loaded = [n for n in ('sklearn', 'matplotlib') if n in sys.modules]
import sklearn.datasets, matplotlib.figure
from tf_slim.losses import metric_learning
print(loaded, tf.keras.layers.Dense.__module__.split('.')[0],
      metric_learning.HAS_SKLEARN)
'''


@pytest.mark.parametrize('first, loaded', [
    ('import quiet_tensorflow', []),
    ('', ['sklearn', 'matplotlib'])])  # the control: what it saves
def test_scripts_start_without_the_libraries_optional_integrations(
    first, loaded):
  """A script's `import quiet_tensorflow` imports TensorFlow and tf-slim
  without the scikit-learn and matplotlib they would load for Keras 3's and
  tf-slim's optional integrations; both import as usual afterwards, and
  `tf.keras` is still Keras 3. The control: imported plainly, they load."""
  result = subprocess.run([sys.executable, '-c', STARTUP_IMPORTS % first],
                          cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.split('\n')[-2] == '%r keras %s' % (
      loaded, not first)


@pytest.mark.parametrize('argv, level', [
    (['x.py'], None), (['x.py', '--verbosity=1'], 1), (['x.py', '-v', '-1'], -1),
    (['x.py', '-v=0', '--model_name=lenet'], 0), (['x.py', '--v', '2'], 2),
    (['x.py', '--', '-v', '1'], None), (['x.py', '-v'], None)])
def test_verbosity_is_read_from_the_command_line_as_absl_reads_it(argv, level):
  assert quiet_tensorflow_module().verbosity_in(argv) == level


def test_only_deprecation_notices_about_the_libraries_own_calls_are_dropped():
  keep = quiet_tensorflow_module().not_a_library_deprecation_notice

  def notice(call_site):
    return logging.LogRecord(
        'tensorflow', logging.WARNING, '/tf/python/util/deprecation.py', 50,
        'From %s: f (from m) is deprecated', (call_site,), None)

  tensorflow_call = os.path.join(os.path.dirname(tf.__file__), 'python',
                                 'training', 'saver.py') + ':1177'
  assert not keep(notice(tensorflow_call))
  ours = os.path.join(ROOT, 'classification', 'classifier.py')
  assert keep(notice(ours + ':174'))
  other = logging.LogRecord('tensorflow', logging.WARNING, '/x/saver.py', 1,
                            'From %s: a warning', (tensorflow_call,), None)
  assert keep(other)


def test_startup_noise_is_info_and_warning_lines_only():
  assert quiet_tensorflow_module().is_startup_noise(
      'I0000 00:00:1796280494.069976    4054 port.cc:153] oneDNN custom '
      'operations are on.\n')
  assert quiet_tensorflow_module().is_startup_noise(
      'WARNING: All log messages before absl::InitializeLog() is called are '
      'written to STDERR\n')
  assert not quiet_tensorflow_module().is_startup_noise(
      'F0000 00:00:1796280494.069976    4054 cpu_feature_guard.cc:1] fatal\n')
  assert not quiet_tensorflow_module().is_startup_noise('Traceback (most ...\n')


def quiet_tensorflow_module():
  # Imported here: importing it quiets this process's TensorFlow logger too.
  import quiet_tensorflow  # pylint: disable=import-outside-toplevel
  return quiet_tensorflow


# -- --wait_for_checkpoints and TensorBoard itself --------------------------------
@pytest.mark.slow
def test_wait_for_checkpoints_builds_the_eval_curve(digits_run, tmp_path):
  """The evaluator follows a training run: each new checkpoint once, then
  it stops at --stop_at_step."""
  train_dir = str(tmp_path / 'lenet')
  shutil.copytree(digits_run.train_dir, train_dir,
                  ignore=shutil.ignore_patterns('eval'))
  eval_dir = str(tmp_path / 'curve')
  env = dict(os.environ)
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)
  evaluator = subprocess.Popen(
      [sys.executable, EVAL] + list(eval_args(
          digits_run.digits_dir, train_dir, '--wait_for_checkpoints',
          '--eval_interval_secs=1', '--stop_at_step=%d' % (STEPS + 5),
          '--eval_dir=' + eval_dir)),
      cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True)
  try:
    deadline = time.time() + 300
    while not os.path.exists(os.path.join(eval_dir, 'per_class_accuracy-%d.csv'
                                          % STEPS)):
      assert time.time() < deadline and evaluator.poll() is None
      time.sleep(0.5)
    trainer = est.Estimator(classifier.model_fn, train_dir, params={
        'classifier': classifier.ClassifierParams(
            model_name='lenet', num_classes=10, batch_size=50,
            weight_decay=0.0, optimizer=optimization.OptimizerParams(
                optimizer='sgd', learning_rate=0.01,
                learning_rate_decay_type='fixed'))},
        config=est.RunConfig(log_step_count_steps=None, tf_random_seed=0))
    dataset = dataset_factory.get_dataset('digits', 'train',
                                          digits_run.digits_dir)
    trainer.train(classifier.make_input_fn(dataset, 'lenet', 50, True),
                  max_steps=STEPS + 5)
    out, err = evaluator.communicate(timeout=300)
  finally:
    if evaluator.poll() is None:
      evaluator.kill()
      evaluator.communicate()
  assert evaluator.returncode == 0, err[-3000:]
  assert re.findall(r'^Evaluated .*\(step (\d+)\)', out, re.M) == ['20', '25']
  assert [step for step, _ in scalars(events(eval_dir), 'Accuracy')] == [20, 25]


def test_wait_for_checkpoints_waits_for_a_directory_not_there_yet(
    tmp_path, digits_dir):
  """The evaluator may start before training has made its directory; a file
  is refused with one line."""
  train_dir = str(tmp_path / 'not_yet')
  waited = scripts.run(EVAL, *eval_args(
      digits_dir, train_dir, '--wait_for_checkpoints', '--eval_interval_secs=1',
      '--eval_timeout_secs=2'), timeout=300)
  assert waited.returncode == 0, waited.stderr[-3000:]
  assert waited.stdout.splitlines() == [
      'No new checkpoint in %s for 2s: done' % train_dir]
  a_file = tmp_path / 'model.ckpt'
  a_file.write_text('')
  refused = scripts.run(EVAL, *eval_args(digits_dir, str(a_file),
                                          '--wait_for_checkpoints'),
                        timeout=300)
  assert refused.returncode == 1
  assert refused.stderr.strip().splitlines()[-1] == (
      "eval_image_classifier: error: --wait_for_checkpoints follows a "
      "directory; --checkpoint_path '%s' is a file" % a_file)


@pytest.mark.slow
def test_a_checkpoint_deleted_before_its_evaluation_is_skipped(
    digits_run, tmp_path, monkeypatch, capsys):
  """A follower can lose the race with the trainer's Saver (it keeps the
  newest keep_checkpoint_max): the real restore of a checkpoint whose files
  are gone fails, the evaluator says so in one line and goes on."""
  import eval_image_classifier  # pylint: disable=import-outside-toplevel
  train_dir = str(tmp_path / 'lenet')
  shutil.copytree(digits_run.train_dir, train_dir,
                  ignore=shutil.ignore_patterns('eval'))
  latest = tf.train.latest_checkpoint(train_dir)
  gone = os.path.join(train_dir, 'model.ckpt-%d' % (STEPS // 2))
  assert not os.path.exists(gone + '.index')
  # Found readable, deleted before its restore:
  monkeypatch.setattr(faults, 'follow_checkpoints',
                      lambda *args, **kwargs: iter([gone, latest]))
  flags = eval_image_classifier.F
  flags(['eval_image_classifier.py'] + list(eval_args(
      digits_run.digits_dir, train_dir, '--wait_for_checkpoints',
      '--stop_at_step=%d' % STEPS, '--eval_dir=' + str(tmp_path / 'eval'))))
  try:
    assert eval_image_classifier.main(None) == 0
  finally:
    flags.unparse_flags()
  out = capsys.readouterr().out
  assert ('Skipped %s: training deleted it (keep_checkpoint_max) before it '
          'was evaluated' % gone) in out.splitlines()
  assert re.findall(r'^Evaluated (\S+) \(step (\d+)\)', out, re.M) == [
      (latest, str(STEPS))]


def _free_port():
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def _get_json(url):
  with urllib.request.urlopen(url, timeout=10) as response:
    return json.loads(response.read().decode())


@pytest.mark.slow
def test_tensorboard_from_the_setup_serves_train_and_eval_side_by_side(
    digits_run):
  """`tensorboard --logdir` as README says, from the same environment."""
  tensorboard = os.path.join(os.path.dirname(sys.executable), 'tensorboard')
  assert os.access(tensorboard, os.X_OK), tensorboard
  port = _free_port()
  logdir = os.path.dirname(digits_run.train_dir)
  server = subprocess.Popen(
      [tensorboard, '--logdir', logdir, '--host', '127.0.0.1', '--port',
       str(port), '--load_fast=false'],
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  base = 'http://127.0.0.1:%d/data/' % port
  try:
    deadline = time.time() + 120
    while True:
      try:
        runs = _get_json(base + 'runs')
        if 'lenet/eval' in runs:
          break
      except OSError:
        pass
      assert time.time() < deadline and server.poll() is None
      time.sleep(0.5)
    assert sorted(runs) == ['lenet', 'lenet/eval']
    tags = _get_json(base + 'plugin/scalars/tags')
    assert set(ESSENTIAL_SCALARS) <= set(tags['lenet'])
    assert 'Accuracy' in tags['lenet/eval']
    assert list(_get_json(base + 'plugin/images/tags')['lenet/eval']) == [
        'confusion_matrix']
    points = _get_json(base + 'plugin/scalars/scalars?run=lenet/eval&tag=Accuracy')
    assert [(step, round(value, 4)) for _, step, value in points] == [
        (STEPS, digits_run.printed('Accuracy'))]
  finally:
    server.kill()
    server.wait()


# -- the pieces, without a run ----------------------------------------------------
@pytest.mark.parametrize('seconds, text', [
    (0, '0s'), (0.9, '0s'), (59, '59s'), (61, '1m01s'), (2 * 3600 + 7 * 60, '2h07m'),
    (3 * 86400 + 4 * 3600 + 59, '3d04h')])
def test_durations_read_in_two_units(seconds, text):
  assert progress.format_duration(seconds) == text


class _Clock(object):
  def __init__(self):
    self.now = 0.0

  def __call__(self):
    return self.now


class _RunContext(object):
  """What the hook sees of a session: the global step after each step."""

  def __init__(self):
    self.session, self.step = self, 0

  def run(self, fetches):
    return self.step


def _train_lines(max_steps, steps=10, every=5, seconds_per_step=1.0):
  clock, lines, context = _Clock(), [], _RunContext()
  hook = progress.TrainingProgressHook(None, None, every, max_steps=max_steps,
                                       log=lines.append, clock=clock)
  with tf.Graph().as_default():
    tf1.train.get_or_create_global_step()
    hook.begin()
  for _ in range(steps):
    hook.before_run(context)
    clock.now += seconds_per_step
    context.step += 1
    hook.after_run(context, tf1.train.SessionRunValues(
        results=[0.5, 50], options=None, run_metadata=None))
  return lines


def test_training_progress_has_the_fraction_and_eta_when_max_steps_are_known():
  # 1 s a step, measured from the end of the first one: 15 and 10 steps left.
  assert _train_lines(max_steps=20) == [
      'step 5/20 (25%): loss = 0.5000 (50.0 images/sec; 50 images/step), '
      'ETA 15s',
      'step 10/20 (50%): loss = 0.5000 (50.0 images/sec; 50 images/step), '
      'ETA 10s']


def test_training_progress_at_the_first_step_estimates_from_it():
  assert [l.rsplit(', ', 1)[1] for l in _train_lines(
      max_steps=20, steps=2, every=1)] == ['ETA 19s', 'ETA 18s']


def test_training_progress_without_max_steps_has_no_fraction_nor_eta():
  assert _train_lines(max_steps=None)[0] == (
      'step 5: loss = 0.5000 (50.0 images/sec; 50 images/step)')


def test_evaluation_progress_logs_first_then_every_n_seconds_and_last():
  clock, lines = _Clock(), []
  hook = progress.EvaluationProgressHook(100, every_secs=10, log=lines.append,
                                         clock=clock)
  hook.begin()
  for _ in range(100):
    hook.before_run(None)
    clock.now += 1.0
    hook.after_run(None, None)
  assert [int(re.search(r'batch (\d+)/', l).group(1)) for l in lines] == [
      1, 11, 21, 31, 41, 51, 61, 71, 81, 91, 100]
  assert lines[0] == 'eval: batch 1/100 (1%), ETA 1m39s'
  assert lines[-1] == 'eval: batch 100/100 (100%), ETA 0s'


def test_confusion_matrix_metric_accumulates_over_batches():
  batches = [([0, 1, 2, 2], [0, 2, 2, 1]), ([1, 1], [1, 1])]
  with tf.Graph().as_default():
    labels = tf1.placeholder(tf.int64, [None])
    predictions = tf1.placeholder(tf.int64, [None])
    value, update = eval_report.confusion_matrix_metric(labels, predictions, 3)
    with tf1.Session() as session:
      session.run(tf1.local_variables_initializer())
      for l, p in batches:
        session.run(update, {labels: l, predictions: p})
      matrix = session.run(value)
  np.testing.assert_array_equal(matrix, [[1, 0, 0], [0, 2, 1], [0, 1, 1]])


def test_class_report_with_labels_offset_table_and_csv(tmp_path):
  matrix = [[3, 1], [0, 0]]
  report = eval_report.ClassReport.from_dataset(
      matrix, {1: 'cat', 2: 'dog'}, labels_offset=1)
  assert report.table().splitlines() == [
      'Per-class accuracy; confusion matrix (rows: true class, columns: '
      'predicted label):',
      'class images accuracy    1  2',
      '1 cat      4   0.7500    3  1',
      '2 dog      0        -    .  .']
  paths = report.write_csv(str(tmp_path), 7)
  assert [os.path.basename(p) for p in paths] == [
      'confusion_matrix-7.csv', 'per_class_accuracy-7.csv']
  with open(paths[1]) as f:
    assert f.read().splitlines() == ['label,name,images,correct,accuracy',
                                     '1,cat,4,3,0.750000', '2,dog,0,0,']


def test_many_classes_are_summed_up_by_the_weakest():
  matrix = np.diag(np.arange(1, 31)) + np.eye(30, k=1, dtype=int)
  report = eval_report.ClassReport.from_dataset(matrix, {})
  lines = report.table(['a.csv', 'b.csv']).splitlines()
  assert lines[0] == ('Per-class accuracy and confusion matrix of 30 classes: '
                      'a.csv, b.csv')
  assert lines[1].startswith('Lowest per-class accuracy: 0 0.5000 (1/2), '
                             '1 0.6667 (2/3)')


def test_confusion_matrix_plot_is_a_png():
  report = eval_report.ClassReport.from_dataset(
      [[5, 1], [2, 7]], {0: 'cat', 1: 'dog'})
  summary = report.image_summary('step 3')
  image = summary.value[0].image
  png = Image.open(io.BytesIO(image.encoded_image_string))
  assert (png.format, png.size) == ('PNG', (image.width, image.height))
  assert summary.value[0].tag == 'confusion_matrix'


def test_summary_tags_are_exactly_the_names_asked_for():
  with tf.Graph().as_default():
    weights = tf1.get_variable('LeNet/conv1/weights', [2])
    control = tf1.summary.histogram(weights.op.name, weights)
    ours = model_deploy.histogram_summary('network/variables/LeNet/conv1/weights',
                                          weights)
    with tf1.name_scope('clone_0'):
      scalar = model_deploy.scalar_summary('losses/total', tf.constant(2.0))
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      tags = [tf1.Summary.FromString(s).value[0].tag
              for s in session.run([control, ours, scalar])]
  assert tags == ['LeNet/conv1/weights_1',  # TF-Slim's way: the op's name
                  'network/variables/LeNet/conv1/weights', 'losses/total']


def test_runner_writes_summaries_at_the_last_step_too(tmp_path):
  def model_fn(features, labels, mode):
    weight = tf1.get_variable('w', [], initializer=tf1.ones_initializer())
    loss = tf.square(weight)
    tf1.summary.scalar('loss', loss)
    train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(
        loss, tf1.train.get_global_step())
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op)

  estimator = est.Estimator(model_fn, str(tmp_path), config=est.RunConfig(
      save_summary_steps=4, log_step_count_steps=None))
  estimator.train(lambda: (tf.zeros([1]), tf.zeros([1])), max_steps=10)
  estimator.train(lambda: (tf.zeros([1]), tf.zeros([1])), steps=3)
  steps = [step for step, _ in scalars(events(str(tmp_path)), 'loss')]
  assert steps == [1, 5, 9, 10, 11, 13]


@pytest.mark.parametrize('read_after_increment', [True, False])
def test_summary_periods_hold_whichever_side_of_the_increment_the_step_is_read(
    tmp_path, read_after_increment):
  """The global step fetched beside a train op is read before or after the
  run's increment (TensorFlow orders neither); summaries land on the exact
  period and on the last step either way."""
  import types  # pylint: disable=import-outside-toplevel
  state = {'step': 0}
  session = types.SimpleNamespace(run=lambda fetches: state['step'])
  saved = []
  with tf.Graph().as_default():
    tf1.train.get_or_create_global_step()
    scaffold = types.SimpleNamespace(
        summary_op=tf1.summary.scalar('x', tf.constant(1.0)))
    hook = runner_hooks.SummarySaverHook(str(tmp_path), scaffold, save_steps=4,
                                 steps=10)
    hook.begin()
    hook.after_create_session(session, None)
    for _ in range(10):
      fetches = hook.before_run(None).fetches
      state['step'] += 1  # the run's increment
      results = {'global_step': state['step'] - (not read_after_increment)}
      if 'summary' in fetches:
        results['summary'] = b''
        saved.append(state['step'])
      hook.after_run(types.SimpleNamespace(session=session),
                     types.SimpleNamespace(results=results))
    hook.end()
  assert saved == [1, 5, 9, 10]


def test_training_progress_labels_the_final_summaries_and_the_clones(
    tmp_path):
  clock, lines, context = _Clock(), [], _RunContext()
  hook = progress.TrainingProgressHook(None, None, 2, max_steps=4,
                                       summary_dir=str(tmp_path),
                                       log=lines.append, clock=clock, clones=2)
  with tf.Graph().as_default():
    tf1.train.get_or_create_global_step()
    hook.begin()
  for _ in range(4):
    hook.before_run(context)
    clock.now += 1.0
    context.step += 1
    hook.after_run(context, tf1.train.SessionRunValues(
        results=[0.5, 32], options=None, run_metadata=None))
  assert [l.split(': ', 1)[1] for l in lines] == [
      'loss = 0.5000 (32.0 images/sec; 32 images/step = 2 clones x 16), '
      'ETA 2s',
      'loss = 0.5000 (32.0 images/sec incl. the final summaries; 32 '
      'images/step = 2 clones x 16), ETA 0s']
