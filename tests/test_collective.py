"""Collective all-reduce across the workers of a cluster
(`variable_update='collective_all_reduce'`) on 127.0.0.1: every worker keeps
the variables, the gradients of every clone of every worker are summed by
CollectiveReduceV2 over TensorFlow's gRPC runtime, the chief initialises,
broadcasts and alone saves. Each task is a process started here; every wait
is bounded."""
import os
import re
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import zoo_errors
from deployment import cluster
from deployment import launch
from deployment import model_deploy

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'tests'))
import chaos  # noqa: E402  (LeNet's image size for the digits)
import collective_program as program  # noqa: E402
from waiting import wait_for  # noqa: E402

PROGRAM = os.path.join(ROOT, 'tests', 'collective_program.py')
TRAIN = os.path.join(ROOT, 'train_image_classifier.py')
STEPS = 3


def _jobs(chief):
  """A ps-less cluster of two training tasks: the tf.estimator layout
  (`chief` + `worker`) or TF-Slim's (worker 0 is the chief)."""
  ports = launch.free_ports(2)
  addresses = ['127.0.0.1:%d' % p for p in ports]
  if chief:
    return {'chief': addresses[:1], 'worker': addresses[1:]}
  return {'worker': addresses}


def _tasks(jobs):
  return [(kind, i) for kind in ('chief', 'worker')
          for i in range(len(jobs.get(kind, [])))]


def _run_program(tmp_path, optimizers, batch_norm=False, api='deploy',
                 chief=True):
  """Runs the program as every task; returns {optimizer: {task: values}}."""
  jobs = _jobs(chief)
  argv = [PROGRAM, str(tmp_path), str(STEPS), ','.join(optimizers),
          '1' if batch_norm else '0', api]
  tasks = [launch.Task('%s:%d' % t, argv, launch.tf_config(jobs, *t),
                       out=open(os.devnull, 'w'), cwd=ROOT)
           for t in _tasks(jobs)]
  try:
    for task in tasks:
      assert task.wait(300) == 0, task.output()[-3000:]
  finally:
    for task in tasks:
      task.stop()
  return {o: {'%s:%d' % (kind, i): dict(np.load(
      tmp_path / o / ('%s_%d.npz' % (kind, i)))) for kind, i in _tasks(jobs)}
          for o in optimizers}


def _saved(directory):
  return {n: tf.train.load_variable(str(directory), n)
          for n, _ in tf.train.list_variables(str(directory))}


def _reference(checkpoint, optimizer, batch_norm, clones=1):
  """`clones` clones in one process on the whole batch, from `checkpoint`."""
  images, labels = program.data()
  with tf.Graph().as_default():
    config = model_deploy.DeploymentConfig(exact=True, num_clones=clones,
                                           clone_on_cpu=clones > 1)
    deployed = model_deploy.deploy(
        config, lambda i, l: program.model(i, l, batch_norm),
        [tf.constant(images), tf.constant(labels)],
        optimizer=program.OPTIMIZERS[optimizer]())
    saver = tf1.train.Saver()
    session = tf1.ConfigProto(device_count={'CPU': max(clones, 1)})
    with tf1.Session(config=session) as sess:
      saver.restore(sess, checkpoint)
      for _ in range(STEPS):
        sess.run(deployed.train_op)
      variables = tf1.global_variables()
      return dict(zip([v.op.name for v in variables], sess.run(variables)))


def _assert_same(values, reference, tolerance=1e-5):
  assert sorted(values) == sorted(reference)
  errors = {k: float(np.max(np.abs(values[k] - reference[k])))
            for k in reference}
  worst = max(errors, key=errors.get)
  assert errors[worst] <= tolerance, (worst, errors[worst])
  return errors[worst]


OPTIMIZERS = ['sgd', 'momentum', 'adam', 'rmsprop']


def test_a_failed_collective_names_the_peer_that_is_down_else_says_what_it_saw():
  import socket
  from runner import sessions
  listening = socket.socket()
  listening.bind(('127.0.0.1', 0))
  listening.listen(64)
  up = '127.0.0.1:%d' % listening.getsockname()[1]
  down = '127.0.0.1:%d' % launch.free_ports(1)[0]
  deployment = model_deploy.DeploymentConfig(exact=True,
      num_replicas=3, replica_id=0, is_chief=True,
      variable_update='collective_all_reduce', collective_timeout_secs=30)
  try:
    everyone_up = cluster.Cluster({'worker': [up, up, up]}, 'worker', 0)
    assert everyone_up.unreachable_peers() == []
    assert sessions.collective_failure_message(
        deployment, everyone_up, 7, timed_out=True) == (
            'a collective all-reduce waited more than 30s for the other '
            'workers (last checkpoint: step 7): a worker stopped, hangs or '
            'has not started; this task stops (--collective_timeout_secs)')
    assert 'stopped or lost its connection' in sessions.collective_failure_message(
        deployment, everyone_up, 7, timed_out=False)
    # This task's own address is not probed; the peers that are down are named.
    one_down = cluster.Cluster({'worker': [down, up, down]}, 'worker', 0)
    for timed_out in (True, False):
      assert sessions.collective_failure_message(
          deployment, one_down, 7, timed_out) == (
              'worker:2 (%s) of the collective all-reduce is not running (its '
              'address refuses connections); this task stops too: restart '
              'every task to resume from the last checkpoint (step 7)' % down)
  finally:
    listening.close()


@pytest.mark.slow
def test_two_workers_of_two_clones_take_one_devices_step_on_the_whole_batch(
    tmp_path):
  """SGD, Momentum, Adam, RMSProp; the tf.estimator layout (chief + worker)."""
  runs = _run_program(tmp_path, OPTIMIZERS)
  for optimizer in OPTIMIZERS:
    directory = tmp_path / optimizer
    reference = _reference(str(directory / 'model.ckpt-0'), optimizer,
                           batch_norm=False)
    # The chief's checkpoint holds one model's names and one device's values.
    saved = _saved(directory)
    assert int(saved['global_step']) == STEPS
    assert not any(n.startswith('clone_') for n in saved)
    print('%s: max |cluster - one device| = %.2g' % (
        optimizer, _assert_same(saved, reference)))
    for values in runs[optimizer].values():  # every replica, the same sum
      _assert_same(values, runs[optimizer]['chief:0'], tolerance=0)


@pytest.mark.slow
def test_batch_norm_statistics_are_the_chiefs_first_clones_and_replicate_model_fn(
    tmp_path):
  """2 workers x 2 clones = one machine's 4 clones: the moving statistics are
  updated once per step from the first clone's slice, the chief's. Also
  replicate_model_fn in such a cluster (TF-Slim's layout: worker 0 is the
  chief) takes one device's step."""
  runs = _run_program(tmp_path / 'bn', ['momentum'], batch_norm=True,
                      chief=False)
  directory = tmp_path / 'bn' / 'momentum'
  reference = _reference(str(directory / 'model.ckpt-0'), 'momentum',
                         batch_norm=True, clones=4)
  saved = _saved(directory)
  assert 'conv/BatchNorm/moving_mean' in saved
  # Summed in another order (a ring over 4 devices, not one add_n), the
  # normalised gradients round differently: float32 rounding, not the rule.
  print('batch norm: max |cluster - 4 clones| = %.2g' % _assert_same(
      saved, reference, tolerance=1e-4))
  _assert_same(runs['momentum']['worker:0'], saved)
  runs = _run_program(tmp_path / 'rep', ['adam'], api='replicate',
                      chief=False)
  directory = tmp_path / 'rep' / 'adam'
  reference = _reference(str(directory / 'model.ckpt-0'), 'adam',
                         batch_norm=False)
  print('replicate_model_fn: max |cluster - one device| = %.2g' % (
      _assert_same(_saved(directory), reference)))
  _assert_same(runs['adam']['worker:1'], runs['adam']['worker:0'],
               tolerance=0)


# -- faults, through the script ----------------------------------------------
STEP = re.compile(r'step (\d+)/\d+ \(\d+%\): loss')


@pytest.mark.slow
def test_a_late_worker_joins_a_killed_one_stops_the_job_and_a_restart_resumes(
    digits, tmp_path):
  train_dir = tmp_path / 'run'
  jobs = _jobs(chief=False)  # TF-Slim's layout, as the launcher writes it
  argv = [TRAIN, '--dataset_name=digits', '--dataset_dir=%s' % digits,
          '--model_name=lenet', '--train_image_size=%d' % chaos.IMAGE_SIZE,
          '--train_dir=%s' % train_dir,
          '--optimizer=sgd', '--learning_rate=0.05',
          '--learning_rate_decay_type=fixed', '--batch_size=32',
          '--max_number_of_steps=300', '--log_every_n_steps=10',
          '--save_interval_secs=2', '--variable_update=collective_all_reduce',
          '--collective_timeout_secs=30']
  start = lambda i: launch.Task('worker:%d' % i, argv,
                                launch.tf_config(jobs, 'worker', i),
                                out=open(os.devnull, 'w'), cwd=ROOT)
  steps = lambda task: [int(s) for s in STEP.findall(task.output())]
  chief = start(0)
  tasks = [chief]
  try:
    time.sleep(10)  # the chief waits for the late worker at its broadcast
    assert chief.poll() is None and not steps(chief), chief.output()[-2000:]
    worker = start(1)
    tasks.append(worker)
    wait_for(lambda: steps(worker) and tf.train.latest_checkpoint(
        str(train_dir)) and steps(chief)[-1] >= 30, 240, 'training', chief, worker)
    worker.kill()
    killed = time.time()
    # a peer lost: the status says restart (zoo_errors' table)
    assert chief.wait(60) == zoo_errors.RETRYABLE, chief.output()[-3000:]
    print('the chief stopped %.1fs after the worker was killed' % (
        time.time() - killed))
    last = [l for l in chief.output().splitlines() if l.strip()][-1]
    saved = tf.train.load_variable(str(train_dir), 'global_step')
    assert 0 < saved < 300
    # Named whether TensorFlow saw the death as a lost connection or, when
    # the worker died between two all-reduces, as a timeout.
    assert last == ('train_image_classifier: error: worker:1 (%s) of the '
                    'collective all-reduce is not running (its address '
                    'refuses connections); this task stops too: restart '
                    'every task to resume from the last checkpoint (step %d)'
                    % (jobs['worker'][1], saved)), chief.output()[-3000:]
    chief, worker = start(0), start(1)
    tasks += [chief, worker]
    both = lambda: '%s\n--- worker:1 ---\n%s' % (chief.output()[-3000:],
                                                 worker.output()[-3000:])
    assert chief.wait(300) == 0, both()
    assert worker.wait(60) == 0, both()
  finally:
    for task in tasks:
      task.stop()
  assert 'Resuming from %s (step %d)' % (
      train_dir / ('model.ckpt-%d' % saved), saved) in chief.output()
  assert steps(chief)[0] > saved  # no step done twice
  assert tf.train.load_variable(str(train_dir), 'global_step') == 300
  last = [l for l in worker.output().splitlines() if l.strip()][-1]
  assert re.match(r'worker:1 ran \d+ training steps; the chief saves the '
                  r'checkpoints \(latest when this task stopped: ', last), last


@pytest.mark.slow
def test_a_hung_worker_stops_the_others_after_the_collective_timeout(
    digits, tmp_path):
  import signal
  jobs = _jobs(chief=True)
  argv = [TRAIN, '--dataset_name=digits', '--dataset_dir=%s' % digits,
          '--model_name=lenet', '--train_image_size=%d' % chaos.IMAGE_SIZE,
          '--train_dir=%s' % (tmp_path / 'run'),
          '--batch_size=32', '--max_number_of_steps=100000',
          '--log_every_n_steps=10', '--variable_update=collective_all_reduce',
          '--collective_timeout_secs=10']
  chief, worker = [launch.Task('%s:0' % kind, argv,
                               launch.tf_config(jobs, kind, 0),
                               out=open(os.devnull, 'w'), cwd=ROOT)
                   for kind in ('chief', 'worker')]
  try:
    wait_for(lambda: STEP.findall(chief.output()), 240, 'training', chief,
             worker)
    worker.process.send_signal(signal.SIGSTOP)
    stopped = time.time()
    assert chief.wait(120) == zoo_errors.RETRYABLE, chief.output()[-3000:]
    waited = time.time() - stopped
    print('the chief stopped %.1fs after the worker hung' % waited)
    assert waited >= 10
  finally:
    worker.process.send_signal(signal.SIGCONT)
    for task in (chief, worker):
      task.stop()
  last = [l for l in chief.output().splitlines() if l.strip()][-1]
  assert re.match(
      r'train_image_classifier: error: a collective all-reduce waited more '
      r'than 10s for the other workers \(last checkpoint: step \d+\): a '
      r'worker stopped, hangs or has not started; this task stops '
      r'\(--collective_timeout_secs\)$', last), last


def test_the_collective_chief_runs_the_scaffolds_init_fn_before_the_broadcast():
  """Fine-tuning in the collective layout: with no checkpoint in the
  train_dir, the chief initialises and then runs the Scaffold's init_fn
  (the restore of --checkpoint_path), with the session alone."""
  from runner import sessions
  with tf.Graph().as_default():
    weights = tf1.get_variable('w', initializer=tf.zeros([3]))
    published = np.array([1., 2., 3.], np.float32)
    scaffold = tf1.train.Scaffold(
        init_fn=lambda scaffold, session: weights.load(published, session))
    creator = sessions.CollectiveSessionCreator(
        scaffold, '', None, broadcast=tf.no_op(), is_chief=True,
        checkpoint=None)
    session = creator.create_session()
    np.testing.assert_array_equal(session.run(weights), published)
    session.close()
