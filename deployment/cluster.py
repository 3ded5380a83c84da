"""The cluster a task belongs to, read from TF_CONFIG, TF-Slim's flags or
Slurm's variables (deployment/slurm.py).

Distributed training runs on TensorFlow's own runtime (between-graph
replication, as TF-Slim and tf.estimator did it): every task starts a
`tf.compat.v1.train.Server`; `ps` tasks only serve; each training task
(the `chief`, or worker 0 when there is no chief, and the other workers)
builds its own graph, with variables on the parameter servers and its
`model_deploy` clones on its local devices, and trains through a
`MonitoredTrainingSession` on its own server. The chief initialises or
restores the variables and writes checkpoints and summaries; the other
workers wait until the variables are ready. A cluster without `ps` tasks
trains with collective all-reduce instead (--variable_update=
collective_all_reduce): every worker keeps the variables and the chief's
values are broadcast when the job starts (see model_deploy). An `evaluator` (TF_CONFIG only;
not part of the cluster) evaluates the chief's checkpoints from the shared
model directory.

Two ways to describe the same cluster:

    TF_CONFIG='{"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222"],
                            "ps": ["host2:2222"]},
                "task": {"type": "worker", "index": 0}}'

    --ps_hosts=host2:2222 --worker_hosts=host0:2222,host1:2222 \
        --job_name=worker --task=1        (worker 0 is the chief)
"""
import json
import os
import socket
import threading
import time

import tf_compat  # noqa: F401  (first: tf-slim on TF 2.21)
import tensorflow as tf

import zoo_errors
from deployment import slurm

tf1 = tf.compat.v1

TRAINING_JOBS = ('chief', 'worker')
# Where a task reads its cluster from (--cluster_from).
SOURCES = ('auto', 'flags', 'tf_config', 'slurm')
_KNOWN_JOBS = ('chief', 'worker', 'ps', 'evaluator')
_servers = {}  # (job, task, address) -> the Server this process started


class CannotStart(zoo_errors.Retryable, ValueError):
  """A task's server cannot start (its port is taken): another start, on
  free ports or once the port is released, fixes it."""


class Cluster(object):
  """One task's view of its cluster.

  Args:
    jobs: {'chief': [address], 'worker': [...], 'ps': [...]}; empty: local.
    task_type: this task's job ('chief', 'worker', 'ps' or 'evaluator').
    task_id: this task's index in its job.
    master: TF-Slim's --master: a session target for a graph whose servers
      are started elsewhere (used only when `jobs` is empty).
    external_counts: (ps tasks, workers) of that cluster started elsewhere
      (--num_ps_tasks, --worker_replicas), which `jobs` cannot tell.
  """

  def __init__(self, jobs=None, task_type=None, task_id=0, master='',
               external_counts=None):
    jobs = {k: list(v) for k, v in (jobs or {}).items() if v}
    for job, addresses in jobs.items():
      if job not in _KNOWN_JOBS or job == 'evaluator':
        raise ValueError("cluster job '%s' is not one of chief, worker, ps "
                         '(the evaluator is a task, not a cluster job)' % job)
      for address in addresses:
        _check_address(job, address)
    if jobs and not any(j in jobs for j in TRAINING_JOBS):
      raise ValueError('the cluster has no chief or worker task')
    if len(jobs.get('chief', [])) > 1:
      raise ValueError('the cluster has %d chief tasks; it needs one' %
                       len(jobs['chief']))
    task_type = task_type or ('worker' if not jobs else None)
    if task_type not in _KNOWN_JOBS:
      raise ValueError("task type '%s' is not one of %s" % (
          task_type, ', '.join(_KNOWN_JOBS)))
    task_id = int(task_id)
    if jobs and task_type != 'evaluator':
      if task_type not in jobs:
        raise ValueError("task type '%s' is not in the cluster (jobs: %s)" % (
            task_type, ', '.join(sorted(jobs))))
      if not 0 <= task_id < len(jobs[task_type]):
        raise ValueError('task %s:%d is outside the cluster: %s has %d '
                         'task(s)' % (task_type, task_id, task_type,
                                      len(jobs[task_type])))
    self.jobs = jobs
    self.task_type = task_type
    self.task_id = task_id
    self._master = master or ''
    self._counts = tuple(external_counts) if external_counts else None

  # -- reading ---------------------------------------------------------------
  @classmethod
  def from_tf_config(cls, tf_config=None):
    """From TF_CONFIG (a JSON string or dict; default: the environment)."""
    if tf_config is None:
      tf_config = os.environ.get('TF_CONFIG') or '{}'
    if isinstance(tf_config, str):
      try:
        tf_config = json.loads(tf_config)
      except ValueError as e:
        raise ValueError('TF_CONFIG is not valid JSON: %s' % e)
    if not isinstance(tf_config, dict):
      raise ValueError('TF_CONFIG must be a JSON object, got %r' % tf_config)
    task = tf_config.get('task') or {}
    return cls(tf_config.get('cluster') or {}, task.get('type'),
               task.get('index', 0))

  @classmethod
  def from_slurm(cls, environ=None, num_ps=0, base_port=None):
    """From the variables srun gives each task (deployment/slurm.py): the
    first `num_ps` ranks serve as ps, the others are the workers in rank
    order, each on `base_port` + its place among its node's tasks."""
    jobs, task_type, task_id = slurm.cluster_of(
        os.environ if environ is None else environ, num_ps,
        slurm.DEFAULT_BASE_PORT if base_port is None else base_port)
    return cls(jobs, task_type, task_id)

  @classmethod
  def from_flags(cls, ps_hosts='', worker_hosts='', job_name='', task=0,
                 master='', num_ps_tasks=0, worker_replicas=1,
                 source='auto', slurm_base_port=None, environ=None):
    """From TF-Slim's flags: explicit hosts (--ps_hosts, --worker_hosts,
    --job_name, --task), or else TF_CONFIG, or else Slurm's variables (a task
    of an srun step of several tasks; --num_ps_tasks of them serve as ps),
    or else --master with --num_ps_tasks/--worker_replicas for servers
    started elsewhere (TF-Slim's own way). The counts, when also given, must
    agree with the hosts. `source` (--cluster_from) picks one of them
    instead: 'flags', 'tf_config' or 'slurm' ('auto': that order)."""
    environ = os.environ if environ is None else environ
    if source not in SOURCES:
      raise ValueError("--cluster_from '%s' is not one of %s" % (
          source, ', '.join(SOURCES)))
    if source == 'tf_config':
      if not environ.get('TF_CONFIG'):
        raise ValueError('--cluster_from=tf_config but TF_CONFIG is not set')
      return cls.from_tf_config(environ['TF_CONFIG'])
    ps = _split_hosts(ps_hosts)
    workers = _split_hosts(worker_hosts)
    slurm_wanted = source == 'slurm' or (
        source == 'auto' and not (ps or workers or job_name) and
        not environ.get('TF_CONFIG') and slurm.is_slurm_task(environ))
    if slurm_wanted:
      found = cls.from_slurm(environ, num_ps_tasks, slurm_base_port)
      if worker_replicas > 1 and worker_replicas != found.num_workers:
        raise ValueError('--worker_replicas=%d but Slurm has %d worker '
                         'task(s) (%d tasks, --num_ps_tasks=%d)' % (
                             worker_replicas, found.num_workers,
                             found.num_workers + found.num_ps, num_ps_tasks))
      return found
    if ps or workers or job_name:
      if not workers:
        raise ValueError('--worker_hosts is required with --ps_hosts or '
                         '--job_name')
      if not job_name:
        raise ValueError('--job_name (ps or worker) is required with '
                         '--worker_hosts')
      if job_name not in ('ps', 'worker'):
        raise ValueError("--job_name '%s' is not ps or worker" % job_name)
      if num_ps_tasks and num_ps_tasks != len(ps):
        raise ValueError('--num_ps_tasks=%d but --ps_hosts lists %d '
                         'address(es)' % (num_ps_tasks, len(ps)))
      if worker_replicas > 1 and worker_replicas != len(workers):
        raise ValueError('--worker_replicas=%d but --worker_hosts lists %d '
                         'address(es)' % (worker_replicas, len(workers)))
      return cls({'worker': workers, 'ps': ps}, job_name, task)
    if source == 'auto' and environ.get('TF_CONFIG'):
      return cls.from_tf_config(environ['TF_CONFIG'])
    if num_ps_tasks > 0 or worker_replicas > 1:
      if not master:
        raise ValueError(
            '--num_ps_tasks/--worker_replicas need the cluster: give '
            '--ps_hosts and --worker_hosts (or TF_CONFIG), or --master for '
            'servers started elsewhere')
      if num_ps_tasks < 1:
        raise ValueError('--worker_replicas=%d needs --num_ps_tasks >= 1' %
                         worker_replicas)
      if not 0 <= task < worker_replicas:
        raise ValueError('--task=%d is outside --worker_replicas=%d' % (
            task, worker_replicas))
      return cls(master=master, task_id=task,
                 external_counts=(num_ps_tasks, worker_replicas))
    return cls(master=master)

  # -- what it says ----------------------------------------------------------
  @property
  def distributed(self):
    return bool(self.jobs) or self._counts is not None

  @property
  def is_training_task(self):
    return self.task_type in TRAINING_JOBS

  @property
  def is_chief(self):
    if self.task_type == 'chief':
      return True
    return (self.task_type == 'worker' and self.task_id == 0 and
            'chief' not in self.jobs)

  @property
  def num_ps(self):
    return self._counts[0] if self._counts else len(self.jobs.get('ps', []))

  @property
  def num_workers(self):
    """Training tasks: the chief and the workers."""
    if self._counts:
      return self._counts[1]
    return sum(len(self.jobs.get(j, [])) for j in TRAINING_JOBS) or 1

  @property
  def spec(self):
    return tf1.train.ClusterSpec(self.jobs)

  @property
  def master(self):
    """The session target of this task ('' for local)."""
    if self.jobs and self.task_type in self.jobs:
      return 'grpc://' + self.jobs[self.task_type][self.task_id]
    return self._master

  def deployment_args(self):
    """model_deploy.DeploymentConfig's cluster arguments for this task."""
    if not self.distributed or not self.is_training_task:
      return {}
    return dict(replica_id=self.task_id, num_replicas=self.num_workers,
                num_ps_tasks=self.num_ps, worker_job_name=self.task_type,
                is_chief=self.is_chief)

  @property
  def collective(self):
    """Several training tasks and no parameter servers: they train with
    collective all-reduce (model_deploy's collective_all_reduce)."""
    return bool(self.jobs) and not self.num_ps and self.num_workers > 1

  @property
  def chief_address(self):
    job = 'chief' if 'chief' in self.jobs else 'worker'
    return self.jobs[job][0] if self.jobs.get(job) else None

  @property
  def chief_device(self):
    """'/job:chief/replica:0/task:0', or worker 0's without a chief."""
    job = 'chief' if 'chief' in self.jobs else 'worker'
    return '/job:%s/replica:0/task:0' % job

  def session_config(self, base=None):
    """`base` (a ConfigProto) with device filters: a task talks only to the
    parameter servers and itself, so a worker that is down or not yet up
    does not hold the others (tf.estimator did the same). Without parameter
    servers (collective all-reduce) a task's graph is its own and the
    collectives meet through the chief, their group leader."""
    config = tf1.ConfigProto()
    if base is not None:
      config.CopyFrom(base)
    if self.jobs and self.is_training_task and not config.device_filters:
      own = '/job:%s/task:%d' % (self.task_type, self.task_id)
      config.device_filters.extend([own] if self.collective
                                   else ['/job:ps', own])
    if (self.collective and self.is_training_task and
        not config.experimental.collective_group_leader):
      config.experimental.collective_group_leader = self.chief_device
    return config

  def unreachable_peers(self, timeout=2.0):
    """The other training tasks whose address refuses or does not answer a
    connection, as 'worker:1 (host:port)'. A collective that fails says only
    that it failed, or that it timed out, depending on when the peer died;
    this names the peer. A stopped (hung) process still accepts
    connections, so it is not listed."""
    return [name for name, address in self.peers(TRAINING_JOBS)
            if not answers(address, timeout)]

  def peers(self, jobs=('chief', 'worker', 'ps')):
    """[('ps:0 (host:port)', 'host:port'), ...]: the other tasks of `jobs`."""
    return [('%s:%d (%s)' % (job, index, address), address)
            for job in jobs for index, address in enumerate(self.jobs.get(job, []))
            if (job, index) != (self.task_type, self.task_id)]

  def task_name(self, device):
    """'ps:0 (host:port)' for a device string of this cluster's tasks, else
    the device string."""
    spec = tf.DeviceSpec.from_string(device or '')
    addresses = self.jobs.get(spec.job or '', [])
    if spec.task is not None and spec.task < len(addresses):
      return '%s:%d (%s)' % (spec.job, spec.task, addresses[spec.task])
    return device

  def __repr__(self):
    return 'Cluster(%r, task=%s:%d)' % (self.jobs, self.task_type,
                                         self.task_id)

  # -- serving ---------------------------------------------------------------
  def start_server(self, config=None):
    """Starts (once per process) this task's server; returns it. A port
    that is taken fails with one line naming the task and the address."""
    address = self.jobs[self.task_type][self.task_id]
    # The address is part of the key: the same task name in another cluster
    # (another port) is another server, and must be probed for its port.
    key = (self.task_type, self.task_id, address)
    if key in _servers:
      return _servers[key]
    port = int(address.rpartition(':')[2])
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
      # gRPC binds every interface; TF's own failure says only "Could not
      # start gRPC server", so the port is tried first to name it. With
      # SO_REUSEADDR, as gRPC binds: only a listener makes the port taken,
      # not the TIME_WAIT connections a killed task leaves behind.
      probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
      probe.bind(('', port))
    except OSError as e:
      raise CannotStart('cannot start %s:%d at %s: port %d is in use (%s)' % (
          self.task_type, self.task_id, address, port, e.strerror))
    finally:
      probe.close()
    try:
      server = tf1.train.Server(self.spec, job_name=self.task_type,
                                task_index=self.task_id,
                                config=self.session_config(config), start=True)
    except tf.errors.OpError as e:
      raise CannotStart('cannot start %s:%d at %s: %s' % (
          self.task_type, self.task_id, address, e.message))
    _servers[key] = server
    return server

  def serve(self, config=None, stop=lambda: False):
    """A ps task: serves until `stop()` is true (asked twice a second) or
    the chief says the job is over (JobEnd); returns None or, then, the
    chief's status. The caller's thread polls rather than blocking in
    Server.join(), whose C++ wait would never let a Python signal handler
    run."""
    tf1.logging.info('Serving %s:%d at %s', self.task_type, self.task_id,
                     self.jobs[self.task_type][self.task_id])
    server = self.start_server(config)
    with tf.Graph().as_default():
      end = JobEnd(self.num_ps, only=self.task_id)
      own = tf1.ConfigProto(device_filters=['/job:ps/task:%d' % self.task_id])
      with tf1.Session(server.target, config=own) as session:
        while not stop():
          status = end.read(session)
          if status is not None:
            # A moment for the workers to read it too before this ps goes.
            time.sleep(JobEnd.LINGER_SECS)
            return status
          time.sleep(0.5)
    return None


def answers(address, timeout=1.0):
  """Whether host:port accepts a TCP connection within `timeout` seconds."""
  host, _, port = address.rpartition(':')
  try:
    socket.create_connection((host, int(port)), timeout).close()
    return True
  except OSError:
    return False


class JobEnd(object):
  """The chief's word that a parameter-server job is over, kept on every ps:
  a scalar resource variable found by its shared name (the ps, the chief and
  the workers each build their own graph, as between-graph replication
  does), outside every collection, so no saver, initialiser or readiness
  check sees it. The chief writes RUNNING at every session it makes (a ps
  restarted beneath it starts without one) and its exit status when it
  ends; a ps ends with that status (serve), a worker stops at its next
  step. Without it a ps serves forever and srun's step, a TFJob or a
  launcher never end."""

  RUNNING = -1
  SHARED_NAME = 'slim_zoo_job_end'
  LINGER_SECS = 3.0

  def __init__(self, num_ps, only=None):
    self.graph = tf1.get_default_graph()
    self._status = tf1.placeholder(tf.int64, [], name='job_end_status')
    handles, writes = [], []
    for task in range(num_ps) if only is None else [only]:
      with tf1.device('/job:ps/replica:0/task:%d' % task):
        handle = tf.raw_ops.VarHandleOp(dtype=tf.int64, shape=[],
                                        shared_name=self.SHARED_NAME)
        writes.append(tf.raw_ops.AssignVariableOp(resource=handle,
                                                  value=self._status))
        handles.append(handle)
    self._write = tf.group(*writes)
    with tf1.device('/job:ps/replica:0/task:%d' % (only or 0)):
      self.value = tf.cond(
          tf.raw_ops.VarIsInitializedOp(resource=handles[0]),
          lambda: tf.raw_ops.ReadVariableOp(resource=handles[0],
                                            dtype=tf.int64),
          lambda: tf.constant(self.RUNNING, tf.int64))

  def write(self, session, status, timeout_secs=None):
    options = (tf1.RunOptions(timeout_in_ms=int(timeout_secs * 1000))
               if timeout_secs else None)
    session.run(self._write, {self._status: status}, options=options)

  def read(self, session):
    """The chief's exit status once it has ended, else None."""
    status = int(session.run(self.value))
    return None if status == self.RUNNING else status


def _split_hosts(text):
  return [h.strip() for h in (text or '').split(',') if h.strip()]


def _check_address(job, address):
  host, _, port = str(address).rpartition(':')
  if not host or not port.isdigit() or not 0 < int(port) < 65536:
    raise ValueError("cluster address '%s' of job %s is not host:port" % (
        address, job))


class GreedyBySize(object):
  """Parameter-server placement: each variable to the ps task holding the
  fewest bytes so far (largest first is not possible: variables arrive in
  creation order). A strategy for `replica_device_setter`."""

  def __init__(self, num_tasks):
    self.loads = [0] * num_tasks

  def __call__(self, op):
    if op.type not in ('VarHandleOp', 'VariableV2', 'Variable'):
      task = 0  # tables and the like: small
    else:
      shape = tf.TensorShape(op.get_attr('shape'))
      dtype = tf.as_dtype(op.get_attr('dtype'))
      size = (shape.num_elements() or 1) * dtype.size
      task = min(range(len(self.loads)), key=lambda t: self.loads[t])
      self.loads[task] += size
    return task


def sync_replicas_hooks(optimizer, is_chief, num_tokens_at_end):
  """The hooks a SyncReplicasOptimizer needs: its own, and for the chief one
  that puts `num_tokens_at_end` tokens (one per worker) in the token queue
  when it stops. A worker waits for a token after every step; without these
  the workers still running when the chief reaches the last step wait
  forever (TensorFlow's hook leaves them so)."""
  hooks = [_SyncReplicasHook(optimizer, is_chief)]
  if is_chief:
    hooks.append(_ReleaseWorkersHook(optimizer, num_tokens_at_end))
  return hooks


class _SyncReplicasHook(tf1.train.SessionRunHook):
  """What `SyncReplicasOptimizer.make_session_run_hook` does (local step
  init; for the chief, the initial tokens and a thread applying each
  aggregated step), except how that thread ends. TensorFlow's registers
  its queue runner with the session's coordinator; at the end the runner
  sits in the accumulators' take_grad waiting for gradients no worker will
  send, so closing the session waited the coordinator's whole grace period
  (120 s) and the session's close then cancelled the run, printing a
  CancelledError traceback. This thread is not joined: closing the session
  cancels its run and it ends quietly; an error while training still stops
  the session through the coordinator."""

  # Each step waits for the other workers: the runner watches them too.
  waits_for_workers = True

  def __init__(self, optimizer, is_chief):
    self._optimizer, self._is_chief = optimizer, is_chief

  def begin(self):
    opt = self._optimizer
    if self._is_chief:
      self._local_init = opt.chief_init_op
      self._tokens = opt.get_init_tokens_op()
      self._apply = opt.get_chief_queue_runner().enqueue_ops
    else:
      self._local_init, self._tokens, self._apply = (
          opt.local_step_init_op, None, [])

  def after_create_session(self, session, coord):
    missing = session.run(self._optimizer.ready_for_local_init_op)
    if len(missing):
      raise RuntimeError('SyncReplicasOptimizer cannot initialise its local '
                         'step: variables not initialised: %s' % missing)
    session.run(self._local_init)
    if self._tokens is not None:
      session.run(self._tokens)
    for op in self._apply:
      threading.Thread(target=_apply_aggregated_steps, daemon=True,
                       args=(session.make_callable(op), coord)).start()


def _apply_aggregated_steps(apply, coord):
  while not coord.should_stop():
    try:
      apply()
    except Exception as e:  # pylint: disable=broad-except
      if not coord.should_stop():  # else: the session closing cancelled it
        try:
          coord.request_stop(e)
        except Exception:  # pylint: disable=broad-except
          pass  # the coordinator was joined in between: the session is closing
      return


class _ReleaseWorkersHook(tf1.train.SessionRunHook):

  def __init__(self, optimizer, num_tokens):
    self._optimizer, self._num_tokens = optimizer, num_tokens

  def begin(self):
    self._release = self._optimizer.get_init_tokens_op(self._num_tokens)

  def end(self, session):
    session.run(self._release)
