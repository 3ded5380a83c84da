"""The runner's session hooks: what runs around each training and evaluation
step (summaries, checkpoints, signals, finite checks, step and time limits),
as TensorFlow keeps its own in basic_session_run_hooks."""
import os
import re
import time

import numpy as np
import tensorflow as tf

import tf_compat  # noqa: F401
from runner import faults

tf1 = tf.compat.v1

class EvalStepHook(tf1.train.SessionRunHook):
  """Stops evaluation after `steps` batches (None: until the input ends)."""

  def __init__(self, steps):
    self._steps, self._done = steps, 0

  def after_run(self, run_context, run_values):
    self._done += 1
    if self._steps is not None and self._done >= self._steps:
      run_context.request_stop()



class SummarySaverHook(tf1.train.SessionRunHook):
  """Saves the scaffold's summaries every `save_steps` steps or `save_secs`
  seconds, as TensorFlow's SummarySaverHook, and also at the run's last step
  (`last_step`, the start plus `steps`, or the step a signal stopped it at),
  so that a curve ends where training ended rather than at the last full
  period."""

  def __init__(self, output_dir, scaffold, save_steps=None, save_secs=None,
               steps=None, last_step=None, stopping=lambda: False):
    self._output_dir, self._scaffold = output_dir, scaffold
    self._stopping = stopping  # true: the run ends early (a signal)
    self._timer = tf1.train.SecondOrStepTimer(every_secs=save_secs,
                                              every_steps=save_steps)
    self._steps, self._max_steps = steps, last_step

  def begin(self):
    self._writer = tf1.summary.FileWriterCache.get(self._output_dir)
    self._global_step = tf1.train.get_global_step()
    self._next_step = self._written = None

  def after_create_session(self, session, coord):
    start = int(session.run(self._global_step))
    self._last_step = self._max_steps
    if self._steps is not None:
      self._last_step = start + self._steps
      if self._max_steps is not None:
        self._last_step = min(self._last_step, self._max_steps)

  def _due(self, step):
    return ((self._last_step is not None and step >= self._last_step) or
            self._timer.should_trigger_for_step(step))

  def before_run(self, run_context):
    self._request = self._next_step is None or self._due(self._next_step)
    fetches = {'global_step': self._global_step}
    if self._request and self._scaffold.summary_op is not None:
      fetches['summary'] = self._scaffold.summary_op
    return tf1.train.SessionRunArgs(fetches)

  def after_run(self, run_context, run_values):
    # The fetched step may be read before or after this run's increment, so
    # it + 1 may be one ahead. The step is read exactly after the run when
    # it is saved and when the next run may be due: the summaries land on
    # the exact period (a guess one ahead would save a step early).
    step = run_values.results['global_step'] + 1
    if self._next_step is None or self._request or self._due(step + 1):
      step = int(run_context.session.run(self._global_step))
    if self._next_step is None:
      # TensorBoard drops what a killed run wrote after its last checkpoint.
      self._writer.add_session_log(
          tf1.SessionLog(status=tf1.SessionLog.START), step)
    if self._request:
      self._timer.update_last_triggered_step(step)
      if 'summary' in run_values.results:
        self._writer.add_summary(run_values.results['summary'], step)
        self._written = step
    self._next_step = step + 1

  def end(self, session=None):
    if (self._stopping() and session is not None and
        self._scaffold.summary_op is not None and self._next_step is not None):
      # Stopped between periods: one more evaluation of the summaries (a
      # forward pass, no step) at the step the checkpoint is saved at.
      step = int(session.run(self._global_step))
      if step != self._written:
        try:
          self._writer.add_summary(session.run(self._scaffold.summary_op),
                                   step)
        except tf.errors.OutOfRangeError:
          pass  # the input has ended: nothing to summarise
    self._writer.flush()


class StopOnSignalHook(tf1.train.SessionRunHook):
  """Ends the run after the step in flight once `signals` (a
  faults.StopSignals) received one; `step` is the global step it ended at."""

  def __init__(self, signals, taken_up=lambda: None):
    self._signals, self.step = signals, None
    self.taken_up = taken_up  # told when the signal is taken up

  def begin(self):
    self._global_step = tf1.train.get_global_step()

  def after_run(self, run_context, run_values):
    if self._signals.received is not None and self.step is None:
      self.taken_up()
      self.step = int(run_context.session.run(self._global_step))
      run_context.request_stop()


class FiniteHook(tf1.train.SessionRunHook):
  """NanTensorHook for NaN and infinity in the loss or in a trainable
  variable (a huge learning rate can overflow the weights while the loss
  still reads finite), saying where: raises faults.Diverged naming the step,
  the culprit and the newest checkpoint of `model_dir` (the saver keeps
  non-finite values out of every checkpoint). Each variable is tested on its
  own device: only one bool per variable travels, each step."""

  def __init__(self, loss, model_dir):
    self._loss, self._model_dir = loss, model_dir

  def begin(self):
    self._global_step = tf1.train.get_global_step()
    self._names, self._checks = finite_checks(tf1.trainable_variables())
    self._all = (tf.reduce_all(tf.stack(self._checks)) if self._checks
                 else tf.constant(True))

  def before_run(self, run_context):
    return tf1.train.SessionRunArgs([self._loss, self._all])

  def after_run(self, run_context, run_values):
    loss, variables_finite = run_values.results
    if variables_finite and np.all(np.isfinite(loss)):
      return
    session = run_context.session
    step = int(session.run(self._global_step))
    if not np.all(np.isfinite(loss)):
      what = 'the loss is %s' % ('nan' if np.any(np.isnan(loss))
                                 else 'infinite')
    else:
      what = non_finite_variable(session, self._names, self._checks)
    raise faults.Diverged(step, what,
                          tf.train.latest_checkpoint(self._model_dir))


def finite_checks(variables):
  """(names, a bool tensor per floating variable: all its values finite),
  each computed beside its variable."""
  names, checks = [], []
  for v in variables:
    if v.dtype.base_dtype.is_floating:
      with tf1.device(v.device):
        checks.append(tf.reduce_all(tf.math.is_finite(v)))
      names.append(v.op.name)
  return names, checks


def non_finite_variable(session, names, checks):
  """'variable X is not finite' for the first such variable, or None."""
  for name, finite in zip(names, session.run(checks)):
    if not finite:
      return 'variable %s is not finite' % name
  return None


# TensorFlow's HistogramSummary error for a NaN or infinite value.
NON_FINITE_SUMMARY = re.compile(
    r'(Nan|Infinity) in (?:summary )?[Hh]istogram for: (\S+)')


class CheckpointSaverHook(tf1.train.CheckpointSaverHook):
  """CheckpointSaverHook that never writes a checkpoint it should not.

  Before a save every floating variable is checked to be finite (a
  diverged model raises faults.Diverged and the last good checkpoint stays
  the latest). A save that fails for a full disk removes its partial files,
  puts the `checkpoint` state file back as it was and raises faults.DiskFull
  naming the path, the size needed and the space left. `keep` (the readable
  checkpoints of the directory, oldest first) are the ones the saver may
  delete as it keeps keep_checkpoint_max, as MonitoredTrainingSession does
  with the state file's list. `last_saved` is (step, path) of the last save.
  """

  def __init__(self, checkpoint_dir, keep=None, **kwargs):
    super().__init__(checkpoint_dir, **kwargs)
    self._keep = list(keep or [])
    self.last_saved = (None, None)
    self._sessions = 0

  def begin(self):
    super().begin()
    self.graph = tf1.get_default_graph()
    self._names, self._checks = finite_checks(tf1.global_variables())
    self._bytes = sum(v.shape.num_elements() * v.dtype.base_dtype.size
                      for v in tf1.global_variables()
                      if v.shape.is_fully_defined())

  def after_create_session(self, session, coord):
    if self._keep:
      self._get_saver().recover_last_checkpoints(self._keep)
      self._keep = None
    self._sessions += 1
    super().after_create_session(session, coord)

  def _save(self, session, step):
    step = int(step)
    what = non_finite_variable(session, self._names, self._checks)
    if what:
      raise faults.Diverged(step, what,
                            tf.train.latest_checkpoint(self._checkpoint_dir))
    state = tf.train.get_checkpoint_state(self._checkpoint_dir)
    state_file = os.path.join(self._checkpoint_dir, 'checkpoint')
    state_text = (open(state_file, 'rb').read()
                  if os.path.isfile(state_file) else None)
    prefix = '%s-%d' % (self._save_path, step)
    if self._sessions > 1 and faults.checkpoint_problem(prefix) is None:
      # A recovered session starts from this very checkpoint (the saver
      # hook saves whenever a session is made): it is not written again.
      self.last_saved = (step, prefix)
      return False
    try:
      should_stop = super()._save(session, step)
    except (tf.errors.OpError, OSError) as e:
      if not faults.is_disk_full(e):
        raise
      faults.remove_partial_save(prefix)
      faults.restore_file(state_file, state_text)
      raise faults.DiskFull(
          'no space left on device saving checkpoint %s (it '
          'needs %s, %s free); the latest checkpoint is still %s; its partial '
          'files were removed' % (
              prefix, faults.megabytes(self._bytes),
              faults.megabytes(faults.free_bytes(self._checkpoint_dir) or 0),
              state.model_checkpoint_path if state else 'none')) from None
    self.last_saved = (step, prefix)
    return should_stop


class StopAfterSecondsHook(tf1.train.SessionRunHook):

  def __init__(self, seconds):
    self._seconds, self._start = seconds, None

  def begin(self):
    self._start = time.time()

  def after_run(self, run_context, run_values):
    if time.time() - self._start >= self._seconds:
      run_context.request_stop()


class LastStepHook(tf1.train.SessionRunHook):
  """`step`: the global step after this task's last completed run (the
  other hooks fetch the same tensor, so it costs no transfer)."""

  def __init__(self):
    self.step = 0

  def begin(self):
    self._global_step = tf1.train.get_global_step()

  def before_run(self, run_context):
    return tf1.train.SessionRunArgs(self._global_step)

  def after_run(self, run_context, run_values):
    self.step = int(run_values.results)


class JobEndHook(tf1.train.SessionRunHook):
  """The chief: writes JobEnd.RUNNING on every ps at each session it makes.
  Another worker: stops after the step at which it reads that the chief
  ended; `chief_status` is then the chief's exit status."""

  def __init__(self, job_end, is_chief):
    self._job_end, self._is_chief = job_end, is_chief
    self.chief_status = None

  def after_create_session(self, session, coord):
    if self._is_chief:
      self._job_end.write(session, self._job_end.RUNNING)

  def before_run(self, run_context):
    if not self._is_chief:
      return tf1.train.SessionRunArgs(self._job_end.value)
    return None

  def after_run(self, run_context, run_values):
    if self._is_chief or run_values.results == self._job_end.RUNNING:
      return
    self.chief_status = int(run_values.results)
    run_context.request_stop()
