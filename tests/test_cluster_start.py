"""A parameter-server job starts as one process does: with the CPU busy, in
random start order with random delays, LeNet on digits at the learning rate
at the edge (`--learning_rate=0.05`), each start with another
`--random_seed`: the chief's first loss is one process's first loss from the
same initial variables (the same seed), the other worker joins after the
chief's warm-up, no loss leaves the finite range, the model evaluates as one
process's does, and the cluster ends at chance level no more often than one
process on the same flags and seeds. A run that ends at chance level says so
in its last line (status 1), not "Trained to step N".

CLUSTER_STARTS (default 2, for CI's time), CLUSTER_STEPS (default 100) and
CLUSTER_SEED set the starts; the long form (docs/cluster.md):
CLUSTER_STARTS=20 CLUSTER_STEPS=600 ./test.sh -n 0 -s tests/test_cluster_start.py"""
import math
import os
import random
import re
import subprocess
import sys
import time

import pytest
import tensorflow as tf

import chaos  # tests/chaos.py: the evaluation its jobs are judged by

from classification import progress
from deployment import launch
import scripts

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, 'train_image_classifier.py')
STEPS, WARMUP = 100, 30
STEP_LINE = re.compile(r'step (\d+)/\d+ \(\d+%\): loss = (\S+)')


def _argv(digits, train_dir, steps=STEPS, seed=1):
  return [TRAIN, '--dataset_name=digits', '--dataset_dir=%s' % digits,
          '--model_name=lenet', '--train_dir=%s' % train_dir,
          '--train_image_size=%d' % chaos.IMAGE_SIZE,
          '--optimizer=sgd', '--learning_rate=0.05',
          '--learning_rate_decay_type=fixed', '--batch_size=32',
          '--max_number_of_steps=%d' % steps, '--save_interval_secs=600',
          '--log_every_n_steps=1', '--random_seed=%d' % seed,
          '--async_worker_warmup_steps=%d' % WARMUP]


def _busy_cores(count=2):
  return [subprocess.Popen([sys.executable, '-c', 'while True: pass'])
          for _ in range(count)]


def _start(digits, train_dir, chief_job, rng, steps=STEPS, seed=1):
  """ps + chief + worker in random order with random delays; returns
  {task: output}. chief_job: the tf.estimator layout ('chief' task) or
  the launcher's (worker 0 is the chief)."""
  ports = launch.free_ports(3)
  address = ['127.0.0.1:%d' % p for p in ports]
  if chief_job:
    jobs = {'chief': address[:1], 'worker': address[1:2], 'ps': address[2:]}
    names = [('chief', 0), ('worker', 0), ('ps', 0)]
  else:
    jobs = {'worker': address[:2], 'ps': address[2:]}
    names = [('worker', 0), ('worker', 1), ('ps', 0)]
  rng.shuffle(names)
  tasks = {}
  try:
    for kind, index in names:
      tasks['%s:%d' % (kind, index)] = launch.Task(
          '%s:%d' % (kind, index), _argv(digits, train_dir, steps, seed),
          launch.tf_config(jobs, kind, index), out=open(os.devnull, 'w'),
          cwd=ROOT)
      time.sleep(rng.uniform(0, 2))
    trainers = [n for n in tasks if not n.startswith('ps')]
    for name in trainers:
      # 1 only for a model at chance level (counted by the caller)
      status = tasks[name].wait(600)
      assert status == 0 or (status == 1 and 'chance level' in (
          tasks[name].output().strip().splitlines() or [''])[-1]), (
              name, status, tasks[name].output()[-3000:])
  finally:
    for task in tasks.values():
      task.stop()
  chief = 'chief:0' if chief_job else 'worker:0'
  other = 'worker:0' if chief_job else 'worker:1'
  return tasks[chief].output(), tasks[other].output()


def _chance_ending(output, accuracy):
  """Whether a run ended at chance level: its last line says so, or its
  model evaluates at most 1.5 x chance (runs too short for the line)."""
  lines = [l for l in output.splitlines() if l.strip()]
  return bool(lines and 'chance level' in lines[-1]) or accuracy <= 0.15


@pytest.mark.slow
def test_a_ps_job_starts_and_trains_as_often_as_one_process_under_load(
    digits, tmp_path):
  """Each start takes another --random_seed, for the cluster and for one
  process on the same flags: the chief's first loss is that process's (the
  same initial variables), and the cluster ends at chance level no more
  often than one process does."""
  starts = int(os.environ.get('CLUSTER_STARTS', '2'))
  steps = int(os.environ.get('CLUSTER_STEPS', str(STEPS)))
  base_seed = int(os.environ.get('CLUSTER_SEED', '25'))
  rng = random.Random(base_seed)
  chance = {'cluster': 0, 'alone': 0}
  for start in range(starts):
    seed = base_seed * 1000 + start
    alone_dir = tmp_path / ('alone%d' % start)
    alone = scripts.run(*_argv(digits, alone_dir, steps, seed), timeout=600)
    alone_out = alone.stdout + alone.stderr
    assert alone.returncode in (0, 1), alone_out[-3000:]
    first_alone = float(STEP_LINE.findall(alone.stdout)[0][1])
    accuracy_alone = chaos.accuracy(digits, alone_dir)
    train_dir = tmp_path / ('start%d' % start)
    # The cluster starts and trains with both cores busy; one process's
    # run beside it is deterministic for its seed and needs no load.
    load = _busy_cores()
    try:
      chief, other = _start(digits, train_dir, start % 2 == 0, rng, steps,
                            seed)
    finally:
      for process in load:
        process.kill()
        process.wait()
    chief_steps = STEP_LINE.findall(chief)
    other_steps = STEP_LINE.findall(other)
    losses = [float(l) for _, l in chief_steps + other_steps]
    accuracy = chaos.accuracy(digits, train_dir)
    at_chance = _chance_ending(chief, accuracy)
    alone_at_chance = _chance_ending(alone_out, accuracy_alone)
    chance['cluster'] += at_chance
    chance['alone'] += alone_at_chance
    print('start %d (seed %d): chief first loss %.4f (alone %.4f), worker '
          'joins at step %s, accuracy %.3f (alone %.3f)%s%s' % (
              start, seed, float(chief_steps[0][1]), first_alone,
              other_steps[0][0], accuracy, accuracy_alone,
              ', cluster at chance' if at_chance else '',
              ', alone at chance' if alone_at_chance else ''))
    assert all(math.isfinite(l) for l in losses), (start, losses)
    assert chief_steps[0][0] == '1'
    assert abs(float(chief_steps[0][1]) - first_alone) < 1e-3, start
    assert int(other_steps[0][0]) > WARMUP, start
    if not (at_chance or alone_at_chance):
      # Trained: within 0.1 of one process once both have converged (the
      # long form, 600 steps); at CI's 100 steps the workers' stale async
      # updates can leave the cluster further behind on some seeds
      # (seed 25000: 0.753 against 0.942), so there well above chance.
      floor = accuracy_alone - 0.1 if steps >= 400 else 0.5
      assert accuracy >= floor, (start, accuracy, accuracy_alone)
  print('chance-level endings in %d starts: cluster %d, one process %d' % (
      starts, chance['cluster'], chance['alone']))
  # A rate, not a certainty: one start more than one process's (or a tenth
  # of the starts) is within what chance alone gives at the edge.
  assert chance['cluster'] <= chance['alone'] + max(1, starts // 10), chance


@pytest.mark.slow
def test_a_run_that_ends_at_chance_level_says_so_in_its_last_line(
    digits, tmp_path):
  # A learning rate of 1e-9 leaves the initial, untrained model: at chance.
  argv = _argv(digits, tmp_path / 'run', 210, 3)
  argv[argv.index('--learning_rate=0.05')] = '--learning_rate=1e-9'
  result = scripts.run(*argv, timeout=300)
  assert result.returncode == 1, result.stderr[-3000:]
  last = [l for l in result.stderr.splitlines() if l.strip()][-1]
  assert re.match(
      r'train_image_classifier: error: training is at chance level since '
      r'step \d+: batch accuracy 0\.\d+ over the last 100 steps \(chance '
      r'0\.100, 10 classes\): the model diverged or is not learning; try a '
      r'lower --learning_rate \(it was 1e-09\); the last checkpoint, '
      r'\S+model\.ckpt-210, holds a model at chance level$', last), last
  assert 'Trained to step' not in result.stdout


class _Values(object):

  def __init__(self, results):
    self.results = results


def _chance_lines(correct_per_step, window=5):
  lines = []
  with tf.Graph().as_default():
    tf1.train.get_or_create_global_step()
    hook = progress.ChanceLevelHook(tf.constant(0.0), tf.constant(10), 10,
                                    window=window, log=lines.append)
    hook.begin()
    for step, correct in enumerate(correct_per_step):
      hook.after_run(None, _Values([correct, 10, step]))
    hook.end(None)
  return lines


def test_a_run_at_chance_level_says_so_naming_the_step():
  # learning for 3 steps (global steps 1-3), then one class only
  lines = _chance_lines([8.0] * 3 + [1.0] * 17)
  assert len(lines) == 2 and lines[0] == lines[1]  # when seen, and at the end
  assert lines[0].startswith(
      'training is at chance level since step 4: batch accuracy 0.100 over '
      'the last 5 steps (chance 0.100, 10 classes)')
  # at chance for its first steps only, then learning: nothing said
  assert _chance_lines([1.0] * 8 + [9.0] * 12) == []
