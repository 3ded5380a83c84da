"""Progress on the terminal: how far along a run is and how long is left.

Training logs every `--log_every_n_steps` steps (TF-Slim's cadence):

    step 300/800 (37%): loss = 0.1075 (1171.5 images/sec; 50 images/step), ETA 26s
    step 300/800 (37%): loss = 0.1075 (1171.5 images/sec; 32 images/step = 2 clones x 16), ETA 26s

with the fraction and the ETA when the last step is known (and the clones
sharing a step's batch), and writes the same images/sec to TensorBoard as
`images_per_sec`. When the steps since the last line waited for their
batches (the input pipeline is the limit, as it can be on a GPU) for at
least INPUT_BOUND of the time, a second line says so:

    step 300/800 (37%): loss = 0.1075 (171.5 images/sec; 50 images/step), ETA 2m55s
    input-bound: 64% of the time waiting for batches (more --num_preprocessing_threads, or a faster preprocessing)
 The chief's last step also computes the final summaries
(TF-Slim's histograms of every activation and variable), so its line's rate
says `images/sec incl. the final summaries`: not a slowdown of training. Evaluation logs its first
batch, then at most one line every `every_secs` seconds, and its last batch:

    eval: batch 2/4 (50%), ETA 1s
"""
import time

import tensorflow as tf

tf1 = tf.compat.v1
# Seconds between an evaluation's progress lines (eval's --log_every_n_secs).
EVERY_SECS = 10.0
# The fraction of the time spent waiting for batches from which a training
# line says the run is input-bound.
INPUT_BOUND = 0.1


def print_now(line):
  """print, flushed: a progress line is no use once the run is over."""
  print(line, flush=True)


def format_duration(seconds):
  """45s, 3m05s, 2h07m, 3d04h: two units at most, rounded down."""
  seconds = max(int(seconds), 0)
  minutes, secs = divmod(seconds, 60)
  hours, minutes = divmod(minutes, 60)
  days, hours = divmod(hours, 24)
  if days:
    return '%dd%02dh' % (days, hours)
  if hours:
    return '%dh%02dm' % (hours, minutes)
  if minutes:
    return '%dm%02ds' % (minutes, secs)
  return '%ds' % secs


def fraction(done, total):
  """'3/8 (37%)': the percentage rounded down, so 100% means done."""
  return '%d/%d (%d%%)' % (done, total, 100 * done // max(total, 1))


class TrainingProgressHook(tf1.train.SessionRunHook):
  """Logs step, loss, images/sec (and, with `max_steps`, the fraction done
  and an ETA) every `every_n_steps` steps; writes `images_per_sec` to
  `summary_dir`'s event file (None: no summary, e.g. on a non-chief worker).

  `loss` and `images` are tensors fetched with every step: `images` is the
  number of images the step took, all `clones` together. The ETA is the steps
  left times the mean time of the steps after the first one (which includes
  the start-up; a line at the first step can only use it).
  """

  def __init__(self, loss, images, every_n_steps, max_steps=None,
               summary_dir=None, log=print_now, clock=time.time, clones=1,
               input_wait=None):
    """`input_wait`: seconds the step waited for its batch (a scalar tensor,
    runner.estimator.INPUT_WAIT_SECONDS), or None."""
    self._loss, self._images_tensor = loss, images
    self._input_wait = input_wait
    self._waited, self._wait_since = 0.0, None
    self._clones = clones
    self._every = max(int(every_n_steps or 1), 1)
    self._max_steps, self._summary_dir = max_steps, summary_dir
    self._log, self._clock = log, clock
    self._count = self._images = 0
    self._since = self._first_done = None
    self._writer = None

  def begin(self):
    self._step_tensor = tf1.train.get_global_step()
    if self._summary_dir:
      self._writer = tf1.summary.FileWriterCache.get(self._summary_dir)

  def before_run(self, run_context):
    if self._since is None:
      self._since = self._clock()
    fetches = [self._loss, self._images_tensor]
    if self._input_wait is not None:
      fetches.append(self._input_wait)
    return tf1.train.SessionRunArgs(fetches)

  def after_run(self, run_context, run_values):
    loss, images = run_values.results[:2]
    now = self._clock()
    self._count += 1
    self._images += int(images)
    if self._input_wait is not None:
      self._waited += float(run_values.results[2])
    first = self._first_done is None
    if self._count % self._every and not first:
      return
    # Read after the step, not fetched with it (a fetched global step may be
    # read before or after the step's own increment); in a cluster it also
    # counts the other workers' steps.
    step = int(run_context.session.run(self._step_tensor))
    if first:
      self._first_done = (step, now)
      # The first step's wait is the pipeline's start-up: not counted.
      self._waited, self._wait_since = 0.0, now
      if self._count % self._every:
        return
    elapsed = max(now - self._since, 1e-9)
    rate = self._images / elapsed
    waiting = None
    if self._input_wait is not None and now > self._wait_since:
      waiting = min(self._waited / (now - self._wait_since), 1.0)
    self._log(self.line(step, loss, rate, int(images), now,
                        (now - self._since) / self._count))
    if input_bound_note(waiting):
      self._log(input_bound_note(waiting))
    if self._writer is not None:
      self._writer.add_summary(tf1.Summary(value=[tf1.Summary.Value(
          tag='images_per_sec', simple_value=rate)]), step)
    self._count, self._images, self._since = 0, 0, now
    self._waited, self._wait_since = 0.0, now

  def line(self, step, loss, rate, images, now, recent_per_step):
    per_step = '%d images/step' % images
    if self._clones > 1:
      per_step += (' = %d clones x %d' % (self._clones, images // self._clones)
                   if images % self._clones == 0
                   else ' over %d clones' % self._clones)
    final = ' incl. the final summaries' if (
        self._summary_dir and self._max_steps and
        step >= self._max_steps) else ''
    text = 'step %s: loss = %.4f (%.1f images/sec%s; %s)' % (
        fraction(step, self._max_steps) if self._max_steps else step, loss,
        rate, final, per_step)
    if not self._max_steps:
      return text
    first_step, first_time = self._first_done
    per_step = recent_per_step  # only the first step so far: the start-up's
    if step > first_step:
      per_step = (now - first_time) / (step - first_step)
    return text + ', ETA ' + format_duration(
        per_step * max(self._max_steps - step, 0))

  def end(self, session):
    if self._writer is not None:
      self._writer.flush()


def input_bound_note(waiting):
  """'input-bound: 64% of the time waiting for batches (...)' when the
  fraction `waiting` (None: unknown) is at least INPUT_BOUND, else ''."""
  if waiting is None or waiting < INPUT_BOUND:
    return ''
  return ('input-bound: %d%% of the time waiting for batches (more '
          '--num_preprocessing_threads, or a faster preprocessing)'
          % round(100 * waiting))


class ChanceLevelHook(tf1.train.SessionRunHook):
  """Says, in one line, when training has stayed at chance level: the
  training batches' accuracy over each of the last `window` steps' windows
  this task ran, for two windows' worth of steps, was at most `factor` /
  num_classes. A diverged
  model (weights blown up, every unit dead) predicts one class and stays
  there with a finite loss: without this line it would finish "trained" and
  evaluate at chance. Printed once when it happens, naming the global step
  since which it holds, and again at the end if it still holds."""

  def __init__(self, correct, images, num_classes, window=100, factor=1.5,
               log=print_now):
    self._correct, self._images = correct, images
    self._num_classes, self._window = max(int(num_classes), 2), int(window)
    self._chance = float(factor) / self._num_classes
    self._log = log
    self._recent = []  # (global step, correct, images) of the last window

  def begin(self):
    self._step_tensor = tf1.train.get_global_step()
    self._recent, self._since, self._told = [], None, False
    _chance_at_end[:] = [None]

  def before_run(self, run_context):
    return tf1.train.SessionRunArgs(
        [self._correct, self._images, self._step_tensor])

  def after_run(self, run_context, run_values):
    correct, images, step = run_values.results
    self._recent.append((int(step) + 1, float(correct), int(images)))
    del self._recent[:-self._window]
    if len(self._recent) < self._window:
      return
    if self.accuracy() > self._chance:
      self._since, self._told = None, False
      return
    if self._since is None:
      self._since = self._recent[0][0]
    # Two windows in a row: a run learning slowly at its start is not told.
    if not self._told and self._recent[-1][0] - self._since >= 2 * self._window - 1:
      self._told = True
      self._log(self.line())

  def accuracy(self):
    return (sum(c for _, c, _ in self._recent) /
            max(sum(n for _, _, n in self._recent), 1))

  def line(self):
    return ('training is at chance level since step %d: batch accuracy %.3f '
            'over the last %d steps (chance %.3f, %d classes): the model '
            'diverged or is not learning; try a lower --learning_rate' % (
                self._since, self.accuracy(), len(self._recent),
                1.0 / self._num_classes, self._num_classes))

  def end(self, session):
    if self._since is not None:
      self._log(self.line())
      _chance_at_end[:] = [self.line()]


_chance_at_end = [None]  # the last training run's ChanceLevelHook verdict


def chance_level_at_end():
  """The chance-level line of this process's last training run when its
  model was at chance level when it ended, else None: the scripts end with it
  (a run at chance must not end with a line that reads like success)."""
  return _chance_at_end[0]


class EvaluationProgress(object):
  """Logs `eval: batch N/total (p%), ETA t` for the first batch, then at most
  every `every_secs` seconds, and for the last batch: call `batch_done()`
  after each batch."""

  def __init__(self, total_batches, every_secs=EVERY_SECS, log=print_now,
               clock=time.time):
    self._total, self._every = int(total_batches), float(every_secs)
    self._log, self._clock = log, clock
    self.restart()

  def restart(self):
    self._done, self._start, self._last_line = 0, self._clock(), None

  def batch_done(self):
    self._done += 1
    now = self._clock()
    if not (self._last_line is None or self._done >= self._total or
            now - self._last_line >= self._every):
      return
    self._last_line = now
    left = max(self._total - self._done, 0)
    eta = (now - self._start) / self._done * left
    self._log('eval: batch %s, ETA %s' % (fraction(self._done, self._total),
                                          format_duration(eta)))


class EvaluationProgressHook(tf1.train.SessionRunHook):
  """EvaluationProgress as a hook of an evaluation's session, timed from its
  first batch."""

  def __init__(self, total_batches, every_secs=EVERY_SECS, log=print_now,
               clock=time.time):
    self._progress = EvaluationProgress(total_batches, every_secs, log, clock)
    self._started = False

  def begin(self):
    self._started = False

  def before_run(self, run_context):
    if not self._started:
      self._progress.restart()
      self._started = True

  def after_run(self, run_context, run_values):
    self._progress.batch_done()
