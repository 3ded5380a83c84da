"""Recovery outside the launcher: tasks started from TF_CONFIG, each on its
own, as a Kubernetes operator starts them, and killed or restarted one by
one as Kubernetes does. A ps restarted at the same address leaves the chief
on its newest checkpoint; a ps that stays away ends the chief with status 200
in bounded time; SIGTERM to a task blocked on a dead peer still ends it in
seconds, with a checkpoint when the variables are reachable; a ps job ends
when the chief ends; a crash loop ends. Every wait is bounded."""
import glob
import json
import os
import re
import signal
import time

import pytest
import tensorflow as tf

from deployment import cluster
from deployment import launch
from runner import faults
import chaos
from waiting import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _argv(digits, train_dir, steps, *extra):
  return chaos.lenet_on_digits(digits, train_dir, steps,
                               '--log_every_n_steps=10',
                               '--save_interval_steps=50', *extra)


def _task(argv, jobs, kind, index=0):
  return launch.Task('%s:%d' % (kind, index), argv,
                     launch.tf_config(jobs, kind, index),
                     out=open(os.devnull, 'w'), cwd=ROOT)


def _steps(task):
  """The (step, loss) lines a training task printed, in order."""
  return [(int(s), float(l)) for s, l in
          re.findall(r'step (\d+)/\d+ \(\d+%\): loss = ([0-9.]+)', task.output())]


def _last_step(task):
  steps = _steps(task)
  return steps[-1][0] if steps else 0


def _checkpoint_steps(train_dir):
  return sorted(int(p.rsplit('-', 1)[1][:-len('.index')])
                for p in glob.glob(os.path.join(str(train_dir),
                                                'model.ckpt-*.index')))


class _Tasks(list):
  def __enter__(self):
    return self

  def __exit__(self, *exc):
    for task in self:
      task.stop(grace=2)


def _job(argv, jobs):
  """Every task of `jobs`, each a process of its own from TF_CONFIG: the ps
  tasks, then the workers (the chief first)."""
  return _Tasks(_task(argv, jobs, kind, index) for kind in ('ps', 'worker')
                for index in range(len(jobs.get(kind, ()))))


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_ps_restarted_at_the_same_address_leaves_the_chief_on_its_newest_checkpoint(
    digits, tmp_path):
  """What Kubernetes does to a ps pod that exits 137 under restartPolicy
  ExitCode. Before: the chief went on from step 0 with fresh weights, in
  silence, and its next checkpoints pushed the trained ones out."""
  train_dir = tmp_path / 'run'
  jobs = launch.cluster_of(1, 1)
  argv = _argv(digits, train_dir, 400)
  with _job(argv, jobs) as tasks:
    ps, chief = tasks
    wait_for(lambda: 200 in _checkpoint_steps(train_dir) and
             _last_step(chief) >= 210, 240, 'a checkpoint at step 200', ps,
             chief)
    ps.kill()
    killed_at = _last_step(chief)
    time.sleep(2)
    tasks.append(_task(argv, jobs, 'ps'))  # the same address
    assert chief.wait(300) == 0, chief.output()[-3000:]
    assert tasks[-1].wait(30) == 0, tasks[-1].output()[-2000:]  # ends itself
  log = chief.output()
  recovered = re.search(r'ps:0 \(127\.0\.0\.1:\d+\) came back empty at step '
                        r'(\d+); restored model\.ckpt-(\d+)\n', log)
  assert recovered, log[-3000:]
  lost_at, restored = int(recovered.group(1)), int(recovered.group(2))
  assert restored >= 200 and abs(lost_at - killed_at) <= 20, (lost_at, killed_at)
  after = [(s, l) for s, l in _steps(chief)
           if log.index('step %d/' % s) > recovered.end()]
  # From the checkpoint, trained: never back to step 0, never at the loss of
  # fresh weights (about 2.3, 1.5 after 25 steps).
  assert after and after[0][0] > restored and min(s for s, _ in after) > restored
  assert max(l for _, l in after[:3]) < 1.0, after[:3]
  assert _checkpoint_steps(train_dir)[-1] == 400
  assert _checkpoint_steps(train_dir) == sorted(set(_checkpoint_steps(train_dir)))
  assert 'Trained to step 400' in log


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_ps_that_stays_dead_ends_the_chief_and_worker_with_200_naming_it(
    digits, tmp_path):
  """Before: the chief waited, silent, for ever."""
  train_dir = tmp_path / 'run'
  jobs = launch.cluster_of(1, 2)
  argv = _argv(digits, train_dir, 5000, '--peer_timeout_secs=8',
               '--async_worker_warmup_steps=10')
  with _job(argv, jobs) as tasks:
    ps, chief, worker = tasks
    wait_for(lambda: _last_step(worker) >= 30, 240, 'both workers to train',
             *tasks)
    ps.kill()
    killed = time.time()
    assert chief.wait(60) == 200, chief.output()[-3000:]
    ended = time.time() - killed
    assert worker.wait(30) == 200, worker.output()[-3000:]
  print('ps killed to chief exit: %.1fs' % ended)
  assert 8 <= ended <= 30, ended
  for task in (chief, worker):
    log = task.output()
    assert re.search(r'ps:0 \(127\.0\.0\.1:(\d+)\) is not answering at step '
                     r'\d+; waiting up to 8s for it to come back '
                     r'\(--peer_timeout_secs\)\n', log), log[-2000:]
    assert re.search(r'train_image_classifier: error: ps:0 \(127\.0\.0\.1:\d+\) '
                     r'did not come back within 8s \(at step \d+\); this task '
                     r'stops: restart the job to resume from the last '
                     r'checkpoint\n', log), log[-2000:]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_to_a_chief_blocked_on_a_dead_ps_ends_it_in_seconds(
    digits, tmp_path):
  """Before: the chief ignored SIGTERM until Slurm's KillWait (30 s)
  SIGKILLed it. The variables were on the dead ps: no checkpoint is
  possible, and the line says so."""
  train_dir = tmp_path / 'run'
  jobs = launch.cluster_of(1, 1)
  argv = _argv(digits, train_dir, 5000)
  with _job(argv, jobs) as tasks:
    ps, chief = tasks
    wait_for(lambda: _last_step(chief) >= 60, 240, 'the chief to train', *tasks)
    ps.kill()
    time.sleep(2)  # the chief is blocked on the dead ps now
    chief.process.send_signal(signal.SIGTERM)
    signalled = time.time()
    assert chief.wait(30) == 143, chief.output()[-3000:]
    took = time.time() - signalled
  print('SIGTERM to exit: %.1fs' % took)
  assert took < 10, took
  assert re.search(r'stopped by SIGTERM at step \d+ while waiting on ps:0 '
                   r'\(127\.0\.0\.1:\d+\); no checkpoint at this step: the '
                   r'variables are on ps:0', chief.output()), chief.output()[-2000:]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_to_a_sync_chief_blocked_on_a_dead_worker_saves_the_last_step(
    digits, tmp_path):
  """--sync_replicas: each step waits for the other worker; it is killed,
  the chief blocks, and SIGTERM still saves the last completed step (the
  variables on the ps are reachable) and exits 143 in seconds."""
  train_dir = tmp_path / 'run'
  jobs = launch.cluster_of(1, 2)
  argv = _argv(digits, train_dir, 5000, '--sync_replicas',
               '--replicas_to_aggregate=2')
  with _job(argv, jobs) as tasks:
    ps, chief, worker = tasks
    wait_for(lambda: _last_step(chief) >= 30, 240, 'a synchronous step',
             *tasks)
    worker.kill()
    time.sleep(3)
    blocked_at = _last_step(chief)
    time.sleep(1)
    assert _last_step(chief) == blocked_at  # it waits for worker 1
    chief.process.send_signal(signal.SIGTERM)
    signalled = time.time()
    assert chief.wait(30) == 143, chief.output()[-3000:]
    took = time.time() - signalled
    assert ps.wait(30) == 143, ps.output()[-2000:]  # told by the chief
  print('SIGTERM to exit: %.1fs' % took)
  assert took < 10, took
  match = re.search(r'stopped by SIGTERM at step (\d+); checkpoint (\S+) \(the '
                    r'step in flight waited on .*worker:1 \(127\.0\.0\.1:\d+\)',
                    chief.output())
  assert match, chief.output()[-2000:]
  step, checkpoint = int(match.group(1)), match.group(2)
  assert step >= blocked_at
  assert tf.train.latest_checkpoint(str(train_dir)) == checkpoint
  assert tf.train.load_variable(checkpoint, 'global_step') == step
  assert faults.checkpoint_problem(checkpoint) is None


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_to_a_collective_chief_blocked_on_a_dead_peer_saves_the_last_step(
    digits, tmp_path):
  """The all-reduce waits for worker 1, killed: SIGTERM saves the chief's
  own variables at the last completed step and ends it with 143 within
  10 s (before: it ended 200 without a checkpoint, or, blocked, ignored the
  signal until Slurm's KillWait SIGKILLed it)."""
  train_dir = tmp_path / 'run'
  jobs = {'worker': launch.cluster_of(0, 2)['worker']}
  argv = _argv(digits, train_dir, 5000, '--variable_update=collective_all_reduce',
               '--collective_timeout_secs=120')
  with _job(argv, jobs) as tasks:
    chief, worker = tasks
    wait_for(lambda: _last_step(chief) >= 30, 240, 'the all-reduce to train',
             *tasks)
    # As srun does: the rank dies, the others get SIGTERM at once. The
    # all-reduce then blocks on the dead peer (the TaskWatch saves) or fails
    # on it (the loop saves, since a signal is waiting): 143 either way.
    worker.kill()
    chief.process.send_signal(signal.SIGTERM)
    signalled = time.time()
    status = chief.wait(30)
    took = time.time() - signalled
  log = chief.output()
  assert status == 143, log[-3000:]
  print('SIGTERM to exit: %.1fs' % took)
  assert took < 10, took
  match = re.search(r'stopped by SIGTERM at step (\d+); checkpoint (\S+)', log)
  assert match, log[-2000:]
  step, checkpoint = int(match.group(1)), match.group(2)
  assert step >= 30 and tf.train.load_variable(checkpoint, 'global_step') == step
  assert faults.checkpoint_problem(checkpoint) is None


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_every_task_of_a_ps_job_ends_when_the_chief_is_done(digits, tmp_path):
  """Before: the ps served for ever, so srun's step, a TFJob and any
  scheduler that waits for every task never ended."""
  train_dir = tmp_path / 'run'
  jobs = launch.cluster_of(2, 2)
  argv = _argv(digits, train_dir, 150, '--async_worker_warmup_steps=20')
  with _job(argv, jobs) as tasks:
    assert tasks[2].wait(240) == 0, tasks[2].output()[-3000:]
    done = time.time()
    statuses = [t.wait(30) for t in (tasks[0], tasks[1], tasks[3])]
    took = time.time() - done
  assert statuses == [0, 0, 0], [t.output()[-1500:] for t in tasks]
  assert took < 30, took
  for ps in tasks[:2]:
    assert re.search(r'ps:\d: the chief ended \(status 0, done\); the job is '
                     r'over, this task ends too', ps.output()), ps.output()
  assert re.search(r'worker:1 ran \d+ training steps', tasks[3].output())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_chief_restarted_after_its_last_checkpoint_ends_the_ps(
    digits, tmp_path):
  """A chief pod killed after its last checkpoint but before it told the ps,
  then started again: it has nothing to train, says so, and tells the ps,
  which ends 0; a ps that answers only later is waited for. Before: the
  chief ended 0 and the ps served on, so the TFJob never completed."""
  train_dir = tmp_path / 'run'
  argv = _argv(digits, train_dir, 20)
  trained = launch.Task('train', argv, '', out=open(os.devnull, 'w'), cwd=ROOT)
  assert trained.wait(180) == 0, trained.output()[-2000:]
  nothing = ('%s is already at step 20 (--max_number_of_steps=20): nothing to '
             'train' % train_dir)
  jobs = launch.cluster_of(1, 1)
  with _job(argv, jobs) as tasks:  # the ps serving, as the chief comes back
    ps, chief = tasks
    assert chief.wait(120) == 0, chief.output()[-2000:]
    done = time.time()
    assert ps.wait(30) == 0, ps.output()[-2000:]
  print('chief at its last step to the ps ending: %.1fs' % (time.time() - done))
  assert nothing in chief.output(), chief.output()[-2000:]
  assert 'ps:0: the chief ended (status 0, done); the job is over' in (
      ps.output()), ps.output()[-2000:]
  with _Tasks([_task(argv, jobs, 'worker')]) as tasks:  # the ps comes later
    chief = tasks[0]
    wait_for(lambda: re.search(
        r'ps:0 \(127\.0\.0\.1:\d+\) is not answering; waiting up to 180s to '
        r'tell it the job is done \(--peer_timeout_secs\)', chief.output()),
             120, 'the chief to wait for the ps', chief)
    tasks.append(_task(argv, jobs, 'ps'))
    assert chief.wait(60) == 0, chief.output()[-2000:]
    assert tasks[1].wait(30) == 0, tasks[1].output()[-2000:]
  assert nothing in chief.output(), chief.output()[-2000:]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_chief_that_fails_ends_the_ps_and_the_workers_with_its_status(
    digits, tmp_path):
  """A permanent error of the chief (here divergence) ends the whole job:
  the ps with the chief's status, the other worker with its class."""
  train_dir = tmp_path / 'run'
  jobs = launch.cluster_of(1, 2)
  argv = _argv(digits, train_dir, 5000, '--async_worker_warmup_steps=0')
  argv[argv.index('--learning_rate=0.01')] = '--learning_rate=1e5'
  with _job(argv, jobs) as tasks:
    ps, chief, worker = tasks
    assert chief.wait(240) == 1, chief.output()[-3000:]
    assert ps.wait(30) == 1, ps.output()[-2000:]
    assert worker.wait(30) in (1, 0), worker.output()[-2000:]
  assert 'diverged' in chief.output() or 'not finite' in chief.output() or (
      'nan' in chief.output()), chief.output()[-2000:]
  assert 'the chief ended (status 1, permanent error)' in ps.output()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_crash_loop_ends_with_the_permanent_status(digits, tmp_path):
  """Killed at the same step start after start (as a task killed for its
  memory is), the chief stops being restarted: its next start refuses with
  one line naming the step and the causes, status 1, so a TFJob, an indexed
  Job and the sbatch script all stop."""
  train_dir = tmp_path / 'run'
  argv = _argv(digits, train_dir, 5000, '--max_starts_without_progress=2',
               '--save_interval_steps=100000')
  for _ in range(2):
    task = launch.Task('train', argv, '', out=open(os.devnull, 'w'), cwd=ROOT)
    try:
      wait_for(lambda: _last_step(task) >= 10, 120, 'a step', task)
    finally:
      task.kill()
  starts = json.load(open(train_dir / faults.STARTS_FILE))['starts']
  assert [(s['step'], s['status']) for s in starts] == [(0, None), (0, None)]
  task = launch.Task('train', argv, '', out=open(os.devnull, 'w'), cwd=ROOT)
  assert task.wait(120) == 1, task.output()[-2000:]
  assert re.search(
      r'train_image_classifier: error: 2 starts in a row ended at step 0 '
      r'without a newer checkpoint \(--max_starts_without_progress=2; the '
      r'last: ended without a word \(killed: SIGKILL, out of memory, a lost '
      r'node\); ended without a word .*\); fix the cause, then delete '
      r'\S+starts\.json to train again\n', task.output()), task.output()[-2000:]


def test_a_start_that_moves_the_checkpoint_resets_the_count(tmp_path):
  log = faults.StartLog(str(tmp_path), 2)
  log.begin(0)
  log.end(143, 'stopped by SIGTERM at step 0; no checkpoint')
  faults.StartLog(str(tmp_path), 2).begin(0)  # killed: no end
  with pytest.raises(faults.CrashLoop) as raised:
    faults.StartLog(str(tmp_path), 2).begin(0)
  assert ('the last: status 143: stopped by SIGTERM at step 0; no checkpoint; '
          'ended without a word') in str(raised.value)
  faults.StartLog(str(tmp_path), 2).begin(50)  # progress: counted afresh
  faults.StartLog(str(tmp_path), 2).begin(50)
  with pytest.raises(faults.CrashLoop):
    faults.StartLog(str(tmp_path), 2).begin(50)
  faults.StartLog(str(tmp_path), 0).begin(50)  # 0: no limit


@pytest.mark.timeout(120)
def test_a_ps_stopped_by_sigterm_says_so_and_ends_with_143(tmp_path):
  jobs = launch.cluster_of(1, 1)
  argv = _argv(str(tmp_path), tmp_path / 'run', 10)
  with _Tasks([_task(argv, jobs, 'ps')]) as tasks:
    wait_for(lambda: cluster.answers(jobs['ps'][0]), 60, 'the ps to serve',
             tasks[0])
    tasks[0].process.send_signal(signal.SIGTERM)
    assert tasks[0].wait(30) == 143, tasks[0].output()[-2000:]
  assert tasks[0].output().splitlines()[-1] == (
      'ps:0 stopped by SIGTERM; a parameter server holds no files')
