"""A real Slurm (Debian's slurm-wlm, one node on 127.0.0.1, started by
tests/slurm_cluster.py): Slurm's own host list expansions against
deployment/slurm.py's, the variables a real `srun` gives each task, and
docs/cluster.md's sbatch script run as written except for what one node
needs: the ps layout ends COMPLETED by itself; the collective layout with a
rank SIGKILLed is requeued by the script, resumes from its checkpoint and
ends COMPLETED. Every wait is bounded."""
import os
import re
import signal
import socket
import sys
import time

import pytest
import tensorflow as tf

from deployment import cluster
from deployment import slurm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'tests'))
import chaos  # noqa: E402  (LeNet's image size for the digits)
import slurm_cluster  # noqa: E402
from waiting import wait_for  # noqa: E402

DOCS = os.path.join(ROOT, 'docs', 'cluster.md')
STEP = re.compile(r'step (\d+)/\d+ \(\d+%\): loss')
TRAINED = re.compile(r'Trained to step (\d+); checkpoint (\S+)')
# A job's state once it has ended (scontrol show job keeps it MinJobAge).
ENDED = ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL',
         'OUT_OF_MEMORY', 'PREEMPTED', 'BOOT_FAIL', 'DEADLINE')
# How long every task may take to end once the chief printed its last line.
END_SECONDS = 60


@pytest.fixture(scope='module')
def slurm_node(tmp_path_factory):
  unavailable = slurm_cluster.why_unavailable()
  if unavailable:
    if unavailable.skip:
      pytest.skip(str(unavailable))
    pytest.fail(str(unavailable))
  node = slurm_cluster.SlurmCluster(tmp_path_factory.mktemp('slurm'))
  try:
    node.start()
    print('the private Slurm came up in %.1fs' % node.seconds_to_start)
    yield node
  finally:
    node.stop()


# -- host lists and srun's variables ------------------------------------------
HOSTLISTS = ['node07', 'node[01-04,07]', 'a,b[1-2],c', 'n[098-101]',
             'gpu[8-11]', 'rack[1-2]-n[1,3]', 'x[0-1]y[2-3]', 'n[01-3]',
             'n[1-2],n[2-3]', '10.0.0.[1-3]', 'n[8-010]']


@pytest.mark.timeout(120)
def test_slurms_own_expansions_equal_the_hostlist_parsers(slurm_node):
  for text in HOSTLISTS:
    hosts = slurm_node.run('scontrol', 'show', 'hostnames',
                           text).stdout.split()
    assert slurm.expand_hostlist(text) == hosts, text
    # and what Slurm compresses the hosts to expands back to them
    compressed = slurm_node.run('scontrol', 'show', 'hostlist',
                                ','.join(hosts)).stdout.strip()
    assert slurm.expand_hostlist(compressed) == slurm_node.run(
        'scontrol', 'show', 'hostnames', compressed).stdout.split(), (
            text, compressed)
    assert sorted(slurm.expand_hostlist(compressed)) == sorted(hosts)


@pytest.mark.timeout(120)
def test_a_real_srun_step_gives_one_ps_and_two_workers_on_the_node(
    slurm_node):
  names = ('SLURM_PROCID', 'SLURM_NTASKS', 'SLURM_STEP_NODELIST',
           'SLURM_STEP_TASKS_PER_NODE', 'SLURM_JOB_NODELIST',
           'SLURM_TASKS_PER_NODE')
  step = slurm_node.run(
      'srun', '--ntasks=3', 'bash', '-c',
      'echo "%s"' % ';'.join('$%s' % name for name in names), timeout=60)
  ranks = {}
  for line in step.stdout.split('\n'):
    if line.strip():
      environ = dict(zip(names, line.split(';')))
      ranks[int(environ['SLURM_PROCID'])] = environ
  assert sorted(ranks) == [0, 1, 2], step.stdout + step.stderr
  host = ranks[0]['SLURM_STEP_NODELIST']
  assert host == slurm_cluster.NODE
  assert socket.gethostbyname(host) == '127.0.0.1'  # a task finds the others
  base = slurm.DEFAULT_BASE_PORT
  jobs = {'ps': ['%s:%d' % (host, base)],
          'worker': ['%s:%d' % (host, base + 1), '%s:%d' % (host, base + 2)]}
  tasks = [('ps', 0), ('worker', 0), ('worker', 1)]
  for rank, environ in ranks.items():
    assert environ['SLURM_NTASKS'] == '3'
    # the step's variables, and the job's alone (what srun falls back on)
    job_only = {k: v for k, v in environ.items() if '_STEP_' not in k}
    for variables in (environ, job_only):
      found = cluster.Cluster.from_slurm(variables, num_ps=1, base_port=base)
      assert (found.jobs, found.task_type, found.task_id) == (
          (jobs,) + tasks[rank]), (rank, variables)
      assert found.is_chief == (rank == 1)


# -- docs/cluster.md's sbatch script ------------------------------------------
def _docs_sbatch_script():
  with open(DOCS) as f:
    text = f.read()
  assert '\n## Slurm\n' in text, 'docs/cluster.md has no "## Slurm" section'
  section = text.split('\n## Slurm\n', 1)[1].split('\n## ', 1)[0]
  scripts = [block for block in re.findall(r'```bash\n(.*?)```', section,
                                           re.S)
             if block.startswith('#!/bin/bash\n#SBATCH')]
  assert len(scripts) == 1, ('docs/cluster.md\'s "## Slurm" section has %d '
                             'sbatch scripts, not 1' % len(scripts))
  return scripts[0]


def _edited(script, replacements):
  """`script` with each (old, new) replaced; fails when the docs' script no
  longer contains an `old` exactly once."""
  for old, new in replacements:
    assert script.count(old) == 1, (
        "docs/cluster.md's sbatch script no longer contains %r once; update "
        'tests/test_slurm_real.py:\n%s' % (old, script))
    script = script.replace(old, new)
  return script


def _one_node_script(tmp_path, digits, train_dir, ntasks, steps, more=()):
  """The docs' script with only what one node (and a test) needs changed."""
  script = _edited(_docs_sbatch_script(), [
      ('#SBATCH --nodes=2\n', '#SBATCH --nodes=1\n'),
      ('#SBATCH --ntasks-per-node=2\n', '#SBATCH --ntasks=%d\n' % ntasks),
      # a port free on a machine shared with other tests
      ('--slurm_base_port=8888', '--slurm_base_port=%d' %
       slurm_cluster.free_run_of_ports(ntasks)),
      ('--dataset_dir=data/digits', '--dataset_dir=%s' % digits),
      ('--train_dir=runs/lenet_slurm', '--train_dir=%s' % train_dir),
      ('--max_number_of_steps=800', '--max_number_of_steps=%d' % steps),
      # the cluster tests' image size for the 8x8 digits (tests/chaos.py)
      ('--model_name=lenet', '--model_name=lenet --train_image_size=%d' %
       chaos.IMAGE_SIZE),
  ] + list(more))
  path = tmp_path / 'lenet.sbatch'
  path.write_text(script)
  return str(path)


def _read(path):
  try:
    with open(path, errors='replace') as f:
      return f.read()
  except OSError:
    return ''


def _training_tasks(slurm_node, job_id):
  """[(rank, pid, 'ps:0 (rank 0, pid 123)')] of the job's training tasks
  still running (srun's python processes, not srun itself)."""
  tasks = []
  for pid, (environ, argv) in slurm_node.job_processes(job_id).items():
    if 'SLURM_STEP_ID' not in environ or not argv or not (
        os.path.basename(argv[0]).startswith('python')):
      continue
    num_ps = [int(a.split('=', 1)[1]) for a in argv
              if a.startswith('--num_ps_tasks=')]
    _, kind, index = slurm.cluster_of(environ, (num_ps or [0])[-1])
    rank = int(environ['SLURM_PROCID'])
    tasks.append((rank, pid, '%s:%d (rank %d, pid %d)' % (kind, index, rank,
                                                          pid)))
  return sorted(tasks)


def _live_tasks(slurm_node, job_id):
  return ', '.join(name for _, _, name in _training_tasks(
      slurm_node, job_id)) or 'none'


@pytest.fixture
def submit(slurm_node):
  """sbatch(script, log) from the checkout (the script's `cd
  "$SLURM_SUBMIT_DIR" && . ./setup_env.sh`) -> job id; the jobs still
  running at the end (a failed test's) are cancelled, so that they do not
  hold the node's CPUs against the next test's job."""
  jobs = []

  def sbatch(script, log):
    jobs.append(slurm_node.submit(script, str(log), ROOT))
    return jobs[-1]

  yield sbatch
  for job_id in jobs:
    slurm_node.cancel(job_id)


class _Job(object):
  """A Slurm job as tests/waiting.py watches a task: it has ended once
  `scontrol show job` shows an ended state; its output is its log and, last
  (a failure shows the end), its state."""

  def __init__(self, slurm_node, job_id, log):
    self.name = 'job %s' % job_id
    self._node, self._id, self._log = slurm_node, job_id, log

  def poll(self):
    state = self._node.job(self._id)['JobState']
    return state if state in ENDED else None

  def output(self):
    job = self._node.job(self._id)
    return '%s\n(JobState=%s Reason=%s Restarts=%s)' % (
        _read(self._log), job['JobState'], job.get('Reason'),
        job.get('Restarts'))


def _wait_for(slurm_node, job_id, log, condition, seconds, what):
  wait_for(condition, seconds, what, _Job(slurm_node, job_id, log))


class _EndsOnItsSecondRead(object):
  """A job RUNNING at the first `scontrol show job` and COMPLETED after."""

  def __init__(self):
    self.reads = 0

  def job(self, job_id):
    self.reads += 1
    return {'JobId': job_id,
            'JobState': 'RUNNING' if self.reads == 1 else 'COMPLETED'}


def test_a_wait_for_the_end_holds_when_the_job_ends_between_two_reads(
    tmp_path):
  node = _EndsOnItsSecondRead()
  started = time.time()
  _wait_for(node, '3', tmp_path / 'slurm.out',
            lambda: node.job('3')['JobState'] in ENDED, 5, 'the job to end')
  assert node.reads == 2 and time.time() - started < 1


def test_a_wait_fails_naming_the_job_when_it_ends_without_the_condition(
    tmp_path):
  node = _EndsOnItsSecondRead()
  log = tmp_path / 'slurm.out'
  log.write_text('srun: error: localhost: task 1: Killed\n')
  with pytest.raises(AssertionError,
                     match=r'job 3 exited \(COMPLETED\) while waiting for a '
                           r'checkpoint:\nsrun: error: localhost: task 1: '
                           r'Killed\n\n\(JobState=COMPLETED Reason=None '
                           r'Restarts=None\)'):
    _wait_for(node, '3', log, lambda: False, 5, 'a checkpoint')


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_the_docs_script_ps_layout_ends_completed_by_itself(
    slurm_node, submit, digits, tmp_path):
  train_dir = tmp_path / 'run'
  log = tmp_path / 'slurm.out'
  script = _one_node_script(tmp_path, digits, train_dir, ntasks=3, steps=150,
                            more=[('--save_interval_secs=30',
                                   '--save_interval_secs=5')])
  submitted = time.time()
  job_id = submit(script, log)
  _wait_for(slurm_node, job_id, log, lambda: TRAINED.search(_read(log)), 240,
            "the chief's 'Trained to step'")
  trained_at = time.time()
  trained = TRAINED.search(_read(log))
  while slurm_node.job(job_id)['JobState'] not in ENDED:
    if time.time() > trained_at + END_SECONDS:
      pytest.fail(
          'job %s is still %s %.0fs after its log printed %r: every task of '
          'the ps layout should end when the chief ends (still running: '
          '%s)\n%s' % (job_id, slurm_node.job(job_id)['JobState'],
                       time.time() - trained_at, trained.group(0),
                       _live_tasks(slurm_node, job_id), _read(log)[-3000:]))
    time.sleep(0.5)
  ended_at = time.time()
  job = slurm_node.job(job_id)
  assert (job['JobState'], job['ExitCode']) == ('COMPLETED', '0:0'), (
      job, _read(log)[-3000:])
  # asynchronous: the other worker's last steps may land after the chief's
  assert int(trained.group(1)) >= 150
  print('job %s: %.0fs from submission to the end, %.1fs from %r to the '
        'end' % (job_id, ended_at - submitted, ended_at - trained_at,
                 trained.group(0)))


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_the_docs_script_collective_layout_requeues_a_killed_rank_and_resumes(
    slurm_node, submit, digits, tmp_path):
  train_dir = tmp_path / 'run'
  log = tmp_path / 'slurm.out'
  steps = 120
  script = _one_node_script(tmp_path, digits, train_dir, ntasks=2,
                            steps=steps, more=[
      ('--num_ps_tasks=1',
       '--num_ps_tasks=0 --variable_update=collective_all_reduce'),
      ('--save_interval_secs=30', '--save_interval_steps=20'),
      ('--log_every_n_steps=100', '--log_every_n_steps=10')])
  submitted = time.time()
  job_id = submit(script, log)
  steps_done = lambda: [int(s) for s in STEP.findall(_read(log))]
  _wait_for(slurm_node, job_id, log,
            lambda: tf.train.latest_checkpoint(str(train_dir)) and
            max(steps_done() or [0]) >= 40, 240,
            'training past its first checkpoint')
  rank1 = [pid for rank, pid, _ in _training_tasks(slurm_node, job_id)
           if rank == 1]
  assert len(rank1) == 1, _live_tasks(slurm_node, job_id)
  os.kill(rank1[0], signal.SIGKILL)
  killed = time.time()
  _wait_for(slurm_node, job_id, log,
            lambda: slurm_node.job(job_id)['Restarts'] == '1', 120,
            'the script to requeue the job')
  requeued = time.time()
  _wait_for(slurm_node, job_id, log,
            lambda: slurm_node.job(job_id)['JobState'] in ENDED, 240,
            'the job to run again and end')
  ended = time.time()
  job = slurm_node.job(job_id)
  output = _read(log)
  assert (job['JobState'], job['ExitCode'], job['Restarts']) == (
      'COMPLETED', '0:0', '1'), (job, output[-3000:])
  # one log (--open-mode=append): the first run, the killed rank, the second
  assert 'task 1: Killed' in output, output[-3000:]
  resumed = re.search(r'Resuming from %s/model\.ckpt-(\d+) \(step (\d+)\)' % (
      re.escape(str(train_dir))), output)
  assert resumed and resumed.group(1) == resumed.group(2), output[-3000:]
  assert 0 < int(resumed.group(1)) < steps
  assert 'Trained to step %d; checkpoint %s/model.ckpt-%d' % (
      steps, train_dir, steps) in output, output[-3000:]
  assert tf.train.load_variable(str(train_dir), 'global_step') == steps
  print('job %s: rank 1 killed %.0fs after submission; requeued %.1fs later; '
        'resumed from step %s; ended %.0fs after the kill' % (
            job_id, killed - submitted, requeued - killed, resumed.group(1),
            ended - killed))
