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

from deployment import cluster
from deployment import launch
from deployment import model_deploy

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'tests'))
import collective_program as program  # noqa: E402

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
    config = model_deploy.DeploymentConfig(num_clones=clones,
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
  worst = max(float(np.max(np.abs(values[k] - reference[k])))
              for k in reference)
  assert worst <= tolerance, worst
  return worst


OPTIMIZERS = ['sgd', 'momentum', 'adam', 'rmsprop']


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
  print('batch norm: max |cluster - 4 clones| = %.2g' % _assert_same(
      saved, reference))
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
