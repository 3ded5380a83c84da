"""An Estimator-compatible runner on MonitoredTrainingSession.

`tf.estimator` was removed from TensorFlow (2.16); code written against its
contract -- `model_fn(features, labels, mode, params, config) -> EstimatorSpec`
-- runs here after changing its imports:

    from runner import estimator as tf_estimator
    est = tf_estimator.Estimator(model_fn, model_dir, config=tf_estimator.RunConfig(...))
    est.train(input_fn, max_steps=1000); est.evaluate(input_fn)

Each call builds a fresh graph, restores the latest checkpoint of `model_dir`
(training resumes from it) and runs under hooks. The cluster settings of
RunConfig (TF_CONFIG: cluster, task, chief, parameter servers) are read here
and passed to MonitoredTrainingSession, so distributed training plugs in
through `master`/`is_chief` and a device setter, not a different runner.
"""
import collections
import contextlib
import inspect
import os
import shutil
import signal
import tempfile
import threading
import time

import numpy as np
import tensorflow as tf

import tf_compat  # noqa: F401
import zoo_errors
from deployment import all_reduce
from deployment import cluster as cluster_lib
from deployment import model_deploy
from runner import faults
from runner import hooks as run_hooks
from runner import sessions
from runner import watch as watch_lib
from tensorflow.python.saved_model.model_utils import export_output

tf1 = tf.compat.v1


class ModeKeys(object):
  TRAIN = 'train'
  EVAL = 'eval'
  PREDICT = 'infer'


class EstimatorSpec(collections.namedtuple('EstimatorSpec', [
    'mode', 'predictions', 'loss', 'train_op', 'eval_metric_ops',
    'export_outputs', 'training_chief_hooks', 'training_hooks', 'scaffold',
    'evaluation_hooks', 'prediction_hooks'])):
  """What a model_fn returns; the fields a mode needs are checked."""

  def __new__(cls, mode, predictions=None, loss=None, train_op=None,
              eval_metric_ops=None, export_outputs=None,
              training_chief_hooks=None, training_hooks=None, scaffold=None,
              evaluation_hooks=None, prediction_hooks=None):
    if mode == ModeKeys.TRAIN and (loss is None or train_op is None):
      raise ValueError('EstimatorSpec in TRAIN mode needs loss and train_op')
    if mode == ModeKeys.EVAL and loss is None:
      raise ValueError('EstimatorSpec in EVAL mode needs loss')
    if mode == ModeKeys.PREDICT and predictions is None:
      raise ValueError('EstimatorSpec in PREDICT mode needs predictions')
    for name, ops in (eval_metric_ops or {}).items():
      if not (isinstance(ops, (tuple, list)) and len(ops) == 2):
        raise TypeError('eval_metric_ops[%r] must be (value, update_op)' % name)
    return super().__new__(
        cls, mode, predictions, loss, train_op, dict(eval_metric_ops or {}),
        export_outputs, tuple(training_chief_hooks or ()),
        tuple(training_hooks or ()), scaffold or tf1.train.Scaffold(),
        tuple(evaluation_hooks or ()), tuple(prediction_hooks or ()))


class RunConfig(object):
  """Run settings, with TF_CONFIG's cluster read as tf.estimator did."""

  def __init__(self, model_dir=None, tf_random_seed=None,
               save_summary_steps=100, save_checkpoints_steps=None,
               save_checkpoints_secs=None, session_config=None,
               keep_checkpoint_max=5, keep_checkpoint_every_n_hours=10000,
               log_step_count_steps=100, save_summaries_secs=None,
               cluster=None, peer_timeout_secs=180,
               max_starts_without_progress=5):
    """As tf.estimator.RunConfig; `save_summaries_secs` (TF-Slim's cadence)
    replaces save_summary_steps when set. `cluster` (a deployment.cluster.
    Cluster) defaults to TF_CONFIG's, as in tf.estimator.
    `peer_timeout_secs`: how long a cluster task waits for a lost task to
    come back before it ends with status 200 (runner/watch.py).
    `max_starts_without_progress`: the chief refuses to start when that
    many starts in a row ended at the same step (faults.StartLog; 0: never).
    """
    if save_checkpoints_steps is not None and save_checkpoints_secs is not None:
      raise ValueError('set at most one of save_checkpoints_steps and '
                       'save_checkpoints_secs')
    if save_checkpoints_steps is None and save_checkpoints_secs is None:
      save_checkpoints_secs = 600
    self.model_dir = model_dir
    self.tf_random_seed = tf_random_seed
    self.save_summary_steps = None if save_summaries_secs else save_summary_steps
    self.save_summaries_secs = save_summaries_secs
    self.save_checkpoints_steps = save_checkpoints_steps
    self.save_checkpoints_secs = save_checkpoints_secs
    self.session_config = session_config or tf1.ConfigProto(
        allow_soft_placement=True)
    self.keep_checkpoint_max = keep_checkpoint_max
    self.keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
    self.log_step_count_steps = log_step_count_steps
    self.peer_timeout_secs = peer_timeout_secs
    self.max_starts_without_progress = max_starts_without_progress
    self.cluster = cluster or cluster_lib.Cluster.from_tf_config()
    self.session_config = self.cluster.session_config(self.session_config)

  # tf.estimator.RunConfig's cluster properties.
  cluster_spec = property(lambda self: self.cluster.spec)
  task_type = property(lambda self: self.cluster.task_type)
  task_id = property(lambda self: self.cluster.task_id)
  num_ps_replicas = property(lambda self: self.cluster.num_ps)
  num_worker_replicas = property(lambda self: self.cluster.num_workers)
  is_chief = property(lambda self: self.cluster.is_chief)
  master = property(lambda self: self.cluster.master)

  def replace(self, **kwargs):
    fields = dict(
        model_dir=self.model_dir, tf_random_seed=self.tf_random_seed,
        save_summary_steps=self.save_summary_steps,
        save_checkpoints_steps=self.save_checkpoints_steps,
        save_checkpoints_secs=self.save_checkpoints_secs,
        session_config=self.session_config,
        keep_checkpoint_max=self.keep_checkpoint_max,
        keep_checkpoint_every_n_hours=self.keep_checkpoint_every_n_hours,
        log_step_count_steps=self.log_step_count_steps,
        save_summaries_secs=self.save_summaries_secs, cluster=self.cluster,
        peer_timeout_secs=self.peer_timeout_secs,
        max_starts_without_progress=self.max_starts_without_progress)
    if 'save_checkpoints_steps' in kwargs:
      fields['save_checkpoints_secs'] = None
    if 'save_checkpoints_secs' in kwargs:
      fields['save_checkpoints_steps'] = None
    fields.update(kwargs)
    return RunConfig(**fields)


class ServingInputReceiver(collections.namedtuple(
    'ServingInputReceiver', ['features', 'receiver_tensors'])):
  """features fed to the model_fn and the tensors a SavedModel is fed."""

  def __new__(cls, features, receiver_tensors):
    if not isinstance(receiver_tensors, dict):
      receiver_tensors = {'input': receiver_tensors}
    return super().__new__(cls, features, receiver_tensors)


def build_raw_serving_input_receiver_fn(features, default_batch_size=None):
  """A serving_input_receiver_fn feeding placeholders shaped like `features`."""

  def serving_input_receiver_fn():
    placeholders = {}
    for name, t in features.items():
      shape = [default_batch_size] + t.shape.as_list()[1:]
      placeholders[name] = tf1.placeholder(t.dtype, shape, name=name)
    return ServingInputReceiver(placeholders, placeholders)

  return serving_input_receiver_fn


class export(object):  # pylint: disable=invalid-name
  """`tf.estimator.export` names."""
  ServingInputReceiver = ServingInputReceiver
  build_raw_serving_input_receiver_fn = staticmethod(
      build_raw_serving_input_receiver_fn)
  PredictOutput = export_output.PredictOutput
  ClassificationOutput = export_output.ClassificationOutput
  RegressionOutput = export_output.RegressionOutput


TrainSpec = collections.namedtuple('TrainSpec', ['input_fn', 'max_steps',
                                                 'hooks'])
TrainSpec.__new__.__defaults__ = (None, ())
EvalSpec = collections.namedtuple('EvalSpec', [
    'input_fn', 'steps', 'name', 'hooks', 'exporters', 'start_delay_secs',
    'throttle_secs'])
EvalSpec.__new__.__defaults__ = (100, None, (), (), 120, 600)


def _call_with_supported_args(fn, candidates):
  accepted = inspect.signature(fn).parameters
  if any(p.kind == p.VAR_KEYWORD for p in accepted.values()):
    return fn(**candidates)
  return fn(**{k: v for k, v in candidates.items() if k in accepted})


def call_model_fn(model_fn, features, labels, mode, params, config):
  """Calls a model_fn with the arguments it declares; checks its result."""
  spec = _call_with_supported_args(model_fn, dict(
      features=features, labels=labels, mode=mode, params=params,
      config=config))
  if not isinstance(spec, EstimatorSpec):
    raise TypeError('model_fn must return an EstimatorSpec, got %r' % spec)
  return spec


# The collection of the seconds each step waited for its batch (one scalar
# tensor, when input_fn returned a Dataset): from the step's start until the
# iterator handed over the next element. Progress lines set it against the
# step time (classification/progress.py).
INPUT_WAIT_SECONDS = 'input_wait_seconds'


def _features_and_labels(result):
  """input_fn may return a Dataset, (features, labels) or features."""
  if isinstance(result, tf.data.Dataset):
    # No inputs: runs as the step starts; the batch is ready when get_next
    # returns, at once if the pipeline kept ahead of the steps.
    start = tf.timestamp()
    with tf.control_dependencies([start]):
      result = tf1.data.make_one_shot_iterator(result).get_next()
    with tf.control_dependencies(tf.nest.flatten(result)):
      waited = tf.timestamp() - start
    tf1.add_to_collection(INPUT_WAIT_SECONDS, waited)
  if isinstance(result, (tuple, list)) and len(result) == 2:
    return result[0], result[1]
  return result, None


def _step_of(model_dir):
  try:
    return global_step_of(tf.train.latest_checkpoint(model_dir))
  except (tf.errors.OpError, ValueError):
    return 0


class Estimator(object):
  """Trains, evaluates, predicts with and exports a `model_fn`."""

  def __init__(self, model_fn, model_dir=None, config=None, params=None,
               report=None):
    """`report(line)` tells what training does about faults and where it
    resumes (default: TensorFlow's INFO log); the scripts print it."""
    config = config or RunConfig()
    model_dir = model_dir or config.model_dir or tempfile.mkdtemp()
    if os.path.exists(model_dir) and not os.path.isdir(model_dir):
      raise ValueError("model_dir '%s' is a file, not a directory" % model_dir)
    self._model_fn = model_fn
    self._model_dir = model_dir
    self._config = config.replace(model_dir=model_dir)
    self._params = dict(params or {})
    self._report = report or (lambda line: tf1.logging.info('%s', line))
    self.steps_run = 0  # train's last call: the steps this task ran
    self._save_lock, self._saved_now = threading.Lock(), None
    self.resumed_from = None  # train's last call: the checkpoint it restored

  model_dir = property(lambda self: self._model_dir)
  config = property(lambda self: self._config)
  params = property(lambda self: dict(self._params))

  # -- graph building ------------------------------------------------------
  def _call_model_fn(self, features, labels, mode):
    return call_model_fn(self._model_fn, features, labels, mode,
                         dict(self._params), self._config)

  def _build(self, input_fn, mode):
    if self._config.tf_random_seed is not None:
      tf1.set_random_seed(self._config.tf_random_seed)
    device_fn = self._device_fn() if mode == ModeKeys.TRAIN else None
    with tf1.device(device_fn), tf.device('/device:CPU:0'):
      global_step = tf1.train.get_or_create_global_step()
    with tf.device('/device:CPU:0'):
      features, labels = _features_and_labels(_call_with_supported_args(
          input_fn, dict(params=dict(self._params), config=self._config,
                         mode=mode)))
    with tf1.device(device_fn):  # tf.device takes no functions
      return self._call_model_fn(features, labels, mode), global_step

  def _device_fn(self):
    """In a cluster, training places variables on the parameter servers
    and everything else on this task (model_deploy's one placement rule);
    evaluation, prediction and export run locally from checkpoints."""
    cluster = self._config.cluster
    args = cluster.deployment_args()
    if cluster.collective and cluster.is_training_task:
      # Every worker keeps its variables: on its own task.
      return model_deploy.DeploymentConfig(
          variable_update='collective_all_reduce', **args).device_function()
    if not args or not args['num_ps_tasks']:
      return None
    return model_deploy.DeploymentConfig(exact=True, **args).device_function()

  # -- public API ----------------------------------------------------------
  def latest_checkpoint(self):
    return tf.train.latest_checkpoint(self._model_dir)

  def eval_dir(self, name=None):
    """Where `evaluate` writes its summaries: model_dir/eval[_name]."""
    return os.path.join(self._model_dir,
                        'eval' if not name else 'eval_' + name)

  def get_variable_names(self):
    return [name for name, _ in tf.train.list_variables(self._checkpoint())]

  def get_variable_value(self, name):
    return tf.train.load_variable(self._checkpoint(), name)

  def _checkpoint(self, checkpoint_path=None):
    path = checkpoint_path or self.latest_checkpoint()
    if not path:
      raise ValueError("no checkpoint in model_dir '%s'; train first or pass "
                       'checkpoint_path' % self._model_dir)
    if os.path.isdir(path):
      path = tf.train.latest_checkpoint(path)
    return path

  def train(self, input_fn, hooks=None, steps=None, max_steps=None,
            saving_listeners=None):
    """Trains until `steps` more steps, `max_steps` in all, or input ends.

    The chief holds model_dir's trainer lock (faults.TrainDirLock) and resumes
    from its newest readable checkpoint, naming (and setting aside) newer
    unreadable ones. SIGTERM or SIGINT ends the run after the step in flight
    with a checkpoint at that step: faults.Stopped. A NaN or infinite loss
    raises faults.Diverged, a full disk faults.DiskFull; neither leaves a
    checkpoint it should not.
    """
    if steps is not None and max_steps is not None:
      raise ValueError('set at most one of steps and max_steps')
    for name, value in (('steps', steps), ('max_steps', max_steps)):
      if value is not None and value < 1:
        raise ValueError('%s must be at least 1, got %r' % (name, value))
    os.makedirs(self._model_dir, exist_ok=True)
    # Only the chief writes checkpoints: workers of a cluster share the dir.
    lock = (faults.TrainDirLock(self._model_dir) if self._config.is_chief
            else contextlib.nullcontext())
    with lock, faults.StopSignals() as signals:
      if self._config.is_chief:
        resume, keep = self._resume_checkpoint()
      else:
        resume, keep = tf.train.latest_checkpoint(self._model_dir), None
      if max_steps is not None and resume:
        done = global_step_of(resume)
        if done >= max_steps:
          tf1.logging.info('Skipping training: step %d >= max_steps %d',
                           done, max_steps)
          self.end_finished_job(stop=lambda: signals.received is not None)
          return self
      self.resumed_from = resume  # what this train call restores
      if resume and self._config.is_chief:
        self._report('Resuming from %s (step %d)' % (resume,
                                                     global_step_of(resume)))
      starts = None
      if self._config.is_chief:
        starts = faults.StartLog(self._model_dir,
                                 self._config.max_starts_without_progress)
        starts.begin(global_step_of(resume))
      try:
        self._train(input_fn, hooks, steps, max_steps, saving_listeners,
                    resume, keep, signals, starts)
      except tf.errors.OpError as e:
        if not faults.is_disk_full(e):
          raise
        raise faults.DiskFull(
            'no space left on device writing to %s (%s free)' % (
                self._model_dir,
                faults.megabytes(faults.free_bytes(self._model_dir) or 0))
        ) from None
    return self

  def _resume_checkpoint(self):
    """(the newest readable checkpoint or None, the readable ones the saver
    may delete as it keeps keep_checkpoint_max). Newer unreadable ones are
    named and renamed aside (faults.set_aside): kept, never overwritten."""
    try:
      resume, skipped = faults.readable_checkpoint(self._model_dir)
    except faults.NoReadableCheckpoint as e:
      raise ValueError('%s; move them out of the directory to train from '
                       'scratch' % e) from None
    for prefix, problem in skipped:
      kept = faults.set_aside(prefix)
      self._report('%s; kept as %s.*' % (faults.skipped_line(prefix, problem),
                                         kept))
    state = tf.train.get_checkpoint_state(self._model_dir)  # absolute paths
    keep = [p for p in (state.all_model_checkpoint_paths if state else [])
            if tf.io.gfile.exists(p + '.index') and p != resume]
    if resume:
      keep.append(resume)
    return resume, keep

  def _train(self, input_fn, hooks, steps, max_steps, saving_listeners,
             resume, keep, signals, starts):
    cfg = self._config
    self._saved_now = None
    with tf.Graph().as_default():
      spec, global_step = self._build(input_fn, ModeKeys.TRAIN)
      stop_on_signal = run_hooks.StopOnSignalHook(signals)
      all_hooks = list(hooks or []) + list(spec.training_hooks) + [
          run_hooks.FiniteHook(spec.loss, self._model_dir), stop_on_signal]
      if steps is not None or max_steps is not None:
        all_hooks.append(tf1.train.StopAtStepHook(num_steps=steps,
                                                  last_step=max_steps))
      if cfg.log_step_count_steps:
        all_hooks.append(tf1.train.LoggingTensorHook(
            {'loss': spec.loss, 'step': global_step},
            every_n_iter=cfg.log_step_count_steps))
      chief_hooks = list(spec.training_chief_hooks)
      scaffold = spec.scaffold
      if cfg.save_summary_steps or cfg.save_summaries_secs:
        chief_hooks.append(run_hooks.SummarySaverHook(
            self._model_dir, scaffold, save_steps=cfg.save_summary_steps,
            save_secs=cfg.save_summaries_secs, steps=steps,
            last_step=max_steps,
            stopping=lambda: signals.received is not None))
      if scaffold.saver is None and not tf1.get_collection(
          tf1.GraphKeys.SAVERS):
        # Scaffold.finalize() picks the saver up from this collection.
        tf1.add_to_collection(tf1.GraphKeys.SAVERS, tf1.train.Saver(
            sharded=True, max_to_keep=cfg.keep_checkpoint_max,
            keep_checkpoint_every_n_hours=cfg.keep_checkpoint_every_n_hours,
            save_relative_paths=True))
      saver_hook = None
      if cfg.is_chief:
        # What MonitoredTrainingSession(is_chief=True) builds, but restoring
        # the checkpoint chosen above rather than the state file's latest.
        if cfg.log_step_count_steps:
          chief_hooks.append(tf1.train.StepCounterHook(
              every_n_steps=cfg.log_step_count_steps,
              output_dir=self._model_dir))
        saver_hook = run_hooks.CheckpointSaverHook(
            self._model_dir, save_secs=cfg.save_checkpoints_secs,
            save_steps=cfg.save_checkpoints_steps, scaffold=scaffold,
            listeners=saving_listeners, keep=keep)
        chief_hooks.append(saver_hook)
      collective = all_reduce.collective_deployment()
      last = run_hooks.LastStepHook()
      all_hooks.append(last)
      cluster = cfg.cluster
      job_end = job_end_hook = None
      if cluster.jobs and cluster.num_ps:
        job_end = cluster_lib.JobEnd(cluster.num_ps)
        job_end_hook = run_hooks.JobEndHook(job_end, cfg.is_chief)
        all_hooks.append(job_end_hook)
      target = self._session_target() if cluster.jobs else None
      if collective:
        creator = self._collective_creator(collective, scaffold, resume)
        session_hooks = (chief_hooks if collective.is_chief else []) + all_hooks
      elif cfg.is_chief:
        creator = sessions.ChiefSessionCreator(
            scaffold, target or self._session_target(), cfg.session_config,
            self._model_dir, resume, task_name=cluster.task_name,
            last_step=lambda: last.step, report=self._report)
        session_hooks = chief_hooks + all_hooks
      else:  # what MonitoredTrainingSession(is_chief=False) builds, polling faster
        creator = sessions.WorkerSessionCreator(
            scaffold, target, cfg.session_config,
            last_step=lambda: last.step, report=self._report)
        session_hooks = all_hooks
      told = job_end if cfg.is_chief else None  # the chief tells the ps
      watch = contextlib.nullcontext()
      status, line = zoo_errors.DONE, 'done'
      if cluster.jobs:
        watch = self._task_watch(
            collective, session_hooks, last, max_steps,
            ending=lambda s, l: self._ending(starts, told, s, l))
        stop_on_signal.taken_up = lambda: setattr(watch, 'acknowledged', True)
        if saver_hook is not None:
          watch.save = lambda: self._save_now(saver_hook)
      self.steps_run = 0  # this task's own runs of the train op
      try:
        try:
          with watch:
            self._run(spec, global_step, creator, session_hooks, collective)
        except zoo_errors.Retryable:
          if signals.received is None or not collective:
            raise
          # A lost peer failed the all-reduce while a stop signal waited:
          # the signal's promise holds (this task's variables are its own).
          step, checkpoint = (self._save_now(saver_hook) if saver_hook
                              else (last.step, None))
          raise faults.Stopped(signals.received, step, checkpoint) from None
        if signals.received is not None:
          if saver_hook is not None:
            step, checkpoint = saver_hook.last_saved
          else:
            step, checkpoint = stop_on_signal.step, None
          raise faults.Stopped(signals.received, step, checkpoint)
        chief_status = job_end_hook and job_end_hook.chief_status
        if chief_status:  # a worker: the chief ended first, not done
          error = (zoo_errors.Retryable if zoo_errors.is_retryable(
              chief_status) else ValueError)
          raise error('the chief ended with status %d (%s); this task stops '
                      'too' % (chief_status,
                               zoo_errors.status_meaning(chief_status)))
      except BaseException as e:  # pylint: disable=broad-except
        status, line = ending_of(e)
        raise
      finally:
        self._ending(starts, told, status, line)
    return self

  def _run(self, spec, global_step, creator, session_hooks, collective):
    """The training loop, in the session `creator` makes."""
    cluster = self._config.cluster
    try:  # the session is made here: the collective chief's broadcast
      # runs then, and fails as a step would
      session = tf1.train.MonitoredSession(creator, hooks=session_hooks)
    except (tf.errors.DeadlineExceededError, tf.errors.UnavailableError,
            tf.errors.AbortedError, tf.errors.InternalError,
            tf.errors.CancelledError) as e:
      if not collective:
        raise
      raise zoo_errors.Retryable(sessions.collective_failure_message(
          collective, cluster, _step_of(self._model_dir),
          timed_out=isinstance(e, tf.errors.DeadlineExceededError))) from None
    # A collective step carries its deadline (all_reduce.step_options).
    options = all_reduce.step_options(collective) if collective else None
    try:
      with session as sess:
        while not sess.should_stop():
          try:
            sess.run(spec.train_op, options=options)
          except tf.errors.InvalidArgumentError as e:
            # A histogram summary refuses NaN/inf values: the same
            # divergence the loss check catches, seen first by the summary.
            match = run_hooks.NON_FINITE_SUMMARY.search(e.message)
            if not match:
              raise
            raise faults.Diverged(
                sess.run_step_fn(lambda step_context: int(
                    step_context.session.run(global_step))),
                '%s is %s' % (
                    match.group(2), 'nan' if match.group(1) == 'Nan'
                    else 'infinite'),
                tf.train.latest_checkpoint(self._model_dir)) from None
          self.steps_run += 1
    except (tf.errors.DeadlineExceededError, sessions.LostWorker) as e:
      if not collective:
        raise
      raise zoo_errors.Retryable(sessions.collective_failure_message(
          collective, cluster, _step_of(self._model_dir),
          timed_out=not isinstance(e, sessions.LostWorker))) from None

  def _task_watch(self, collective, session_hooks, last, max_steps, ending):
    """The TaskWatch of a cluster task: a ps layout task gives up on a ps,
    and a worker on the chief, missed for RunConfig.peer_timeout_secs; a
    synchronous one on any worker too. A collective worker names a lost
    peer itself (collective_failure_message): its watch only takes
    signals."""
    cluster = self._config.cluster
    everyone = cluster.peers()
    if collective:
      peers = []
    elif any(getattr(h, 'waits_for_workers', False) for h in session_hooks):
      peers = everyone
    else:
      peers = cluster.peers(('ps',)) + [
          p for p in everyone if p[1] == cluster.chief_address and
          not self._config.is_chief]
    return watch_lib.TaskWatch(
        peers, everyone, timeout_secs=self._config.peer_timeout_secs,
        step=lambda: last.step, report=self._report,
        done=lambda: max_steps is not None and (
            _step_of(self._model_dir) >= max_steps),
        ending=ending)

  def _save_now(self, saver_hook):
    """(step, path) of a checkpoint at the global step, saved in a session
    of its own while training is blocked or its session is gone (a task's
    variables live in its server, not in a session): from the TaskWatch's
    thread, or as the all-reduce fails on a lost peer. A step that did not
    complete applied nothing, so this is the last completed step. Once."""
    with self._save_lock:
      if self._saved_now is None:
        graph = saver_hook.graph
        with tf1.Session(self._session_target(), graph=graph,
                         config=self._config.session_config) as session:
          step = int(session.run(tf1.train.get_global_step(graph)))
          saver_hook._save(session, step)  # pylint: disable=protected-access
        self._saved_now = saver_hook.last_saved
      return self._saved_now

  def _ending(self, starts, job_end, status, line):
    """What the chief leaves as it ends: how this start ended (the crash
    loop count) and, in a ps job, its status on every ps, so that the ps and
    the other workers end too."""
    if starts is not None:
      starts.end(status, line)
    if job_end is None:
      return
    cluster = self._config.cluster
    if not all(cluster_lib.answers(a) for _, a in cluster.peers(('ps',))):
      return  # a session would wait for the missing ps for ever
    try:
      # The graph named: the TaskWatch's thread has a default graph of its own.
      with tf1.Session(self._session_target(), graph=job_end.graph,
                       config=self._config.session_config) as session:
        job_end.write(session, status, timeout_secs=5)
    except tf.errors.OpError:
      pass  # a ps went away meanwhile: it ends with the job anyway

  def end_finished_job(self, stop=lambda: False):
    """Called as a chief finds its train_dir already at max_steps (train does
    so itself). A chief restarted after its last checkpoint but before it
    told the ps (its pod killed then) tells every ps the job is done, so the
    ps and the workers end; a ps not answering yet (restarting too) is
    waited for up to peer_timeout_secs, or until `stop()`."""
    cluster = self._config.cluster
    if not (self._config.is_chief and cluster.jobs and cluster.num_ps):
      return
    deadline = time.time() + self._config.peer_timeout_secs
    missing = [p for p in cluster.peers(('ps',))
               if not cluster_lib.answers(p[1])]
    if missing:
      self._report('%s is not answering; waiting up to %ds to tell it the '
                   'job is done (--peer_timeout_secs)' % (
                       missing[0][0], self._config.peer_timeout_secs))
    while missing and time.time() < deadline and not stop():
      time.sleep(1)
      missing = [p for p in missing if not cluster_lib.answers(p[1])]
    with tf.Graph().as_default():
      self._ending(None, cluster_lib.JobEnd(cluster.num_ps), zoo_errors.DONE,
                   'done')

  def _collective_creator(self, deployment, scaffold, resume):
    """A worker's session creator in a collective_all_reduce cluster: the
    chief restores or initialises, every worker receives the chief's
    values; only the chief saves checkpoints and summaries."""
    if deployment.is_chief != self._config.is_chief:
      raise ValueError('the deployment says this task is%s the chief, the '
                       'cluster says it is%s' % (
                           '' if deployment.is_chief else ' not',
                           '' if self._config.is_chief else ' not'))
    broadcast = all_reduce.broadcast_from_chief(deployment,
                                                  tf1.global_variables())
    return sessions.CollectiveSessionCreator(
        scaffold, self._session_target(), self._config.session_config,
        broadcast, deployment.is_chief, resume,
        options=all_reduce.step_options(deployment))

  def _session_target(self):
    """Training's session target: in a cluster, this task's own server
    (started once per process); else '' or TF-Slim's --master."""
    cluster = self._config.cluster
    if cluster.jobs:
      if not cluster.is_training_task:
        raise ValueError('a %s task does not train; run it with '
                         'train_and_evaluate' % cluster.task_type)
      return cluster.start_server(self._config.session_config).target
    return cluster.master

  def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None,
               name=None, summary_dir=None):
    """Runs the metrics over `steps` batches (or the whole input); returns a
    dict of metric values with 'loss' and 'global_step', and writes the
    scalar ones as summaries at the checkpoint's global step to
    `summary_dir` (default: `eval_dir(name)`, model_dir/eval[_name])."""
    checkpoint = self._checkpoint(checkpoint_path)
    with tf.Graph().as_default():
      spec, global_step = self._build(input_fn, ModeKeys.EVAL)
      metrics = dict(spec.eval_metric_ops)
      if 'loss' not in metrics:
        metrics['loss'] = tf1.metrics.mean(spec.loss)
      values = {k: v for k, (v, _) in metrics.items()}
      update_op = tf.group(*[u for _, u in metrics.values()])
      # The input usually ends with OutOfRangeError, which closes the
      # session: the metric values are read by this hook at its end.
      final = tf1.train.FinalOpsHook(dict(values, global_step=global_step))
      all_hooks = (list(hooks or []) + list(spec.evaluation_hooks) +
                   [run_hooks.EvalStepHook(steps), final])
      creator = tf1.train.ChiefSessionCreator(
          scaffold=spec.scaffold, config=self._local_session_config(),
          checkpoint_filename_with_path=checkpoint)
      with tf1.train.MonitoredSession(creator, hooks=all_hooks) as sess:
        while not sess.should_stop():
          sess.run(update_op)
      results = final.final_ops_values
    self._write_eval_summaries(results, summary_dir or self.eval_dir(name))
    return results

  def _write_eval_summaries(self, results, eval_dir):
    summary = tf1.Summary()
    for key, value in sorted(results.items()):
      if key != 'global_step' and np.ndim(value) == 0:
        summary.value.add(tag=key, simple_value=float(value))
    with tf.Graph().as_default():  # a v1 FileWriter refuses eager mode
      writer = tf1.summary.FileWriterCache.get(eval_dir)
    writer.add_summary(summary, int(results['global_step']))
    writer.flush()

  def predict(self, input_fn, predict_keys=None, hooks=None,
              checkpoint_path=None, yield_single_examples=True):
    """Yields predictions: dicts (or arrays) per example, in input order."""
    checkpoint = self._checkpoint(checkpoint_path)
    with tf.Graph().as_default():
      spec, _ = self._build(input_fn, ModeKeys.PREDICT)
      predictions = spec.predictions
      if isinstance(predictions, dict) and predict_keys:
        missing = sorted(set(predict_keys) - set(predictions))
        if missing:
          raise ValueError('predict_keys %s not in predictions (%s)' % (
              missing, ', '.join(sorted(predictions))))
        predictions = {k: predictions[k] for k in predict_keys}
      creator = tf1.train.ChiefSessionCreator(
          scaffold=spec.scaffold, config=self._local_session_config(),
          checkpoint_filename_with_path=checkpoint)
      with tf1.train.MonitoredSession(
          creator, hooks=list(hooks or []) + list(spec.prediction_hooks)) as sess:
        while not sess.should_stop():
          batch = sess.run(predictions)
          if not yield_single_examples:
            yield batch
          elif isinstance(batch, dict):
            for i in range(len(next(iter(batch.values())))):
              yield {k: v[i] for k, v in batch.items()}
          else:
            for row in batch:
              yield row

  def export_saved_model(self, export_dir_base, serving_input_receiver_fn,
                         assets_extra=None, as_text=False,
                         checkpoint_path=None):
    """Writes a SavedModel to export_dir_base/<timestamp> and returns its path.

    The model is written to a temporary directory and renamed into place, so
    a failed export leaves nothing half-written.
    """
    checkpoint = self._checkpoint(checkpoint_path)
    with tf.Graph().as_default() as graph:
      receiver = serving_input_receiver_fn()
      tf1.train.get_or_create_global_step()
      spec = self._call_model_fn(receiver.features, None, ModeKeys.PREDICT)
      outputs = spec.export_outputs or {
          'serving_default': export_output.PredictOutput(
              spec.predictions if isinstance(spec.predictions, dict)
              else {'output': spec.predictions})}
      if 'serving_default' not in outputs:
        outputs = dict(outputs, serving_default=next(iter(outputs.values())))
      signatures = {key: out.as_signature_def(receiver.receiver_tensors)
                    for key, out in outputs.items()}
      os.makedirs(export_dir_base, exist_ok=True)
      final_dir = os.path.join(export_dir_base, str(int(time.time())))
      while os.path.exists(final_dir):
        final_dir = os.path.join(export_dir_base,
                                 str(int(os.path.basename(final_dir)) + 1))
      temp_dir = os.path.join(export_dir_base,
                              '.temp-' + os.path.basename(final_dir))
      try:
        with tf1.Session(graph=graph,
                         config=self._local_session_config()) as sess:
          saver = spec.scaffold.saver or tf1.train.Saver(sharded=True)
          saver.restore(sess, checkpoint)
          builder = tf1.saved_model.Builder(temp_dir)
          builder.add_meta_graph_and_variables(
              sess, [tf1.saved_model.tag_constants.SERVING],
              signature_def_map=signatures,
              main_op=tf.group(tf1.local_variables_initializer(),
                               tf1.tables_initializer()),
              strip_default_attrs=True, clear_devices=True)
          builder.save(as_text)
        for dest, source in (assets_extra or {}).items():
          target = os.path.join(temp_dir, 'assets.extra', dest)
          os.makedirs(os.path.dirname(target), exist_ok=True)
          shutil.copyfile(source, target)
        os.replace(temp_dir, final_dir)
      finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
    return final_dir

  def _local_session_config(self):
    """Evaluation, prediction and export run in-process from a checkpoint,
    in a cluster too (as tf.estimator did): no cluster device filters."""
    config = tf1.ConfigProto()
    config.CopyFrom(self._config.session_config)
    del config.device_filters[:]
    return config


def serve_parameters(cluster, session_config=None, peer_timeout_secs=180,
                     report=lambda line: print(line, flush=True)):
  """A ps task: serves until the chief says the job is over
  (cluster.JobEnd), then ends with the chief's status; or until SIGTERM or
  SIGINT (faults.StopSignals, as the training tasks stop), then ends with
  128 + the signal's number; or until the chief, once seen, has not answered
  for `peer_timeout_secs` (runner/watch.py: status 200). Prints its last
  line. Outside the main thread, where Python takes no signals, it serves
  until the job ends or the process does."""
  chief = [p for p in cluster.peers() if p[1] == cluster.chief_address]
  name = '%s:%d' % (cluster.task_type, cluster.task_id)
  with faults.StopSignals() as signals, watch_lib.TaskWatch(
      chief, timeout_secs=peer_timeout_secs, report=report):
    status = cluster.serve(session_config,
                           stop=lambda: signals.received is not None)
  if status is not None:
    report('%s: the chief ended (status %d, %s); the job is over, this task '
           'ends too' % (name, status, zoo_errors.status_meaning(status)))
    return status
  report('%s stopped by %s; a parameter server holds no files' % (
      name, signal.Signals(signals.received).name))
  return 128 + signals.received


def train_and_evaluate(estimator, train_spec, eval_spec):
  """Trains and evaluates, locally or as one task of a cluster.

  Locally, evaluation runs after every checkpoint interval (the RunConfig's
  save_checkpoints_steps, or eval_spec.throttle_secs of training). In a
  cluster (TF_CONFIG), as in tf.estimator: a 'ps' task serves (SIGTERM or
  SIGINT ends its process with one line and status 128 + signal); the chief and
  the workers train to train_spec.max_steps; an 'evaluator' evaluates each
  new checkpoint of the chief (at most one per throttle_secs) until one
  reaches max_steps. Returns the last evaluation's metrics (None for tasks
  that do not evaluate).
  """
  config = estimator.config
  cluster = config.cluster
  if cluster.task_type == 'ps':  # until SIGTERM or SIGINT ends the process
    raise SystemExit(serve_parameters(cluster, config.session_config,
                                      config.peer_timeout_secs))
  if cluster.task_type == 'evaluator':
    result = None
    with faults.StopSignals() as signals:  # a signal ends the wait cleanly
      for checkpoint in faults.follow_checkpoints(
          estimator.model_dir, eval_spec.throttle_secs,
          stop=lambda: signals.received is not None,
          report=lambda line: tf1.logging.warning('%s', line)):
        evaluated, done = _evaluate_followed(estimator, eval_spec, checkpoint,
                                             train_spec.max_steps)
        result = evaluated if evaluated is not None else result
        if done:
          break
    return result
  if cluster.distributed:
    estimator.train(train_spec.input_fn, hooks=train_spec.hooks,
                    max_steps=train_spec.max_steps)
    return None
  result = None
  while True:
    step = global_step_of(estimator.latest_checkpoint())
    if train_spec.max_steps is not None and step >= train_spec.max_steps:
      break
    if config.save_checkpoints_steps:
      until = step + config.save_checkpoints_steps
      if train_spec.max_steps is not None:
        until = min(until, train_spec.max_steps)
      estimator.train(train_spec.input_fn, hooks=train_spec.hooks,
                      max_steps=until)
    else:
      stop = run_hooks.StopAfterSecondsHook(eval_spec.throttle_secs)
      estimator.train(train_spec.input_fn,
                      hooks=list(train_spec.hooks) + [stop],
                      max_steps=train_spec.max_steps)
    result = estimator.evaluate(eval_spec.input_fn, eval_spec.steps,
                                eval_spec.hooks, name=eval_spec.name)
    if global_step_of(estimator.latest_checkpoint()) == step:
      break  # the input ran out: no more training possible
  return result


def _evaluate_followed(estimator, eval_spec, checkpoint, max_steps):
  """(metrics or None, whether max_steps is reached) of one checkpoint an
  evaluator follows."""
  try:
    result = estimator.evaluate(eval_spec.input_fn, eval_spec.steps,
                                eval_spec.hooks, checkpoint, eval_spec.name)
  except (ValueError, tf.errors.NotFoundError):  # before / while restoring
    if checkpoint_exists(checkpoint):
      raise
    tf1.logging.warning(DELETED_CHECKPOINT, checkpoint)
    return None, False
  tf1.logging.info('Evaluated %s: %s', checkpoint, result)
  return result, (max_steps is not None and
                  result['global_step'] >= max_steps)


# A follower of a training directory can lose the race with the trainer's
# Saver, which deletes all but the newest keep_checkpoint_max checkpoints:
# that checkpoint is skipped, the next one is evaluated.
DELETED_CHECKPOINT = ('Skipped %s: training deleted it (keep_checkpoint_max) '
                      'before it was evaluated')


def checkpoint_exists(checkpoint):
  """Whether the checkpoint's files (its .index) are there."""
  return tf.io.gfile.exists(checkpoint + '.index')


def ending_of(error):
  """(the exit status, its one line) a script ends with for `error`."""
  if isinstance(error, faults.Stopped):
    return error.exit_status, str(error)
  return zoo_errors.exit_status(error), zoo_errors.one_line(error)


def global_step_of(checkpoint):
  """The global step saved in `checkpoint` (0 for None)."""
  return int(tf.train.load_variable(checkpoint, 'global_step')) if checkpoint else 0

