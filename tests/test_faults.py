"""What real machines do to a run, through the scripts as users run them:
SIGTERM/SIGINT, a truncated checkpoint, two trainers on one directory, a full
disk (a real small tmpfs), divergence, a corrupt image file, a cluster task
stopped. Every process has a timeout."""
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest
import tensorflow as tf

from deployment import launch
from runner import estimator as est
from runner import faults
import scripts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, 'train_image_classifier.py')
EVAL = os.path.join(ROOT, 'eval_image_classifier.py')
CONVERT = os.path.join(ROOT, 'download_and_convert_data.py')
LENET = ['--model_name=lenet', '--dataset_name=digits', '--optimizer=sgd',
         '--learning_rate=0.01', '--learning_rate_decay_type=fixed',
         '--weight_decay=0', '--batch_size=50', '--random_seed=0']
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')


def run(script, *args, timeout=300):
  return scripts.run(script, *args, env=ENV, timeout=timeout)


def start(script, *args):
  return subprocess.Popen([sys.executable, script] + list(args), cwd=ROOT,
                          env=ENV, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def read_until(proc, pattern, seconds=180):
  """stdout lines of `proc` up to the first matching `pattern`."""
  deadline, lines = time.time() + seconds, []
  while time.time() < deadline:
    line = proc.stdout.readline()
    if not line:
      proc.kill()
      raise AssertionError('exited before %r: %s\n%s' % (
          pattern, ''.join(lines), proc.stderr.read()[-3000:]))
    lines.append(line)
    if re.search(pattern, line):
      return lines
  proc.kill()
  raise AssertionError('no %r in %ss: %s' % (pattern, seconds, ''.join(lines)))


def error_line(result):
  assert 'Traceback' not in result.stderr, result.stderr[-3000:]
  lines = [l for l in result.stderr.splitlines() if 'error:' in l]
  assert len(lines) == 1, result.stderr[-3000:]
  return lines[0]


def readable(prefix):
  return faults.checkpoint_problem(prefix) is None


def files_of(directory):
  return {name: os.path.getsize(os.path.join(directory, name))
          for name in os.listdir(directory)}


@pytest.fixture(scope='module')
def trained(digits_dir, tmp_path_factory):
  """Checkpoints at steps 0, 10 and 20 (--save_interval_steps=10)."""
  train_dir = str(tmp_path_factory.mktemp('trained'))
  result = run(TRAIN, *LENET, '--dataset_dir=' + digits_dir,
               '--train_dir=' + train_dir, '--max_number_of_steps=20',
               '--save_interval_steps=10')
  assert result.returncode == 0, result.stderr[-3000:]
  return train_dir


# -- 1. SIGTERM / SIGINT ---------------------------------------------------------
@pytest.mark.slow
def test_sigterm_saves_the_step_in_flight_and_the_rerun_resumes_there(
    digits_dir, tmp_path):
  train_dir = str(tmp_path / 'run')
  # The default --save_interval_secs=600: before the signal the only
  # checkpoint is step 0's.
  args = LENET + ['--dataset_dir=' + digits_dir, '--train_dir=' + train_dir,
                  '--log_every_n_steps=20', '--save_summaries_steps=1000']
  proc = start(TRAIN, *args, '--max_number_of_steps=100000')
  read_until(proc, r'^step [4-9]\d/')
  assert est.global_step_of(tf.train.latest_checkpoint(train_dir)) == 0
  sent = time.time()
  proc.send_signal(signal.SIGTERM)
  out, err = proc.communicate(timeout=60)
  assert time.time() - sent < 30  # a step and a save: seconds
  assert proc.returncode == 143, err[-3000:]
  match = re.fullmatch(r'stopped by SIGTERM at step (\d+); checkpoint (\S+)',
                       out.splitlines()[-1])
  assert match, out[-2000:]
  step, path = int(match.group(1)), match.group(2)
  assert step >= 40 and path == os.path.join(train_dir, 'model.ckpt-%d' % step)
  assert tf.train.latest_checkpoint(train_dir) == path and readable(path)
  assert est.global_step_of(path) == step
  summarised = set()
  for events in glob.glob(os.path.join(train_dir, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(events):
      if event.summary.value:
        summarised.add(event.step)
  assert step in summarised  # the summaries end where training stopped
  resumed = run(TRAIN, *args, '--max_number_of_steps=%d' % (step + 3))
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert 'Resuming from %s (step %d)' % (path, step) in resumed.stdout
  assert est.global_step_of(tf.train.latest_checkpoint(train_dir)) == step + 3


@pytest.mark.slow
def test_sigint_stops_an_evaluator_waiting_for_checkpoints(digits_dir, trained):
  proc = start(EVAL, '--model_name=lenet', '--dataset_name=digits',
               '--dataset_dir=' + digits_dir, '--dataset_split_name=validation',
               '--checkpoint_path=' + trained, '--wait_for_checkpoints',
               '--eval_interval_secs=1', '--eval_dir=' + trained + '/eval_sig')
  read_until(proc, r'^Waiting for a new checkpoint')
  sent = time.time()
  proc.send_signal(signal.SIGINT)
  out, err = proc.communicate(timeout=60)
  assert time.time() - sent < 15
  assert proc.returncode == 130, err[-3000:]
  assert out.splitlines()[-1] == 'stopped by SIGINT; 1 checkpoint(s) evaluated'
  assert 'Traceback' not in err


def test_stop_signals_set_a_flag_then_restore_the_previous_handlers():
  calls = []
  previous = signal.signal(signal.SIGTERM, lambda *a: calls.append('old'))
  # SIGINT's handler as this process got it: Python's default_int_handler,
  # or SIG_IGN when the suite was started in the background (a shell
  # without job control ignores SIGINT for what it starts with `&`).
  interrupt = signal.getsignal(signal.SIGINT)
  try:
    with faults.StopSignals() as signals:
      assert signal.getsignal(signal.SIGINT) not in (
          interrupt, signal.default_int_handler)
      os.kill(os.getpid(), signal.SIGTERM)
      time.sleep(0.1)
      assert signals.received == signal.SIGTERM and calls == []
      os.kill(os.getpid(), signal.SIGTERM)  # a second one: as without us
      time.sleep(0.1)
      assert calls == ['old']
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.1)
    assert calls == ['old', 'old']
    assert signal.getsignal(signal.SIGINT) is interrupt
  finally:
    signal.signal(signal.SIGTERM, previous)


def test_save_interval_secs_and_steps_together_are_refused(digits_dir,
                                                           tmp_path):
  result = run(TRAIN, *LENET, '--dataset_dir=' + digits_dir,
               '--train_dir=%s' % tmp_path, '--save_interval_secs=5',
               '--save_interval_steps=5')
  assert result.returncode == 1
  assert error_line(result) == (
      'train_image_classifier: error: set at most one of '
      '--save_interval_secs and --save_interval_steps')
  assert os.listdir(tmp_path) == []


# -- 2. checkpoints that cannot be read -------------------------------------------
@pytest.mark.slow
def test_a_truncated_newest_checkpoint_is_named_skipped_and_kept(
    digits_dir, trained, tmp_path):
  train_dir = str(tmp_path / 'run')
  shutil.copytree(trained, train_dir)
  assert tf.train.latest_checkpoint(train_dir).endswith('model.ckpt-20')
  data = os.path.join(train_dir, 'model.ckpt-20.data-00000-of-00002')
  os.truncate(data, os.path.getsize(data) // 2)
  newest = os.path.join(train_dir, 'model.ckpt-20')
  skipped = ('skipped checkpoint %s: unreadable (Read less bytes than '
             'requested)' % newest)
  eval_args = ['--model_name=lenet', '--dataset_name=digits',
               '--dataset_dir=' + digits_dir, '--dataset_split_name=validation']
  evaluated = run(EVAL, *eval_args, '--checkpoint_path=' + train_dir)
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  assert evaluated.stdout.count(skipped) == 1, evaluated.stdout
  assert 'Evaluated %s/model.ckpt-10 (step 10)' % train_dir in evaluated.stdout
  named = run(EVAL, *eval_args, '--checkpoint_path=' + newest)
  assert named.returncode == 1
  assert error_line(named) == (
      'eval_image_classifier: error: checkpoint %s is unreadable (Read less '
      'bytes than requested)' % newest)
  before = os.path.getsize(data)
  resumed = run(TRAIN, *LENET, '--dataset_dir=' + digits_dir,
                '--train_dir=' + train_dir, '--max_number_of_steps=25',
                '--save_interval_steps=5')
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  lines = resumed.stdout.splitlines()
  assert lines[0] == skipped + '; kept as %s.unreadable.*' % newest
  assert lines[1] == 'Resuming from %s/model.ckpt-10 (step 10)' % train_dir
  # the damaged files are kept, renamed: the new step 20 did not overwrite them
  kept = os.path.join(train_dir, 'model.ckpt-20.unreadable.data-00000-of-00002')
  assert os.path.getsize(kept) == before
  assert readable(newest) and est.global_step_of(newest) == 20
  assert est.global_step_of(tf.train.latest_checkpoint(train_dir)) == 25


@pytest.mark.slow
def test_no_readable_checkpoint_is_one_line_naming_them_and_nothing_changes(
    digits_dir, trained, tmp_path):
  train_dir = str(tmp_path / 'run')
  shutil.copytree(trained, train_dir)
  for path in glob.glob(os.path.join(train_dir, '*.data-00000-of-00002')):
    os.truncate(path, 100)
  before = files_of(train_dir)
  before.pop(faults.LOCK_FILE, None)
  result = run(TRAIN, *LENET, '--dataset_dir=' + digits_dir,
               '--train_dir=' + train_dir, '--max_number_of_steps=30')
  assert result.returncode == 1
  line = error_line(result)
  assert line.startswith('train_image_classifier: error: no readable '
                         'checkpoint in %s: model.ckpt-20 (' % train_dir), line
  assert 'model.ckpt-10 (' in line and 'model.ckpt-0 (' in line
  after = files_of(train_dir)
  after.pop(faults.LOCK_FILE, None)
  assert after == before


# -- 3. one trainer per train_dir ---------------------------------------------------
@pytest.mark.slow
def test_two_trainers_started_together_one_refuses_naming_the_other(
    digits_dir, tmp_path):
  host = socket.gethostname()
  for attempt in range(3):
    train_dir = str(tmp_path / str(attempt))
    args = LENET + ['--dataset_dir=' + digits_dir, '--train_dir=' + train_dir,
                    '--max_number_of_steps=100000', '--save_interval_secs=1']
    pair = [start(TRAIN, *args), start(TRAIN, *args)]
    try:
      deadline = time.time() + 180
      while all(p.poll() is None for p in pair) and time.time() < deadline:
        time.sleep(0.2)
      (loser,) = [p for p in pair if p.poll() is not None]
      (winner,) = [p for p in pair if p is not loser]
      out, err = loser.communicate(timeout=10)
      assert loser.returncode == 1, err[-3000:]
      assert error_line(subprocess.CompletedProcess([], 1, out, err)) == (
          "train_image_classifier: error: train_dir '%s' is in use by another "
          'trainer (pid %d on %s, holding %s/trainer.lock); wait for it to end '
          'or train into another directory' % (train_dir, winner.pid, host,
                                               train_dir))
      read_until(winner, r'^step ')
      winner.send_signal(signal.SIGTERM)
      out, err = winner.communicate(timeout=60)
      assert winner.returncode == 143, err[-3000:]
    finally:
      for p in pair:
        if p.poll() is None:
          p.kill()
          p.communicate()
    for prefix in faults.checkpoint_candidates(train_dir):
      assert readable(prefix), prefix
    assert not glob.glob(os.path.join(train_dir, '*_temp*'))


def test_the_lock_of_a_killed_trainer_does_not_block(tmp_path):
  holder = subprocess.Popen(
      [sys.executable, '-c', 'import sys, time; from runner import faults\n'
       'with faults.TrainDirLock(sys.argv[1]):\n'
       '  print("locked", flush=True); time.sleep(300)', str(tmp_path)],
      cwd=ROOT, env=ENV, stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline() == 'locked\n'
    with pytest.raises(faults.TrainDirInUse, match='pid %d on' % holder.pid):
      with faults.TrainDirLock(str(tmp_path)):
        pass
  finally:
    holder.kill()  # SIGKILL: nothing of the holder's runs
    holder.wait(30)
  with faults.TrainDirLock(str(tmp_path)):
    with open(tmp_path / faults.LOCK_FILE) as f:
      assert f.read().startswith('pid %d on' % os.getpid())


# -- 4. a full disk, divergence, a corrupt image ------------------------------------
@pytest.fixture
def small_filesystem():
  """A 20 MB tmpfs: room for LeNet's first checkpoint (13 MB), not a second."""
  directory = tempfile.mkdtemp(prefix='small_fs_')
  mounted = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=20m', 'tmpfs',
                            directory], capture_output=True, text=True,
                           timeout=30) if shutil.which('mount') else None
  if mounted is None or mounted.returncode != 0:
    os.rmdir(directory)
    pytest.skip('cannot mount a 20 MB tmpfs here (needs root and mount): %s'
                % (mounted.stderr.strip() if mounted else 'no mount command'))
  try:
    yield directory
  finally:
    subprocess.run(['umount', '-l', directory], timeout=30)
    os.rmdir(directory)


@pytest.mark.slow
def test_a_full_disk_says_so_and_keeps_the_previous_checkpoint(
    digits_dir, small_filesystem):
  train_dir = os.path.join(small_filesystem, 'run')
  result = run(TRAIN, *LENET, '--dataset_dir=' + digits_dir,
               '--train_dir=' + train_dir, '--max_number_of_steps=40',
               '--save_interval_steps=20')
  assert result.returncode == 1
  match = re.fullmatch(
      r'train_image_classifier: error: no space left on device saving '
      r'checkpoint (\S+) \(it needs ([\d.]+) MB, ([\d.]+) MB free\); the '
      r'latest checkpoint is still (\S+); its partial files were removed',
      error_line(result))
  assert match, result.stderr[-3000:]
  assert match.group(1) == os.path.join(train_dir, 'model.ckpt-20')
  assert 12 < float(match.group(2)) < 14  # LeNet's variables
  assert float(match.group(3)) < float(match.group(2))
  first = os.path.join(train_dir, 'model.ckpt-0')
  assert match.group(4) == first
  assert tf.train.latest_checkpoint(train_dir) == first and readable(first)
  assert not [n for n in os.listdir(train_dir)
              if 'ckpt-20' in n or '_temp' in n or 'tempstate' in n]


@pytest.mark.slow
def test_divergence_names_the_step_and_the_last_good_checkpoint(digits_dir,
                                                                tmp_path):
  train_dir = str(tmp_path / 'run')
  result = run(TRAIN, *LENET, '--dataset_dir=' + digits_dir,
               '--train_dir=' + train_dir, '--max_number_of_steps=60',
               '--learning_rate=1e30', '--save_interval_steps=1')
  assert result.returncode == 1
  match = re.fullmatch(
      r'train_image_classifier: error: training diverged at step (\d+): '
      r'(the loss is (nan|infinite)|variable \S+ is not finite); the last good '
      r'checkpoint is (\S+); try a lower --learning_rate \(it was 1e\+30\)',
      error_line(result))
  assert match, result.stderr[-3000:]
  step, last_good = int(match.group(1)), match.group(4)
  assert step < 60
  assert last_good == tf.train.latest_checkpoint(train_dir)
  assert est.global_step_of(last_good) < step
  reader = tf.train.load_checkpoint(last_good)
  for name in reader.get_variable_to_dtype_map():
    assert np.all(np.isfinite(reader.get_tensor(name))), name


def test_a_corrupt_image_is_named_without_an_object_repr(tmp_path):
  source = tmp_path / 'src'
  for label in ('cat', 'dog'):
    (source / label).mkdir(parents=True)
    for i in range(3):
      (source / label / ('%d.png' % i)).write_bytes(converters_png())
  bad = source / 'dog' / 'broken.jpg'
  bad.write_bytes(b'this is not an image\n' * 10)
  result = run(CONVERT, '--dataset_name=image_folder',
               '--source_dir=%s' % source, '--dataset_dir=%s' % (tmp_path / 'out'))
  assert result.returncode == 1
  line = error_line(result)
  assert 'cannot decode image %s: not a format PIL can read' % bad in line, line
  assert not re.search(r'object at 0x', result.stdout + result.stderr)


def converters_png():
  import io
  import PIL.Image
  buffer = io.BytesIO()
  PIL.Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(buffer, 'PNG')
  return buffer.getvalue()


# -- 5. a cluster: the chief saves, a worker and a ps exit ----------------------
@pytest.mark.slow
def test_sigterm_in_a_cluster_the_chief_saves_a_worker_and_a_ps_exit(digits_dir,
                                                                 tmp_path):
  train_dir = str(tmp_path / 'run')
  argv = [TRAIN] + LENET + ['--dataset_dir=' + digits_dir,
                            '--train_dir=' + train_dir,
                            '--max_number_of_steps=100000',
                            '--log_every_n_steps=10']
  jobs = launch.cluster_of(1, 2)
  tasks = [launch.Task(name, argv, launch.tf_config(jobs, kind, index),
                       out=open(os.devnull, 'w'), cwd=ROOT, env=ENV)
           for name, kind, index in (('ps:0', 'ps', 0), ('worker:0', 'worker', 0),
                                     ('worker:1', 'worker', 1))]
  ps, chief, worker = tasks
  try:
    deadline = time.time() + 180
    while time.time() < deadline and not all(
        re.search(r'^step \d+', t.output(), re.M) for t in (chief, worker)):
      time.sleep(0.5)
    worker.process.send_signal(signal.SIGTERM)
    assert worker.wait(60) == 143, worker.output()[-3000:]
    assert re.fullmatch(r'stopped by SIGTERM at step \d+; no checkpoint \(the '
                        r'chief saves\)', worker.output().splitlines()[-1])
    chief.process.send_signal(signal.SIGTERM)
    assert chief.wait(60) == 143, chief.output()[-3000:]
    match = re.fullmatch(r'stopped by SIGTERM at step (\d+); checkpoint (\S+)',
                         chief.output().splitlines()[-1])
    assert match, chief.output()[-3000:]
    assert tf.train.latest_checkpoint(train_dir) == match.group(2)
    assert readable(match.group(2))
    assert est.global_step_of(match.group(2)) == int(match.group(1))
    # The ps ends with the job, with the chief's status (cluster.JobEnd).
    assert ps.wait(30) == 143, ps.output()[-3000:]
    assert ps.output().splitlines()[-1] == (
        'ps:0: the chief ended (status 143, stopped by SIGTERM); the job is '
        'over, this task ends too')
  finally:
    for t in tasks:
      t.stop()


def test_following_a_directory_skips_a_truncated_newest_checkpoint_once(
    trained, tmp_path):
  train_dir = str(tmp_path / 'run')
  shutil.copytree(trained, train_dir)
  data = os.path.join(train_dir, 'model.ckpt-20.data-00000-of-00002')
  os.truncate(data, 1000)
  lines, found = [], []
  for prefix in faults.follow_checkpoints(
      train_dir, interval_secs=0, timeout_secs=1, report=lines.append,
      poll_secs=0.05):
    found.append(prefix)
  assert found == [os.path.join(train_dir, 'model.ckpt-10')]
  assert lines == ['skipped checkpoint %s/model.ckpt-20: unreadable (Read '
                   'less bytes than requested)' % train_dir]
  assert os.path.getsize(data) == 1000


def test_a_histogram_of_a_diverged_variable_is_named_as_divergence(tmp_path):
  """The summary of the step a weight overflows fails before any hook sees
  the step: the run's error is turned into the same Diverged line."""
  tf1 = tf.compat.v1

  def model_fn(features, labels, mode):
    w = tf1.get_variable('w', initializer=1.0)
    loss = tf.reduce_mean(features) * 0.0 + w  # finite while w overflows
    tf1.summary.histogram('w', w)
    train_op = tf1.train.GradientDescentOptimizer(-2e38).minimize(
        loss, tf1.train.get_global_step())
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op)

  def input_fn():
    return tf.data.Dataset.from_tensors(tf.zeros([2])).repeat(), None

  estimator = est.Estimator(model_fn, str(tmp_path), config=est.RunConfig(
      save_summary_steps=1, save_checkpoints_steps=100))
  with pytest.raises(faults.Diverged) as raised:
    estimator.train(lambda: input_fn()[0], max_steps=50)
  error = raised.value
  assert re.fullmatch(r'(w(_1)? is (nan|infinite)|the loss is (nan|infinite)|'
                      r'variable w is not finite)', error.what), error.what
  assert 1 <= error.step < 50
  assert error.checkpoint == os.path.join(str(tmp_path), 'model.ckpt-0')
  assert tf.train.latest_checkpoint(str(tmp_path)) == error.checkpoint
