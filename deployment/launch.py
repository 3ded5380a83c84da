"""Runs a cluster on this machine: ps, workers and an evaluator as processes.

    python -m deployment.launch --ps=1 --workers=2 \\
        --evaluator="eval_image_classifier.py --dataset_name=digits ..." \\
        -- train_image_classifier.py --dataset_name=digits ...

    python -m deployment.launch --workers=2 \\
        -- train_image_classifier.py ... --variable_update=collective_all_reduce

(no parameter servers: the workers all-reduce their gradients).

Each task gets free ports on 127.0.0.1 and its TF_CONFIG (worker 0 is the
chief, TF-Slim's convention), runs the command after `--` (the evaluator its
own command) with this Python, and its output lines are prefixed with its
name (`[worker:1] ...`). The launcher ends when the chief ends: the other
workers get `--grace_secs` to finish their last step, the evaluator the same
to evaluate the last checkpoint, then everything still running is stopped.
Ctrl-C stops every task. The exit status is the chief's (or the evaluator's
when the chief succeeded and it failed).

A task whose script imports quiet_tensorflow first (the project's scripts)
starts as a fork of one interpreter that has imported TensorFlow
(deployment/warm_start.py): the same process a new Python would be, without
its 4-5 CPU-seconds of imports at each start and restart;
--fresh_processes starts every task as a new Python. One line at each start
names every task's pid (`ps` shows a fork as the warm interpreter):

    launch: started ps:0 (pid 4101), worker:0 (pid 4103), worker:1 (pid 4105)

--max_restarts=N heals the job: every task is watched, and when one ends
with a retryable status (zoo_errors: 128-255, a signal's 128 + N among them)
the others are stopped, every task starts again on new free ports and the
chief resumes from the last checkpoint, one line per restart:

    launch: restart 1/3: worker:1 exited 137 (killed); resuming from step 840

After N restarts it gives up with the last cause and its status; a
permanent status (1-127) never restarts. The evaluator, which follows the
train_dir, runs on across restarts.
"""
import argparse
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

from deployment import warm_start
import zoo_errors


# Seconds a stopped task gets to finish its step and save before SIGKILL.
STOP_GRACE_SECS = 30.0


def free_ports(count, host='127.0.0.1'):
  """`count` distinct ports that are free now on `host`."""
  sockets = []
  try:
    for _ in range(count):
      s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
      s.bind((host, 0))
      sockets.append(s)
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def cluster_of(num_ps, num_workers, host='127.0.0.1'):
  """{'worker': [...], 'ps': [...]} on free ports of `host`."""
  ports = free_ports(num_ps + num_workers, host)
  jobs = {'worker': ['%s:%d' % (host, p) for p in ports[:num_workers]]}
  if num_ps:
    jobs['ps'] = ['%s:%d' % (host, p) for p in ports[num_workers:]]
  return jobs


def tf_config(jobs, task_type, index=0):
  return json.dumps({'cluster': jobs,
                     'task': {'type': task_type, 'index': index}})


class Task(object):
  """One task's process, its output relayed line by line with a prefix: a
  fork of a warm interpreter when it can be one (deployment/warm_start.py),
  else (or with warm=False) a new Python."""

  def __init__(self, name, argv, config, out=None, cwd=None, env=None,
               warm=True):
    self.name = name
    environ = dict(os.environ if env is None else env, TF_CONFIG=config,
                   PYTHONUNBUFFERED='1')
    self.process = warm_start.start(name, argv, environ, cwd) if warm else None
    if self.process is None:
      self.process = subprocess.Popen(
          [sys.executable] + list(argv), env=environ, cwd=cwd,
          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
          errors='replace')
    self.lines = []
    self._out = out if out is not None else sys.stdout
    self._relay = threading.Thread(target=self._forward, daemon=True)
    self._relay.start()

  def _forward(self):
    for line in self.process.stdout:
      self.lines.append(line)
      self._out.write('[%s] %s' % (self.name, line))
      self._out.flush()

  def output(self):
    return ''.join(self.lines)

  def poll(self):
    return self.process.poll()

  def wait(self, timeout=None):
    try:
      code = self.process.wait(timeout)
    except subprocess.TimeoutExpired:
      return None
    self._relay.join(5)
    return code

  def stop(self, grace=5.0):
    """SIGTERM, then SIGKILL after `grace` seconds; returns the exit code."""
    if self.process.poll() is None:
      self.process.terminate()
      if self.wait(grace) is None:
        self.process.kill()
    return self.wait()

  def kill(self):
    """SIGKILL at once (a crash, for fault tests)."""
    if self.process.poll() is None:
      self.process.kill()
    return self.wait()


def train_dir_of(command):
  """The --train_dir of a training command, or None."""
  for i, word in enumerate(command):
    if word.startswith('--train_dir='):
      return word.split('=', 1)[1]
    if word == '--train_dir' and i + 1 < len(command):
      return command[i + 1]
  return None


def checkpoint_step(train_dir):
  """The step of the latest checkpoint the `checkpoint` state file of
  `train_dir` names (0: none). Read as text: the launcher imports no
  TensorFlow; the chief itself picks the newest readable one."""
  if not train_dir:
    return None
  try:
    with open(os.path.join(os.path.expanduser(train_dir), 'checkpoint')) as f:
      text = f.read()
  except OSError:
    return 0
  match = re.search(r'^model_checkpoint_path: "[^"]*-(\d+)"', text, re.M)
  return int(match.group(1)) if match else 0


def shell_status(code):
  """Popen's returncode as a shell's status: -N (signal N) is 128 + N."""
  return zoo_errors.signal_status(-code) if code is not None and code < 0 \
      else code


class _Job(object):
  """One start of the ps and the workers, on free ports."""

  def __init__(self, num_ps, num_workers, command, host, out, warm):
    self.jobs = cluster_of(num_ps, num_workers, host)
    self.ps = [Task('ps:%d' % i, command, tf_config(self.jobs, 'ps', i), out,
                    warm=warm) for i in range(num_ps)]
    self.workers = [Task('worker:%d' % i, command,
                         tf_config(self.jobs, 'worker', i), out, warm=warm)
                    for i in range(num_workers)]
    self.chief = self.workers[0]

  @property
  def tasks(self):
    return self.ps + self.workers

  def failure(self):
    """(task, status) of a task that ended with an error, or None. Among
    several, one killed by a signal first: the others' errors (a peer lost)
    follow from it."""
    failed = [(t, shell_status(t.poll())) for t in self.tasks
              if t.poll() not in (None, 0)]
    failed.sort(key=lambda f: f[1] == zoo_errors.RETRYABLE)
    return failed[0] if failed else None

  def stop(self, grace):
    """The workers first, all at once, while the ps still serve (on SIGTERM
    the chief saves a checkpoint of variables that live on the ps); then
    the ps."""
    for task in self.workers:
      if task.poll() is None:
        task.process.terminate()
    for task in self.workers:
      task.stop(grace=grace)
    for task in self.tasks:
      task.stop()


def run(num_ps, num_workers, command, evaluator=None, host='127.0.0.1',
        grace_secs=60.0, out=None, max_restarts=0,
        stop_grace_secs=STOP_GRACE_SECS, warm=True):
  """Starts the cluster, waits for the chief, stops the rest; returns the
  exit status (see the module docstring). With `max_restarts`, a task that
  ends with a retryable status (zoo_errors.is_retryable: a signal, a peer
  lost) makes every task stop and start again on new ports, at most
  `max_restarts` times; they resume from the last checkpoint. With `warm`,
  tasks are forks of a warm interpreter where they can be (Task)."""
  say = out if out is not None else sys.stdout
  train_dir = train_dir_of(command)
  job = _Job(num_ps, num_workers, command, host, out, warm)
  judge = None
  if evaluator:
    judge = Task('evaluator', evaluator, tf_config(job.jobs, 'evaluator'), out,
                 warm=warm)

  def stop_all(*_):
    # Only raise: the handler runs inside the main thread's Popen.wait,
    # whose lock a wait from here would wait on forever; the except clauses
    # below stop the tasks in order.
    raise SystemExit(130)

  def line(text):
    say.write('launch: %s\n' % text)
    say.flush()

  def started(tasks):
    line('started ' + ', '.join('%s (pid %d)' % (t.name, t.process.pid)
                                for t in tasks))

  previous = signal.signal(signal.SIGTERM, stop_all)
  started(job.tasks + ([judge] if judge else []))
  restarts = 0
  try:
    while True:
      if max_restarts:
        # Every task is watched: the first one that fails stops the job.
        while job.chief.poll() is None and job.failure() is None:
          time.sleep(0.2)
        failed = job.failure()
        if job.chief.poll() == 0 or failed is None:
          failed = None
      else:
        job.chief.wait()
        failed = None
      status = shell_status(job.chief.wait(0)) if failed is None else None
      if failed is None and (status == 0 or not max_restarts):
        break  # the chief ended: done, or (no restarts) its status is the job's
      task, code = failed if failed is not None else (job.chief, status)
      cause = '%s exited %d (%s)' % (task.name, code,
                                     zoo_errors.status_meaning(code))
      if not zoo_errors.is_retryable(code):
        job.stop(stop_grace_secs)
        line('%s; not restarted (a permanent error)' % cause)
        return code
      if restarts >= max_restarts:
        job.stop(stop_grace_secs)
        line('giving up after %d restart(s): %s' % (restarts, cause))
        return code
      job.stop(stop_grace_secs)
      restarts += 1
      step = checkpoint_step(train_dir)
      line('restart %d/%d: %s; resuming from %s' % (
          restarts, max_restarts, cause,
          'step %d' % step if step is not None else 'the last checkpoint'))
      job = _Job(num_ps, num_workers, command, host, out, warm)
      started(job.tasks)
    deadline = time.time() + grace_secs
    for task in job.workers[1:] + ([judge] if judge else []):
      if task.wait(max(deadline - time.time(), 0.1)) is None:
        task.stop()
    for task in job.tasks:
      task.stop()
    if status == 0 and judge is not None and judge.poll():
      status = shell_status(judge.poll())
    return status
  except KeyboardInterrupt:
    job.stop(stop_grace_secs)
    if judge is not None:
      judge.stop(grace=stop_grace_secs)
    return 130
  except SystemExit:
    job.stop(stop_grace_secs)
    if judge is not None:
      judge.stop(grace=stop_grace_secs)
    raise
  finally:
    signal.signal(signal.SIGTERM, previous)
    for task in job.tasks + ([judge] if judge else []):
      task.stop()


def main(argv=None):
  argv = list(sys.argv[1:] if argv is None else argv)
  if '--' not in argv and not {'-h', '--help'} & set(argv):
    print('launch: error: give the training command after --, e.g. -- '
          'train_image_classifier.py --dataset_name=digits ...',
          file=sys.stderr)
    return 2
  split = argv.index('--') if '--' in argv else len(argv)
  parser = argparse.ArgumentParser(
      prog='python -m deployment.launch',
      description='Runs ps, workers and an evaluator on this machine.')
  parser.add_argument('--ps', type=int, default=None,
                      help='parameter servers (default: 1, or 0 when the '
                      'command has --variable_update=collective_all_reduce)')
  parser.add_argument('--workers', type=int, default=2,
                      help='workers (worker 0 is the chief)')
  parser.add_argument('--evaluator', default=None,
                      help='the evaluator\'s command (a script and flags)')
  parser.add_argument('--host', default='127.0.0.1')
  parser.add_argument('--grace_secs', type=float, default=60.0,
                      help='time the others get to finish after the chief')
  parser.add_argument('--max_restarts', type=int, default=0,
                      help='restart every task (on new ports) when one ends '
                      'with a retryable status (128-255: killed, stopped, a '
                      'peer lost), at most this many times; they resume from '
                      'the last checkpoint. 0: the launcher ends with the '
                      'chief')
  parser.add_argument('--stop_grace_secs', type=float,
                      default=STOP_GRACE_SECS,
                      help='time a stopped task gets to save before SIGKILL')
  parser.add_argument('--fresh_processes', action='store_true',
                      help='start every task as a new Python, not as a fork '
                      'of one that has imported TensorFlow (see '
                      'deployment/warm_start.py)')
  flags = parser.parse_args(argv[:split])
  command = argv[split + 1:]
  collective = any(a in ('--variable_update=collective_all_reduce',)
                   for a in command) or any(
                       a == '--variable_update' and b == 'collective_all_reduce'
                       for a, b in zip(command, command[1:]))
  if flags.ps is None:
    flags.ps = 0 if collective else 1
  if collective and flags.ps:
    parser.error('--variable_update=collective_all_reduce runs without '
                 'parameter servers, got --ps=%d' % flags.ps)
  if flags.workers < 1:
    parser.error('--workers must be at least 1, got %d' % flags.workers)
  if flags.ps < 0:
    parser.error('--ps must be at least 0, got %d' % flags.ps)
  if flags.workers > 1 and flags.ps < 1 and not collective:
    parser.error('--workers=%d needs --ps >= 1 (the variables live on the '
                 'parameter servers), or --variable_update='
                 'collective_all_reduce in the command' % flags.workers)
  if not command:
    parser.error('the training command after -- is empty')
  evaluator = shlex.split(flags.evaluator) if flags.evaluator else None
  if flags.max_restarts < 0:
    parser.error('--max_restarts must be at least 0, got %d' %
                 flags.max_restarts)
  return run(flags.ps, flags.workers, command, evaluator, flags.host,
             flags.grace_secs, max_restarts=flags.max_restarts,
             stop_grace_secs=flags.stop_grace_secs,
             warm=not flags.fresh_processes)


if __name__ == '__main__':
  sys.exit(main())
