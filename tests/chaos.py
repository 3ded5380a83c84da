"""Chaos: SIGKILL random tasks of a job at random moments; the job heals
itself, under the launcher (`python -m deployment.launch --max_restarts`) or
as Kubernetes runs it (`pods`: each task restarted alone at its address).

    python tests/chaos.py --layout=ps --kills=10            # the long form
    python tests/chaos.py --layout=collective --kills=10
    python tests/chaos.py --layout=pods --kills=10

For each layout (1 ps + 2 workers, asynchronous; 2 workers with collective
all-reduce) it trains LeNet on digits once undisturbed and once while
killing: each kill waits until the job has trained since its last start
(a step line of the chief), waits a random 0-`max_delay` seconds more, then
SIGKILLs a random task (ps, chief or worker; the chief at least once). It
checks that the launcher ends with status 0 at --max_number_of_steps, that
every checkpoint left reads back whole, that the latest checkpoint's step
never went down and each restart resumed from the last checkpoint, and that
the model evaluates within `tolerance` of the undisturbed one. It prints one
line of figures per layout; tests/test_chaos.py runs the short form in CI.

The `pods` layout is the ps layout without the launcher, the way a TFJob
with `restartPolicy: ExitCode` (deployment/k8s/tfjob-ps.yaml) runs it: every
task a process of its own from TF_CONFIG at a fixed address; a task that
ends with a retryable status (128 + a signal, or 200) is started again,
alone, at the same address. The first kill is the ps (it comes back empty:
the chief restores its newest checkpoint), the chief is killed at least
once; when the chief ends, the ps and the worker must end by themselves with
0 within 30 s.
"""
import argparse
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

TRAIN = os.path.join(ROOT, 'train_image_classifier.py')
CHIEF_STEP = re.compile(r'^\[worker:0\] step (\d+)/\d+ ', re.M)
RESTART = re.compile(r'^launch: restart (\d+)/\d+: (\S+) exited (\d+) '
                     r'\(([^)]*)\); resuming from step (\d+)$', re.M)
RESUMING = re.compile(r'^\[worker:0\] Resuming from \S+ \(step (\d+)\)$', re.M)
# A chief restarted after its last checkpoint: nothing left, and it says so.
FINISHED = re.compile(r'^\[worker:0\] \S+ is already at step (\d+) '
                      r'\(--max_number_of_steps=\d+\): nothing to train', re.M)
POD_RESTART = re.compile(r'^pods: restart (\d+): (\S+) exited (\d+) '
                         r'\(([^)]*)\); started again at (\S+)$', re.M)
RECOVERED = re.compile(
    r'^\[worker:0\] (\S+) \(\S+\) came back empty at step (\d+); '
    r'(?:restored \S*model\.ckpt-(\d+)|no checkpoint yet: initialising the '
    r'model)$', re.M)
STARTED = re.compile(r'^launch: started (.*)$', re.M)
ENDED = re.compile(r'^pods: (\S+) ended by itself with (\d+|none)$', re.M)


# The digits are 8x8 images: LeNet sees them as well at 16x16 (validation
# accuracy 0.975 after 300 steps, 0.969 at its default 28) and a step at
# batch 50 costs 22 CPU-ms instead of 57, most of what the cluster tests'
# tasks compute. A kill's random delay stands for steps: the delays below
# are 0.4 x those chosen at 28x28, so that kills land as many steps into a
# run as they did (CI's 150-step ps run, idle: its second kill resumed from
# step 111 with the old 3 s, from 62 with 1.2 s).
IMAGE_SIZE = 16


def lenet_on_digits(digits, train_dir, steps, *extra):
  """The training script's command of the cluster tests: LeNet on digits at
  IMAGE_SIZE, plain SGD at a fixed rate, then `extra` flags."""
  return [TRAIN, '--dataset_name=digits', '--dataset_dir=%s' % digits,
          '--model_name=lenet', '--train_dir=%s' % train_dir,
          '--train_image_size=%d' % IMAGE_SIZE,
          '--max_number_of_steps=%d' % steps, '--batch_size=50',
          '--optimizer=sgd', '--learning_rate=0.01',
          '--learning_rate_decay_type=fixed', '--weight_decay=0'] + list(extra)


def training_command(digits, train_dir, steps, layout):
  command = lenet_on_digits(digits, train_dir, steps, '--log_every_n_steps=10',
                            '--save_interval_steps=20',
                            '--async_worker_warmup_steps=30')
  if layout == 'collective':
    command += ['--variable_update=collective_all_reduce',
                '--collective_timeout_secs=60']
  return command


def launcher_argv(layout, max_restarts):
  argv = [sys.executable, '-m', 'deployment.launch', '--workers=2',
          '--max_restarts=%d' % max_restarts, '--stop_grace_secs=5',
          '--grace_secs=30']
  argv.append('--ps=1' if layout == 'ps' else '--ps=0')
  return argv


def _tasks(log):
  """{task name: pid} of the launcher's tasks now: its last `launch:
  started` line (a fork of its warm interpreter is known by no other name:
  its /proc environ and cmdline are the interpreter's)."""
  started = STARTED.findall(log)
  return {name: int(pid) for name, pid in
          re.findall(r'(\S+) \(pid (\d+)\)', started[-1])} if started else {}


class _CheckpointWatch(threading.Thread):
  """Records each new step of train_dir's latest checkpoint, as it changes."""

  def __init__(self, train_dir):
    super().__init__(daemon=True)
    self.train_dir, self.steps, self.done = train_dir, [], False

  def run(self):
    from deployment import launch
    while not self.done:
      step = launch.checkpoint_step(self.train_dir)
      if step and (not self.steps or self.steps[-1] != step):
        self.steps.append(step)
      time.sleep(0.1)


def run_job(digits, train_dir, steps, layout, kills=0, max_delay=1.6,
            seed=0, timeout=900, log_path=None):
  """Runs one launcher job (`pods`: run_pods), killing `kills` times; returns (status, log,
  kills made [(time, task, step)], checkpoint steps seen)."""
  if layout == 'pods':
    return run_pods(digits, train_dir, steps, kills, max_delay, seed, timeout,
                    log_path)
  rng = random.Random(seed)
  argv = launcher_argv(layout, max_restarts=kills + 2) + ['--'] + \
      training_command(digits, train_dir, steps, layout)
  log_path = log_path or os.path.join(os.path.dirname(str(train_dir)),
                                      os.path.basename(str(train_dir)) + '.log')
  log = open(log_path, 'w+')
  env = dict(os.environ, PYTHONUNBUFFERED='1')
  env.pop('TF_CONFIG', None)
  launcher = subprocess.Popen(argv, cwd=ROOT, stdout=log,
                              stderr=subprocess.STDOUT, env=env)
  watch = _CheckpointWatch(str(train_dir))
  watch.start()
  chief_kill = rng.randrange(kills) if kills else None
  made = []
  deadline = time.time() + timeout

  def text():
    with open(log_path) as f:
      return f.read()

  try:
    for k in range(kills):
      # trained since the last start: a chief step line after the last
      # restart line, beyond the step it resumed from
      while time.time() < deadline and launcher.poll() is None:
        now = text()
        since = now[now.rfind('launch: restart'):] if made else now
        if CHIEF_STEP.search(since):
          break
        time.sleep(0.2)
      time.sleep(rng.uniform(0, max_delay))
      tasks = _tasks(text())
      if launcher.poll() is not None or not tasks:
        break
      names = sorted(tasks)
      name = 'worker:0' if k == chief_kill and 'worker:0' in tasks else \
          rng.choice(names)
      try:
        os.kill(tasks[name], signal.SIGKILL)
      except ProcessLookupError:
        continue
      made.append((time.time(), name, watch.steps[-1] if watch.steps else 0))
      # wait for the launcher's restart line before the next kill
      while (time.time() < deadline and launcher.poll() is None and
             len(RESTART.findall(text())) < len(made)):
        time.sleep(0.2)
    status = launcher.wait(max(deadline - time.time(), 1))
  except subprocess.TimeoutExpired:
    launcher.send_signal(signal.SIGTERM)
    try:
      launcher.wait(60)
    except subprocess.TimeoutExpired:
      launcher.kill()
    status = None
  finally:
    if launcher.poll() is None:
      launcher.kill()
      launcher.wait()
    watch.done = True
    watch.join(2)
  return status, text(), made, watch.steps


def run_pods(digits, train_dir, steps, kills=0, max_delay=1.6, seed=0,
             timeout=900, log_path=None):
  """Runs 1 ps + 2 workers as Kubernetes' pods, killing `kills` times (the
  ps first, the chief at least once); returns what run_job returns. The log
  holds every task's lines (`[ps:0] ...`) and the supervisor's (`pods:
  ...`), like the launcher's."""
  from deployment import launch
  import zoo_errors
  rng = random.Random(seed)
  jobs = launch.cluster_of(1, 2)
  argv = training_command(digits, train_dir, steps, 'ps')
  log_path = log_path or str(train_dir) + '.log'
  log = open(log_path, 'w+')
  env = dict(os.environ)
  env.pop('TF_CONFIG', None)

  def start(kind, index):
    return launch.Task('%s:%d' % (kind, index), argv,
                       launch.tf_config(jobs, kind, index), out=log, cwd=ROOT,
                       env=env)

  def say(line):
    log.write('pods: %s\n' % line)
    log.flush()

  def text():
    with open(log_path) as f:
      return f.read()

  tasks = {'ps:0': start('ps', 0), 'worker:0': start('worker', 0),
           'worker:1': start('worker', 1)}
  watch = _CheckpointWatch(str(train_dir))
  watch.start()
  chief_kill = rng.randrange(1, kills) if kills > 1 else None
  made, restarts, deadline = [], 0, time.time() + timeout

  def supervise():
    """Starts again each task that ended retryable; the chief's status once
    it ended otherwise."""
    nonlocal restarts
    for name, task in sorted(tasks.items()):
      code = task.poll()
      if code is None:
        continue
      status = launch.shell_status(code)
      again = zoo_errors.is_retryable(status) and restarts < kills + 2
      if name == 'worker:0' and not again:
        return status
      if again:
        restarts += 1
        kind, index = name.split(':')
        tasks[name] = start(kind, int(index))
        say('restart %d: %s exited %d (%s); started again at %s' % (
            restarts, name, status, zoo_errors.status_meaning(status),
            jobs[kind][int(index)]))
    return None

  status = None
  try:
    for k in range(kills + 1):
      # k < kills: trained since the last restart, then a random delay;
      # meanwhile (and after the last kill, until the chief ends) supervise.
      ready = None
      while time.time() < deadline and status is None:
        status = supervise()
        now = text()
        started = list(POD_RESTART.finditer(now))
        if (k < kills and ready is None and len(started) >= len(made) and
            CHIEF_STEP.search(now[started[-1].end() if started else 0:])):
          ready = time.time() + rng.uniform(0, max_delay)
        if ready is not None and time.time() >= ready:
          break
        time.sleep(0.2)
      if k == kills or status is not None or time.time() >= deadline:
        break
      name = 'ps:0' if k == 0 else 'worker:0' if k == chief_kill else \
          rng.choice(sorted(tasks))
      tasks[name].process.kill()
      made.append((time.time(), name, watch.steps[-1] if watch.steps else 0))
    # The chief ended: every other task ends by itself within 30 s.
    for name in sorted(tasks):
      if name != 'worker:0':
        code = tasks[name].wait(30 if status is not None else 0)
        say('%s ended by itself with %s' % (
            name, 'none' if code is None else launch.shell_status(code)))
  finally:
    for task in tasks.values():
      task.kill()
    watch.done = True
    watch.join(2)
  return status, text(), made, watch.steps


def _pods_resumed(log, made):
  """The failures of the restarts of a `pods` run. After each restart the
  chief goes on from the newest checkpoint at the kill (or a later one): a
  restarted ps with one line naming it, a restarted chief resuming; then
  its first step comes after it (or, restarted at the last checkpoint, it
  says there is nothing to train). Once the chief ended, the ps and the
  worker ended by themselves with 0."""
  problems = []
  for match, (_, name, at_kill) in zip(POD_RESTART.finditer(log), made):
    segment = log[match.end():]
    if name == 'ps:0':
      found = RECOVERED.search(segment)
      restored = found and found.group(1) == 'ps:0' and int(
          found.group(3) or 0)
    elif name == 'worker:0':
      found = min(filter(None, (RESUMING.search(segment),
                                FINISHED.search(segment))),
                  key=lambda m: m.start(), default=None)
      restored = found and int(found.group(1))
    else:
      continue
    if found is None or restored < at_kill:
      problems.append('after %s was restarted (checkpoint at step %d) the '
                      'chief said %r' % (name, at_kill, found and
                                         found.group(0)))
      continue
    first = CHIEF_STEP.search(segment[found.end():])
    if first and int(first.group(1)) <= restored:
      problems.append('after restoring step %d the chief took step %s' % (
          restored, first.group(1)))
  for name, code in ENDED.findall(log):
    if code != '0':
      problems.append('%s did not end by itself with 0 after the chief '
                      '(%s)' % (name, code))
  return problems


def _launcher_resumed(log, layout):
  """The failures of the restarts of a launcher run. After each restart the
  chief resumes from the checkpoint the launcher named and its first step
  comes after it. (Asynchronous ps: a checkpoint named at step N may hold
  N + 1 or N + 2, the steps of the other worker in flight while it was
  saved.)"""
  problems = []
  for match in RESTART.finditer(log):
    said, segment = match.group(5), log[match.end():]
    resumed = RESUMING.search(segment)
    if int(said) and (not resumed or not int(said) <= int(
        resumed.group(1)) <= int(said) + (2 if layout == 'ps' else 0)):
      problems.append('a restart said step %s but the chief resumed from '
                      '%s' % (said, resumed.group(1) if resumed else 'none'))
    first = CHIEF_STEP.search(segment)
    if first and int(first.group(1)) <= int(said):
      problems.append('after a restart at step %s the chief took step %s' % (
          said, first.group(1)))
  return problems


def accuracy(digits, train_dir):
  """The validation accuracy of train_dir's latest checkpoint (at
  IMAGE_SIZE, as lenet_on_digits trains)."""
  import tensorflow as tf
  import tf_compat  # noqa: F401
  from classification import classifier
  from datasets import dataset_factory
  from deployment import cluster
  from runner import estimator as est
  tf.compat.v1.disable_eager_execution()
  dataset = dataset_factory.get_dataset('digits', 'validation', str(digits))
  params = classifier.ClassifierParams(model_name='lenet',
                                       num_classes=dataset.num_classes)
  estimator = est.Estimator(classifier.model_fn, str(train_dir),
                            est.RunConfig(cluster=cluster.Cluster()),
                            params={'classifier': params})
  return float(estimator.evaluate(classifier.make_input_fn(
      dataset, 'lenet', 120, is_training=False, image_size=IMAGE_SIZE,
      num_epochs=1))['Accuracy'])


def unreadable_checkpoints(train_dir):
  """[(prefix, why)] of the checkpoints left in train_dir that do not read
  back whole (every one, not only those the state file lists)."""
  import glob
  from runner import faults
  bad = []
  for index in glob.glob(os.path.join(str(train_dir), '*.index')):
    prefix = index[:-len('.index')]
    problem = faults.checkpoint_problem(prefix)
    if problem:
      bad.append((prefix, problem))
  return bad


def check(layout, status, log, made, steps_seen, train_dir, max_steps):
  """The failures of a chaos run, as lines (empty: it healed)."""
  import tensorflow as tf
  pods = layout == 'pods'
  problems = []
  if status != 0:
    problems.append('the %s ended with %s' % ('chief' if pods else 'launcher',
                                              status))
  restarts = (POD_RESTART if pods else RESTART).findall(log)
  if len(restarts) < len(made):
    problems.append('%d kill(s) but %d restart line(s)' % (len(made),
                                                           len(restarts)))
  final = int(tf.train.load_variable(str(train_dir), 'global_step'))
  # asynchronous ps: the other worker's steps in flight may land after the
  # chief's last one
  top = max_steps + (0 if layout == 'collective' else 2)
  if not max_steps <= final <= top:
    problems.append('the last checkpoint is at step %d, not %d' % (
        final, max_steps))
  if any(b < a for a, b in zip(steps_seen, steps_seen[1:])):
    problems.append('the latest checkpoint went back: %s' % steps_seen)
  problems += _pods_resumed(log, made) if pods else _launcher_resumed(log,
                                                                      layout)
  for prefix, why in unreadable_checkpoints(train_dir):
    problems.append('unreadable checkpoint %s: %s' % (prefix, why))
  return problems, final, restarts


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--layout',
                      choices=['ps', 'collective', 'pods', 'all'],
                      default='all')
  parser.add_argument('--kills', type=int, default=10)
  parser.add_argument('--steps', type=int, default=600)
  parser.add_argument('--max_delay', type=float, default=2.4)
  parser.add_argument('--seed', type=int, default=1)
  parser.add_argument('--tolerance', type=float, default=0.03)
  parser.add_argument('--work_dir', default='/tmp/slim_zoo_chaos')
  flags = parser.parse_args(argv)
  os.makedirs(flags.work_dir, exist_ok=True)
  digits = os.path.join(flags.work_dir, 'digits')
  if not os.path.isdir(digits):
    subprocess.run([sys.executable, os.path.join(ROOT,
                                                 'download_and_convert_data.py'),
                    '--dataset_name=digits', '--dataset_dir=%s' % digits],
                   check=True, cwd=ROOT, timeout=300)
  failed = False
  for layout in (['ps', 'collective', 'pods'] if flags.layout == 'all'
                 else [flags.layout]):
    results = {}
    for kind, kills in (('undisturbed', 0), ('chaos', flags.kills)):
      train_dir = os.path.join(flags.work_dir, '%s_%s_%d' % (
          layout, kind, int(time.time())))
      began = time.time()
      status, log, made, seen = run_job(
          digits, train_dir, flags.steps, layout, kills, flags.max_delay,
          flags.seed, timeout=600 + 120 * kills)
      problems, final, restarts = check(layout, status, log, made, seen,
                                        train_dir, flags.steps)
      results[kind] = accuracy(digits, train_dir)
      print('%s %s: %d kill(s) (%s), %d restart(s), status %s, final step '
            '%d, accuracy %.4f, %.0fs; log %s.log' % (
                layout, kind, len(made), ', '.join(n for _, n, _ in made),
                len(restarts), status, final, results[kind],
                time.time() - began, train_dir), flush=True)
      for line in (POD_RESTART if layout == 'pods' else RESTART).finditer(log):
        print('  ' + line.group(0))
      for problem in problems:
        print('  FAILED: ' + problem)
        failed = True
    gap = abs(results['chaos'] - results['undisturbed'])
    print('%s: accuracy %.4f under chaos, %.4f undisturbed (%.1f points '
          'apart; at most %.1f)' % (layout, results['chaos'],
                                    results['undisturbed'], 100 * gap,
                                    100 * flags.tolerance), flush=True)
    failed |= gap > flags.tolerance
  return 1 if failed else 0


if __name__ == '__main__':
  sys.exit(main())
