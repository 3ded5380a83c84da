"""A cluster from Slurm's variables (deployment/slurm.py): srun's compressed
host lists and tasks-per-node counts, the same Cluster as the equivalent
TF_CONFIG, one line naming a bad variable, and a real job (1 ps + 2 workers
on 127.0.0.1) whose tasks get only Slurm's variables and train."""
import json
import os
import re

import pytest
import tensorflow as tf

from deployment import cluster
from deployment import launch
from deployment import slurm
import slurm_cluster  # tests/ is on sys.path (rootdir conftest)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, 'train_image_classifier.py')


@pytest.mark.parametrize('text, hosts', [
    ('node07', ['node07']),
    ('node[01-04,07]', ['node01', 'node02', 'node03', 'node04', 'node07']),
    ('a,b[1-2],c', ['a', 'b1', 'b2', 'c']),
    ('gpu[8-11]', ['gpu8', 'gpu9', 'gpu10', 'gpu11']),
    ('n[098-101]', ['n098', 'n099', 'n100', 'n101']),
    ('rack[1-2]-n[1,3]', ['rack1-n1', 'rack1-n3', 'rack2-n1', 'rack2-n3']),
    ('ib[1-2].cluster,login', ['ib1.cluster', 'ib2.cluster', 'login']),
    ('127.0.0.1', ['127.0.0.1']),
])
def test_hostlists_expand_in_order(text, hosts):
  assert slurm.expand_hostlist(text) == hosts


@pytest.mark.parametrize('text, counts', [
    ('4', [4]), ('2(x3),1', [2, 2, 2, 1]), ('1,3(x2)', [1, 3, 3]),
])
def test_tasks_per_node_expand(text, counts):
  assert slurm.expand_tasks_per_node(text) == counts


@pytest.mark.parametrize('text, message', [
    ('node[01-', "hostlist 'node[01-' has a '[' without its ']'"),
    ('node[3-1]', "hostlist 'node[3-1]': range '3-1' goes down"),
    ('node[a]', "hostlist 'node[a]': 'a' is not a number or a range a-b"),
    ('a,,b', "hostlist 'a,,b' has an empty entry"),
])
def test_a_bad_hostlist_is_named(text, message):
  with pytest.raises(ValueError) as raised:
    slurm.expand_hostlist(text)
  assert str(raised.value) == message


def _environ(rank, ntasks, nodes, per_node, step=True):
  prefix = 'SLURM_STEP_' if step else 'SLURM_'
  return {'SLURM_PROCID': str(rank), 'SLURM_NTASKS': str(ntasks),
          prefix + 'NODELIST' if step else 'SLURM_JOB_NODELIST': nodes,
          prefix + 'TASKS_PER_NODE': per_node}


def test_every_rank_gets_the_cluster_tf_config_would_give():
  # 7 tasks on node01..03 (2 each) and x (1); 1 ps; ports from 2222
  workers = ['node01:2223', 'node02:2222', 'node02:2223', 'node03:2222',
             'node03:2223', 'x:2222']
  jobs = {'worker': workers, 'ps': ['node01:2222']}
  tasks = [('ps', 0)] + [('worker', i) for i in range(6)]
  for rank, (kind, index) in enumerate(tasks):
    for step in (True, False):
      environ = _environ(rank, 7, 'node[01-03],x', '2(x3),1', step)
      found = cluster.Cluster.from_flags(num_ps_tasks=1, slurm_base_port=2222,
                                         environ=environ)
      expected = cluster.Cluster.from_tf_config(json.dumps(
          {'cluster': jobs, 'task': {'type': kind, 'index': index}}))
      assert repr(found) == repr(expected)
      assert (found.is_chief, found.num_ps, found.num_workers) == (
          rank == 1, 1, 6)


def test_tf_config_and_host_flags_come_before_slurm_and_the_flag_chooses():
  environ = dict(_environ(0, 2, 'n[1-2]', '1(x2)'),
                 TF_CONFIG=json.dumps({'cluster': {'worker': ['t:1']},
                                       'task': {'type': 'worker'}}))
  assert cluster.Cluster.from_flags(environ=environ).jobs == {
      'worker': ['t:1']}
  assert cluster.Cluster.from_flags(source='slurm', environ=environ).jobs == {
      'worker': ['n1:8888', 'n2:8888']}
  flags = cluster.Cluster.from_flags(worker_hosts='h:1', job_name='worker',
                                     environ=environ)
  assert flags.jobs == {'worker': ['h:1']}
  del environ['TF_CONFIG']
  assert cluster.Cluster.from_flags(environ=environ).jobs == {
      'worker': ['n1:8888', 'n2:8888']}
  assert not cluster.Cluster.from_flags(source='flags',
                                        environ=environ).distributed
  with pytest.raises(ValueError, match='--cluster_from=tf_config but '
                     'TF_CONFIG is not set'):
    cluster.Cluster.from_flags(source='tf_config', environ=environ)
  # one srun task alone trains locally
  assert not cluster.Cluster.from_flags(
      environ=_environ(0, 1, 'n1', '1')).distributed


@pytest.mark.parametrize('environ, message', [
    ({'SLURM_NTASKS': '2'}, 'SLURM_PROCID is not set (is this task started '
     'by srun?)'),
    (_environ(0, 3, 'n[1-2]', '1(x2)'), 'SLURM_STEP_TASKS_PER_NODE=1(x2) '
     'places 2 task(s) but SLURM_NTASKS=3'),
    (_environ(0, 2, 'n[1-3]', '1(x2)'), 'SLURM_STEP_NODELIST=n[1-3] lists 3 '
     'node(s) but SLURM_STEP_TASKS_PER_NODE=1(x2) counts tasks for 2'),
    (_environ(0, 2, 'n[1-2]', '2,x'), "tasks per node '2,x': 'x' is not N "
     'or N(xM)'),
])
def test_bad_slurm_variables_are_named(environ, message):
  with pytest.raises(ValueError) as raised:
    cluster.Cluster.from_flags(source='slurm', environ=environ)
  assert str(raised.value) == message


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_job_started_by_srun_variables_alone_trains(digits, tmp_path):
  """What `srun --ntasks=3 python train_image_classifier.py ...
  --num_ps_tasks=1` gives each task, on one node 127.0.0.1."""
  base = slurm_cluster.free_run_of_ports(3)
  train_dir = tmp_path / 'run'
  argv = [TRAIN, '--dataset_name=digits', '--dataset_dir=%s' % digits,
          '--model_name=lenet', '--train_dir=%s' % train_dir,
          '--max_number_of_steps=40', '--batch_size=32', '--optimizer=sgd',
          '--learning_rate=0.01', '--learning_rate_decay_type=fixed',
          '--num_ps_tasks=1', '--slurm_base_port=%d' % base,
          '--async_worker_warmup_steps=10', '--log_every_n_steps=10']
  environ = {k: v for k, v in os.environ.items()
             if not k.startswith('SLURM_') and k != 'TF_CONFIG'}
  tasks = []
  try:
    for rank in range(3):
      env = dict(environ, SLURM_JOB_ID='42', SLURM_NODEID='0',
                 SLURM_LOCALID=str(rank), **_environ(rank, 3, '127.0.0.1',
                                                     '3'))
      task = launch.Task('rank%d' % rank, argv, '', out=open(os.devnull, 'w'),
                         cwd=ROOT, env=env)
      tasks.append(task)
    ps, chief, worker = tasks
    assert chief.wait(300) == 0, chief.output()[-3000:]
    assert worker.wait(60) == 0, worker.output()[-3000:]
    assert ps.wait(30) == 0, ps.output()[-3000:]  # ends with the job
  finally:
    for task in tasks:
      task.stop()
  assert 'ps:0: the chief ended (status 0, done)' in ps.output()
  # asynchronous: the other worker's last steps may land after the chief's
  assert re.match(r'Trained to step 4\d; checkpoint %s/model.ckpt-4\d$' % (
      re.escape(str(train_dir))), chief.output().strip().splitlines()[-1])
  assert worker.output().strip().splitlines()[-1].startswith(
      'worker:1 ran ')
  assert tf.train.load_variable(str(train_dir), 'global_step') >= 40
