"""Distributed training on TensorFlow's runtime, on 127.0.0.1: the cluster
description, placement on parameter servers, async and sync training, an
evaluator, killed and restarted tasks, bad cluster input.

Every process is started through deployment.launch.Task and stopped by the
test; every wait is bounded in seconds."""
import os
import re
import socket
import time
import types

import numpy as np
import pytest
import tensorflow as tf

from deployment import cluster
from deployment import launch
from deployment import model_deploy
import chaos
from benchmarks import task_resources
from waiting import wait_for
import scripts

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(ROOT, 'tests', 'cluster_program.py')
TRAIN = os.path.join(ROOT, 'train_image_classifier.py')
EVAL = os.path.join(ROOT, 'eval_image_classifier.py')


# -- the cluster description --------------------------------------------------
def test_tf_config_with_a_chief():
  jobs = {'chief': ['h0:1'], 'worker': ['h1:1', 'h2:1'], 'ps': ['h3:1']}
  for task, index, chief, master in (('chief', 0, True, 'grpc://h0:1'),
                                     ('worker', 0, False, 'grpc://h1:1'),
                                     ('worker', 1, False, 'grpc://h2:1')):
    c = cluster.Cluster.from_tf_config(
        {'cluster': jobs, 'task': {'type': task, 'index': index}})
    assert (c.is_chief, c.master, c.num_workers, c.num_ps) == (
        chief, master, 3, 1)
    assert list(c.session_config().device_filters) == [
        '/job:ps', '/job:%s/task:%d' % (task, index)]
    assert c.deployment_args() == dict(replica_id=index, num_replicas=3,
                                       num_ps_tasks=1, worker_job_name=task,
                                       is_chief=chief)
  evaluator = cluster.Cluster.from_tf_config(
      {'cluster': jobs, 'task': {'type': 'evaluator', 'index': 0}})
  assert not evaluator.is_chief and evaluator.deployment_args() == {}


def test_tf_slim_host_flags_make_worker_0_the_chief():
  c = cluster.Cluster.from_flags('p:1', 'w0:1,w1:1', 'worker', 1)
  assert c.jobs == {'worker': ['w0:1', 'w1:1'], 'ps': ['p:1']}
  assert not c.is_chief and c.master == 'grpc://w1:1'
  assert cluster.Cluster.from_flags('p:1', 'w0:1,w1:1', 'worker', 0).is_chief
  ps = cluster.Cluster.from_flags('p:1', 'w0:1,w1:1', 'ps', 0)
  assert ps.task_type == 'ps' and ps.deployment_args() == {}


def test_master_with_counts_describes_servers_started_elsewhere(monkeypatch):
  monkeypatch.delenv('TF_CONFIG', raising=False)
  c = cluster.Cluster.from_flags(task=1, master='grpc://m:1', num_ps_tasks=2,
                                 worker_replicas=3)
  assert (c.distributed, c.is_chief, c.master) == (True, False, 'grpc://m:1')
  assert (c.num_ps, c.num_workers, c.jobs) == (2, 3, {})
  assert c.deployment_args() == dict(replica_id=1, num_replicas=3,
                                     num_ps_tasks=2, worker_job_name='worker',
                                     is_chief=False)


def test_no_cluster_is_local(monkeypatch):
  monkeypatch.delenv('TF_CONFIG', raising=False)
  c = cluster.Cluster.from_flags()
  assert not c.distributed and c.is_chief and c.master == ''
  assert c.deployment_args() == {}


@pytest.mark.parametrize('args, message', [
    (dict(ps_hosts='p:1', worker_hosts='w:1', job_name='worker', task=3),
     'task worker:3 is outside the cluster: worker has 1 task'),
    (dict(ps_hosts='p:1', worker_hosts='w:1', job_name='ps', task=0,
          num_ps_tasks=2), '--num_ps_tasks=2 but --ps_hosts lists 1'),
    (dict(ps_hosts='p', worker_hosts='w:1', job_name='worker'),
     "cluster address 'p' of job ps is not host:port"),
    (dict(ps_hosts='p:1', worker_hosts='w:1', job_name='chief'),
     "--job_name 'chief' is not ps or worker"),
    (dict(num_ps_tasks=1, worker_replicas=2),
     'need the cluster: give --ps_hosts and --worker_hosts'),
])
def test_bad_cluster_flags_name_the_fault(args, message, monkeypatch):
  monkeypatch.delenv('TF_CONFIG', raising=False)
  with pytest.raises(ValueError, match=re.escape(message)):
    cluster.Cluster.from_flags(**args)


def test_several_workers_without_ps_need_collective_all_reduce():
  task = cluster.Cluster.from_flags('', 'w0:1,w1:1', 'worker', 1)
  assert task.collective and not task.is_chief
  with pytest.raises(ValueError, match=re.escape(
      '2 workers need a ps task (--ps_hosts, or "ps" in TF_CONFIG) for the '
      'variables, or --variable_update=collective_all_reduce')):
    model_deploy.DeploymentConfig(exact=True).for_task(task)
  config = model_deploy.DeploymentConfig(exact=True,
      num_clones=2, clone_on_cpu=True,
      variable_update='collective_all_reduce').for_task(task)
  assert (config.all_reduce_group_size, config.is_chief) == (4, False)
  assert config.clone_device(1) == '/job:worker/task:1/device:CPU:1'
  session = task.session_config()
  assert list(session.device_filters) == ['/job:worker/task:1']
  assert (session.experimental.collective_group_leader ==
          '/job:worker/replica:0/task:0')
  with_ps = cluster.Cluster.from_flags('p:1', 'w0:1,w1:1', 'worker', 1)
  with pytest.raises(ValueError, match='runs without parameter servers'):
    model_deploy.DeploymentConfig(exact=True,
        variable_update='collective_all_reduce').for_task(with_ps)


def test_bad_tf_config_names_the_fault():
  with pytest.raises(ValueError, match='TF_CONFIG is not valid JSON'):
    cluster.Cluster.from_tf_config('{cluster')
  with pytest.raises(ValueError, match="task type 'ps' is not in the cluster"):
    cluster.Cluster.from_tf_config({'cluster': {'worker': ['w:1']},
                                    'task': {'type': 'ps', 'index': 0}})


class _ExitsOnItsSecondPoll(object):
  """A task running at the first poll and exited (0) at every later one."""
  name = 'worker:1'

  def __init__(self):
    self.polls = 0

  def poll(self):
    self.polls += 1
    return None if self.polls == 1 else 0

  def output(self):
    return 'Trained to step 30\n'


def test_a_wait_holds_when_the_task_fulfils_it_and_exits_between_two_reads():
  task = _ExitsOnItsSecondPoll()
  started = time.time()
  wait_for(lambda: task.poll() is not None, 5, 'the end', task)
  assert task.polls == 2 and time.time() - started < 1


def test_a_wait_fails_naming_the_task_that_exited_without_fulfilling_it():
  task = _ExitsOnItsSecondPoll()
  with pytest.raises(AssertionError, match='worker:1 exited \\(0\\) while '
                     'waiting for a checkpoint:\nTrained to step 30'):
    wait_for(lambda: False, 5, 'a checkpoint', task)


def test_a_wait_that_times_out_shows_what_each_task_printed():
  ps = types.SimpleNamespace(name='ps:0', poll=lambda: None,
                             output=lambda: 'serving at 127.0.0.1:2222\n')
  with pytest.raises(AssertionError, match='timed out after 0s waiting for '
                     'worker 1 to train\nps:0, still running:\nserving at '
                     '127.0.0.1:2222'):
    wait_for(lambda: False, 0, 'worker 1 to train', ps)


def test_a_port_in_use_names_the_task_and_the_port():
  taken = socket.socket()
  taken.bind(('', 0))
  taken.listen()
  port = taken.getsockname()[1]
  try:
    c = cluster.Cluster({'worker': ['127.0.0.1:%d' % port]}, 'worker', 0)
    with pytest.raises(ValueError, match='cannot start worker:0 at '
                       '127.0.0.1:%d: port %d is in use' % (port, port)):
      c.start_server()
  finally:
    taken.close()


def test_a_port_left_in_time_wait_by_a_killed_task_is_free_to_restart_on():
  # A killed task's server closes its connections first: its port keeps
  # TIME_WAIT sockets for a minute, which do not stop gRPC (SO_REUSEADDR)
  # and must not make the restarted task say the port is in use.
  listener = socket.socket()
  listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC
  listener.bind(('127.0.0.1', 0))
  listener.listen()
  port = listener.getsockname()[1]
  client = socket.create_connection(('127.0.0.1', port))
  accepted, _ = listener.accept()
  accepted.close()  # the server side closes first: TIME_WAIT on `port`
  client.close()
  listener.close()
  time.sleep(0.2)
  plain = socket.socket()
  with pytest.raises(OSError):  # what the probe without SO_REUSEADDR saw
    plain.bind(('', port))
  plain.close()
  c = cluster.Cluster({'worker': ['127.0.0.1:%d' % port]}, 'worker', 0)
  server = c.start_server()
  assert server.target == 'grpc://127.0.0.1:%d' % port


def test_script_prints_one_line_for_a_task_outside_the_cluster(tmp_path):
  result = scripts.run(
      TRAIN, '--ps_hosts=127.0.0.1:1', '--worker_hosts=127.0.0.1:2',
      '--job_name=worker', '--task=2', '--dataset_dir=%s' % tmp_path,
      '--train_dir=%s' % (tmp_path / 't'), timeout=120)
  assert result.returncode == 1
  errors = [l for l in result.stderr.splitlines()
            if l.startswith('train_image_classifier: error:')]
  assert errors == ['train_image_classifier: error: task worker:2 is outside '
                    'the cluster: worker has 1 task(s)']
  assert not (tmp_path / 't').exists()


# -- placement ------------------------------------------------------------------
def test_variables_on_the_ps_greedy_by_size_and_compute_on_the_worker():
  task = cluster.Cluster({'worker': ['w:1', 'w:2'], 'ps': ['p:1', 'p:2']},
                         'worker', 1)
  config = model_deploy.DeploymentConfig(exact=True, num_clones=2, clone_on_cpu=True
                                         ).for_task(task)
  with tf.Graph().as_default():
    with tf1.device(config.device_function(0)):
      big = tf1.get_variable('big', [1000])
      small1 = tf1.get_variable('small1', [10])
      small2 = tf1.get_variable('small2', [10])
      medium = tf1.get_variable('medium', [500])
      total = tf.reduce_sum(big) + tf.reduce_sum(medium)
    with tf1.device(config.device_function()):
      tf1.train.AdamOptimizer().minimize(total, var_list=[big, medium])
    ps = lambda v: tf.DeviceSpec.from_string(v.device).task
    # sizes 1000, 10, 10, 500: the small ones and the medium one go to the
    # lighter task.
    assert [ps(v) for v in (big, small1, small2, medium)] == [0, 1, 1, 1]
    assert all(v.device.startswith('/job:ps/') for v in tf1.global_variables())
    for slot in ('big/Adam', 'big/Adam_1'):
      assert ps(tf1.get_default_graph().get_operation_by_name(slot)) == 0
    assert total.op.device == '/job:worker/task:1/device:CPU:0'


# -- running clusters ----------------------------------------------------------
def _start(argv, jobs, kind, index=0):
  return launch.Task('%s:%d' % (kind, index), argv,
                     launch.tf_config(jobs, kind, index), out=open(os.devnull, 'w'),
                     cwd=ROOT)


def _checkpoint_values(model_dir, *names):
  path = tf.train.latest_checkpoint(str(model_dir))
  return [tf.train.load_variable(path, n) for n in names]


@pytest.mark.slow
@pytest.mark.parametrize('sync', [0, 2])
def test_each_global_step_applies_the_average_of_the_aggregated_gradients(
    tmp_path, sync):
  jobs = launch.cluster_of(1, 2)
  argv = [PROGRAM, str(tmp_path), '40', str(sync)]
  tasks = [_start(argv, jobs, 'ps')] + [_start(argv, jobs, 'worker', i)
                                        for i in range(2)]
  try:
    assert tasks[1].wait(180) == 0, tasks[1].output()[-3000:]
    assert tasks[2].wait(60) == 0, tasks[2].output()[-3000:]
  finally:
    for t in tasks:
      t.stop()
  step, w, contributions = _checkpoint_values(
      tmp_path, 'global_step', 'w', 'contributions')
  assert step >= 40
  assert w == -step  # one update per global step, of the average gradient (1)
  if sync:  # each update took `sync` workers' steps
    assert sync * step <= contributions <= sync * step + 2 * 2
  else:
    assert step <= contributions <= step + 2


@pytest.mark.slow
def test_an_evaluator_task_evaluates_the_chiefs_checkpoints(tmp_path):
  jobs = launch.cluster_of(1, 1)
  argv = [PROGRAM, str(tmp_path), '400', '0']
  judge = launch.Task('evaluator', argv, launch.tf_config(jobs, 'evaluator'),
                      out=open(os.devnull, 'w'), cwd=ROOT)
  tasks = [_start(argv, jobs, 'ps'), _start(argv, jobs, 'worker'), judge]
  try:
    assert tasks[1].wait(180) == 0, tasks[1].output()[-3000:]
    assert judge.wait(60) == 0, judge.output()[-3000:]
  finally:
    for t in tasks:
      t.stop()
  evaluated = [int(s) for s in re.findall(r'Evaluated .*model\.ckpt-(\d+)',
                                         judge.output())]
  assert len(evaluated) >= 2 and evaluated == sorted(evaluated)
  assert evaluated[-1] >= 400
  final = re.search(r'evaluated: global_step=(\d+) w=(\S+)', judge.output())
  assert float(final.group(2)) == -int(final.group(1))




def _train_argv(digits, train_dir, steps, *extra):
  return chaos.lenet_on_digits(digits, train_dir, steps,
                               '--log_every_n_steps=25',
                               '--save_interval_secs=2', *extra)


def _losses(output):
  return [float(x) for x in re.findall(r'loss = ([0-9.]+)', output)]


@pytest.mark.slow
def test_async_ps_and_two_workers_train_digits_and_only_the_chief_saves(
    digits, tmp_path, monkeypatch):
  """With eval_image_classifier.py --wait_for_checkpoints as the launcher's
  evaluator, following the chief's directory to the last step."""
  # The scripts keep TensorFlow's INFO lines ("Saving checkpoints ...") off
  # the terminal unless TF_CPP_MIN_LOG_LEVEL asks for them.
  monkeypatch.setenv('TF_CPP_MIN_LOG_LEVEL', '1')
  train_dir = tmp_path / 'run'
  evaluator = [EVAL, '--dataset_name=digits', '--dataset_dir=%s' % digits,
               '--dataset_split_name=validation', '--model_name=lenet',
               '--eval_image_size=%d' % chaos.IMAGE_SIZE,
               '--checkpoint_path=%s' % train_dir, '--wait_for_checkpoints',
               '--eval_interval_secs=1', '--stop_at_step=300']
  # Every task, the evaluator too, holds its threads and memory flat over
  # the run (benchmarks/task_resources.py).
  sampler = task_resources.sample_launcher(tmp_path / 'log',
                                          chaos.CHIEF_STEP)
  try:
    # worker:1 joins at step 30 (the default 100 would leave it idle in
    # the first third, where the sampler's window starts)
    status = launch.run(1, 2, _train_argv(digits, train_dir, 300,
                                          '--async_worker_warmup_steps=30'),
                        evaluator=evaluator, grace_secs=60,
                        out=open(tmp_path / 'log', 'w'))
  finally:
    sampler.stop()
  log = (tmp_path / 'log').read_text()
  judged = '\n'.join(l for l in log.splitlines() if l.startswith('[evaluator]'))
  assert status == 0, log[-2000:] + judged[-2000:]
  (step,) = _checkpoint_values(train_dir, 'global_step')
  assert step >= 300
  for name in ('worker:0', 'worker:1'):
    own = '\n'.join(l for l in log.splitlines() if l.startswith('[%s]' % name))
    losses = _losses(own)
    # Asynchronous: a worker may join when the shared model is trained, and
    # one batch's loss is noisy, so each worker's last loss is asked to be far
    # below chance (ln 10 = 2.30), not below its own first.
    assert len(losses) >= 2 and losses[-1] < 1.0, (name, losses)
    saves = 'Saving checkpoints' in own
    assert saves == (name == 'worker:0')
  steps = [int(s) for s in re.findall(r'Evaluated \S+ \(step (\d+)\)', judged)]
  assert steps and steps == sorted(steps) and 300 <= steps[-1] <= step, (
      judged[-3000:])
  accuracy = [float(a) for a in re.findall(r'Accuracy = ([\d.]+)', judged)]
  assert len(accuracy) == len(steps) and accuracy[-1] > 0.5, judged[-3000:]
  assert os.path.isfile(train_dir / 'eval' / ('confusion_matrix-%d.csv' % steps[-1]))
  print(sampler.table())
  problems = sampler.problems(
      300, names=['ps:0', 'worker:0', 'worker:1', 'evaluator'],
      max_rss_growth=task_resources.SHORT_RUN_RSS_GROWTH)
  assert not problems, '%s\n%s' % (problems, sampler.table())


@pytest.mark.slow
def test_sync_replicas_with_moving_averages_reach_the_last_step(digits,
                                                                tmp_path):
  train_dir = tmp_path / 'run'
  status = launch.run(
      1, 2, _train_argv(digits, train_dir, 60, '--sync_replicas',
                        '--replicas_to_aggregate=2',
                        '--moving_average_decay=0.99'),
      grace_secs=30, out=open(tmp_path / 'log', 'w'))
  log = (tmp_path / 'log').read_text()
  assert status == 0, log[-3000:]
  names = dict(tf.train.list_variables(str(train_dir)))
  assert tf.train.load_variable(str(train_dir), 'global_step') == 60
  assert 'LeNet/conv1/weights/ExponentialMovingAverage' in names
  # both workers stopped on their own (the chief released the waiting one),
  # each saying what it did: the chief trained and saved, worker 1 ran steps
  assert log.count('[worker:0] Trained to step 60; checkpoint ') == 1, log[-3000:]
  assert re.search(r'\[worker:1\] worker:1 ran \d+ training steps; the chief '
                   r'saves the checkpoints \(latest when this task stopped: ',
                   log), log[-3000:]
  # The chief's thread applying aggregated steps ends with the session
  # (TensorFlow's queue runner kept the chief 120 s in the coordinator's
  # grace period, then died with a CancelledError traceback).
  assert 'Traceback' not in log and 'Exception in thread' not in log, (
      log[-3000:])


@pytest.mark.slow
def test_killed_workers_and_chief_rejoin_and_the_job_finishes(digits,
                                                              tmp_path):
  """The job runs with no end in sight until the chief is restarted: the
  phases need steps trained, not a length, and a fixed length long enough
  for a slow machine's phases (1200 steps) was mostly trained after them.
  The restarted chief ends the job 200 steps after its checkpoint, and the
  ps and worker 1 end with it."""
  train_dir = tmp_path / 'run'
  jobs = launch.cluster_of(1, 2)
  argv = _train_argv(digits, train_dir, 10 ** 6)
  ps, chief, worker = (_start(argv, jobs, 'ps'), _start(argv, jobs, 'worker'),
                       _start(argv, jobs, 'worker', 1))
  tasks = [ps, chief, worker]
  steps = lambda task: len(_losses(task.output()))
  began = time.time()
  phase = lambda what: print('%5.1fs %s' % (time.time() - began, what))
  try:
    wait_for(lambda: steps(worker) >= 2, 180, 'worker 1 to train', ps, chief,
             worker)
    phase('worker 1 trains; killed')
    worker.kill()
    before = steps(chief)
    wait_for(lambda: steps(chief) >= before + 3, 120,
             'the chief to go on without worker 1', ps, chief)
    phase('the chief went on alone')
    worker = _start(argv, jobs, 'worker', 1)
    tasks.append(worker)
    wait_for(lambda: steps(worker) >= 2, 180, 'worker 1 to rejoin', ps, chief,
             worker)
    phase('worker 1 rejoined')
    wait_for(lambda: tf.train.latest_checkpoint(str(train_dir)), 60,
             'a checkpoint', chief)
    chief.kill()
    phase('the chief killed')
    last = tf.train.latest_checkpoint(str(train_dir))
    for name, _ in tf.train.list_variables(last):  # readable after SIGKILL
      tf.train.load_variable(last, name)
    end = int(last.rsplit('-', 1)[1]) + 200
    chief = _start(_train_argv(digits, train_dir, end), jobs, 'worker', 0)
    tasks.append(chief)
    assert chief.wait(300) == 0, chief.output()[-3000:]
    phase('the restarted chief trained to step %d' % end)
    assert steps(chief) >= 2, chief.output()[-3000:]
    restored = re.findall(r'Resuming from (\S+)', chief.output())
    # The checkpoint the killed chief left last, by name: in async training
    # the step in its name and its global_step may differ by the other
    # worker's step taken between reading the step and saving.
    assert restored and os.path.basename(restored[0]) == os.path.basename(
        last), (restored, last)
    trained = re.findall(r'Trained to step (\d+);', chief.output())
    assert trained and int(trained[0]) >= end, chief.output()[-3000:]
    assert worker.wait(60) == 0, worker.output()[-3000:]
    assert ps.wait(60) == 0, ps.output()[-3000:]
    assert tf.train.load_variable(str(train_dir), 'global_step') >= end
  finally:
    for t in tasks:
      t.stop()
