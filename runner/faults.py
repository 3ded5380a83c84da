"""What real machines do to a training run, met in one place.

- SIGTERM / SIGINT (a scheduler's preemption, Ctrl-C): `StopSignals` turns
  them into a flag while training runs; the runner finishes the step in
  flight, saves a checkpoint at that step and raises `Stopped`. The previous
  handlers are back afterwards, and a second signal acts as it would have
  without us (Ctrl-C twice stops at once).
- Checkpoints that cannot be read (a truncated or missing data file, a bad
  checksum): `newest_readable_checkpoint` walks a directory's checkpoints
  newest first, reads each one whole, names those it skips and never deletes
  or changes anything.
- Two trainers on one directory: `TrainDirLock`, an flock on
  <train_dir>/trainer.lock holding the owner's pid. The kernel releases it
  when the process ends in any way (SIGKILL too), so a stale file never
  blocks; the file itself stays.
- A full disk while saving: `DiskFull`, raised by the runner's saver after
  it removed the partial files, names the path, the size the checkpoint
  needs and the space left.
- Divergence: `Diverged` names the step at which the loss (or a variable)
  stopped being finite and the last good checkpoint; the runner never saves
  a checkpoint holding non-finite values.
"""
import errno
import fcntl
import glob
import json
import os
import re
import shutil
import signal
import socket
import threading
import time

import tensorflow as tf
from tensorflow.python.training import py_checkpoint_reader

tf1 = tf.compat.v1

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
LOCK_FILE = 'trainer.lock'


# -- signals ------------------------------------------------------------------
class Stopped(Exception):
  """Training stopped by a signal after a whole step. `checkpoint` is the one
  saved at `step` (None on a task that does not save: a non-chief worker).
  The scripts exit with `exit_status`, the shell's 128 + signal number
  (143 for SIGTERM, 130 for SIGINT)."""

  def __init__(self, signum, step, checkpoint=None):
    self.signum, self.step, self.checkpoint = signum, step, checkpoint
    super().__init__(str(self))

  signal_name = property(lambda self: signal.Signals(self.signum).name)
  exit_status = property(lambda self: 128 + self.signum)

  def __str__(self):
    return 'stopped by %s at step %d; %s' % (
        self.signal_name, self.step,
        'checkpoint %s' % self.checkpoint if self.checkpoint
        else 'no checkpoint (the chief saves)')


class StopSignals(object):
  """While entered (in the main thread), SIGTERM and SIGINT only set
  `received` (the first signal's number); a second one is handled as before.
  The previous handlers are restored on exit. Outside the main thread Python
  cannot take signals: then it does nothing."""

  def __init__(self, signals=STOP_SIGNALS):
    self._signals, self._previous = signals, {}
    self.received = None

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      for signum in self._signals:
        self._previous[signum] = signal.signal(signum, self._handle)
    return self

  def _handle(self, signum, frame):
    if self.received is None:
      self.received = signum
      return
    previous = self._previous.get(signum)
    self._restore()
    if callable(previous):
      previous(signum, frame)
    elif previous == signal.SIG_DFL:
      os.kill(os.getpid(), signum)  # the default action, now restored

  def _restore(self):
    for signum, handler in self._previous.items():
      signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
    self._previous = {}

  def __exit__(self, *exc):
    self._restore()
    return False


# -- readable checkpoints -------------------------------------------------------
class NoReadableCheckpoint(ValueError):
  pass


def checkpoint_problem(prefix):
  """None when every tensor of the checkpoint `prefix` reads back (index and
  data shards present, sizes and checksums right), else why not, one line.
  Reading it whole costs about what restoring it does (20 ms for LeNet's
  13 MB) and is the one test that catches every kind of damage."""
  try:
    reader = py_checkpoint_reader.NewCheckpointReader(prefix)
    for name in reader.get_variable_to_dtype_map():
      reader.get_tensor(name)
  except Exception as e:  # pylint: disable=broad-except
    # The reader raises OpError, IndexError ("Read less bytes than
    # requested": a truncated file), ValueError...: all mean unreadable.
    text = getattr(e, 'message', None) or str(e) or type(e).__name__
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1] if lines else type(e).__name__
  return None


def _step_of_name(prefix):
  match = re.search(r'-(\d+)$', prefix)
  return int(match.group(1)) if match else -1


def checkpoint_candidates(directory):
  """The checkpoint prefixes of `directory`, newest first: those its
  `checkpoint` state file lists, and those it does not list that are older
  than its newest (a checkpoint newer than the state may still be being
  written by a trainer), ordered by the step in their name, then time."""
  state = tf.train.get_checkpoint_state(directory)
  listed = []
  if state is not None:
    # get_checkpoint_state has already joined relative paths to `directory`.
    for path in list(state.all_model_checkpoint_paths) + [
        state.model_checkpoint_path]:
      if path and path not in listed:
        listed.append(path)
  newest_listed = max([_step_of_name(p) for p in listed], default=None)
  found = []
  for index in glob.glob(os.path.join(glob.escape(directory), '*.index')):
    prefix = index[:-len('.index')]
    if UNREADABLE in os.path.basename(prefix):
      continue  # set aside by set_aside
    if prefix not in listed and (newest_listed is None or
                                 _step_of_name(prefix) < newest_listed):
      found.append(prefix)

  def mtime(prefix):
    try:
      return os.path.getmtime(prefix + '.index')
    except OSError:
      return 0.0

  return sorted(listed + found, key=lambda p: (_step_of_name(p), mtime(p)),
                reverse=True)


def readable_checkpoint(directory):
  """(the newest checkpoint of `directory` that reads back whole or None,
  [(prefix, why unreadable) of the newer ones skipped]). Nothing is deleted
  or changed. Raises NoReadableCheckpoint, naming them all, when there are
  checkpoints and none is readable."""
  skipped = []
  for prefix in checkpoint_candidates(directory):
    problem = checkpoint_problem(prefix)
    if problem is None:
      return prefix, skipped
    skipped.append((prefix, problem))
  if skipped:
    raise NoReadableCheckpoint('no readable checkpoint in %s: %s' % (
        directory, '; '.join('%s (%s)' % (os.path.basename(p), why)
                             for p, why in skipped)))
  return None, skipped


def skipped_line(prefix, problem):
  return 'skipped checkpoint %s: unreadable (%s)' % (prefix, problem)


def newest_readable_checkpoint(directory, report=None, reported=None):
  """readable_checkpoint's checkpoint; each one skipped is named through
  `report` (once, when a `reported` set is kept across calls)."""
  try:
    newest, skipped = readable_checkpoint(directory)
  except NoReadableCheckpoint:
    skipped, newest = [(p, checkpoint_problem(p))
                       for p in checkpoint_candidates(directory)], None
    _report_skipped(skipped, report, reported)
    raise
  _report_skipped(skipped, report, reported)
  return newest


def _report_skipped(skipped, report, reported):
  for prefix, problem in skipped:
    if report is not None and (reported is None or prefix not in reported):
      report(skipped_line(prefix, problem))
      if reported is not None:
        reported.add(prefix)


def follow_checkpoints(directory, interval_secs, timeout_secs=None,
                       stop=lambda: False, report=None, poll_secs=0.5):
  """Yields each new newest readable checkpoint of `directory` (a newer step
  than the last one yielded), at most one per `interval_secs`; ends after
  `timeout_secs` without one, or as soon as `stop()` is true (checked every
  `poll_secs`, so a signal is seen at once). A checkpoint is read whole once
  it is a candidate; an unreadable one is named once and read again only if
  its index changes."""
  last_step, last_yield, unreadable = None, None, {}
  waiting_since = time.time()
  while not stop():
    if last_yield is None or time.time() - last_yield >= interval_secs:
      newest = None
      if os.path.isdir(directory):
        for prefix in checkpoint_candidates(directory):
          if last_step is not None and _step_of_name(prefix) <= last_step:
            break
          stamp = _stamp(prefix)
          if unreadable.get(prefix) == stamp:
            continue
          problem = checkpoint_problem(prefix)
          if problem is None:
            newest = prefix
            break
          unreadable[prefix] = stamp
          if report is not None:
            report(skipped_line(prefix, problem))
      if newest is not None:
        last_step, last_yield = _step_of_name(newest), time.time()
        yield newest
        waiting_since = time.time()
        continue
    if timeout_secs is not None and time.time() - waiting_since > timeout_secs:
      return
    time.sleep(poll_secs)


def _stamp(prefix):
  try:
    stat = os.stat(prefix + '.index')
  except OSError:
    return None
  return stat.st_mtime, stat.st_size


UNREADABLE = '.unreadable'


def set_aside(prefix):
  """Renames the files of an unreadable checkpoint to <prefix>.unreadable*
  (kept for inspection; a later save of the same step cannot overwrite them,
  and they are no longer candidates); returns the new prefix."""
  target = prefix + UNREADABLE
  n = 1
  while glob.glob(glob.escape(target) + '.*'):
    n += 1
    target = '%s%s%d' % (prefix, UNREADABLE, n)
  for path in glob.glob(glob.escape(prefix) + '.*'):
    if not path[len(prefix):].startswith(UNREADABLE):
      os.rename(path, target + path[len(prefix):])
  return target


# -- one trainer per directory ----------------------------------------------------
class TrainDirInUse(ValueError):
  pass


class TrainDirLock(object):
  """An exclusive flock on <directory>/trainer.lock while entered; the file
  holds the owner's pid and host. A second holder fails at once with
  TrainDirInUse naming the directory and the owner."""

  def __init__(self, directory):
    self.directory = directory
    self.path = os.path.join(directory, LOCK_FILE)
    self._fd = None

  def __enter__(self):
    os.makedirs(self.directory, exist_ok=True)
    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      os.close(fd)
      if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
        raise
      raise TrainDirInUse(
          "train_dir '%s' is in use by another trainer (%s, holding %s); "
          'wait for it to end or train into another directory' % (
              self.directory, self._owner(), self.path)) from None
    os.ftruncate(fd, 0)
    os.write(fd, ('pid %d on %s\n' % (os.getpid(),
                                      socket.gethostname())).encode())
    self._fd = fd
    return self

  def _owner(self):
    # The owner writes its pid right after locking: wait a moment for it.
    for _ in range(20):
      try:
        with open(self.path) as f:
          text = f.read().strip()
      except OSError:
        text = ''
      if text:
        return text
      time.sleep(0.05)
    return 'pid unknown'

  def __exit__(self, *exc):
    if self._fd is not None:
      os.close(self._fd)  # releases the lock; the file stays (see above)
      self._fd = None
    return False


# -- a full disk ------------------------------------------------------------------
class DiskFull(OSError):
  """ENOSPC, with a message that says what was being written."""

  def __init__(self, message):
    super().__init__(errno.ENOSPC, message)

  def __str__(self):
    return self.strerror


def is_disk_full(error):
  """Whether an error (TensorFlow's or Python's) comes from ENOSPC. TF
  reports it as ResourceExhaustedError, whose message ends with an
  out-of-memory hint: the cause is in the text."""
  return (getattr(error, 'errno', None) == errno.ENOSPC or
          'No space left on device' in (getattr(error, 'message', None)
                                        or str(error)))


def megabytes(size):
  return '%.1f MB' % (size / 1e6)


def free_bytes(directory):
  try:
    stat = os.statvfs(directory)
  except OSError:
    return None
  return stat.f_bavail * stat.f_frsize


def remove_partial_save(prefix):
  """Removes what a failed save of `prefix` (model.ckpt-N) left: its
  `_temp*` directory of shards, its files and TensorFlow's `*.tempstate*`
  files of interrupted atomic writes in the directory."""
  directory = os.path.dirname(prefix)
  for path in (glob.glob(glob.escape(prefix) + '_temp*') +
               glob.glob(glob.escape(prefix) + '.*') +
               glob.glob(os.path.join(glob.escape(directory), '*.tempstate*'))):
    if os.path.isdir(path):
      shutil.rmtree(path, ignore_errors=True)
    else:
      try:
        os.remove(path)
      except OSError:
        pass


def restore_file(path, content):
  """Puts `path` back to `content` (bytes; None: no file), atomically."""
  if content is None:
    if os.path.exists(path):
      os.remove(path)
    return
  if os.path.isfile(path) and open(path, 'rb').read() == content:
    return
  temp = path + '.restoring'
  with open(temp, 'wb') as f:
    f.write(content)
  os.replace(temp, path)


# -- divergence -------------------------------------------------------------------
class Diverged(tf1.train.NanLossDuringTrainingError):
  """The loss (or a variable) became NaN or infinite at `step`; `checkpoint`
  is the last one saved (all finite), or None."""

  def __init__(self, step, what, checkpoint):
    super().__init__()
    self.step, self.what, self.checkpoint = step, what, checkpoint

  def __str__(self):
    return 'training diverged at step %d: %s; the last good checkpoint is %s' % (
        self.step, self.what, self.checkpoint or 'none (none was saved)')


# -- a crash loop ------------------------------------------------------------------
STARTS_FILE = 'starts.json'


class CrashLoop(ValueError):
  """Training started too many times in a row without a newer checkpoint:
  permanent (status 1), so that no scheduler restarts it again."""


class StartLog(object):
  """The chief's starts in `directory`/starts.json: the step each resumed
  from and how it ended (its status and last line; none when it was killed
  without a word). When the last `limit` starts all began at today's step,
  restarting evidently repeats the failure (killed at the same step for
  memory, a bad node, a bug): `begin` raises CrashLoop naming the step and
  the last causes. A Kubernetes TFJob's backoffLimit does not bound its
  ExitCode restarts and an sbatch script requeues each retryable status, so
  this count is what ends such a loop. limit 0: no limit."""

  KEEP = 20

  def __init__(self, directory, limit):
    self.path = os.path.join(directory, STARTS_FILE)
    self._limit = limit
    self._starts = []

  def begin(self, step):
    try:
      with open(self.path) as f:
        self._starts = json.load(f)['starts'][-self.KEEP:]
    except (OSError, ValueError, KeyError, TypeError):
      self._starts = []  # none yet, or unreadable: count afresh
    same = 0
    for start in reversed(self._starts):
      if start.get('step') != step:
        break
      same += 1
    if self._limit and same >= self._limit:
      causes = [self._cause(s) for s in self._starts[-same:]][-3:]
      raise CrashLoop(
          '%d starts in a row ended at step %d without a newer checkpoint '
          '(--max_starts_without_progress=%d; the last: %s); fix the cause, '
          'then delete %s to train again' % (
              same, step, self._limit, '; '.join(causes), self.path))
    self._starts.append({'step': int(step), 'time': time.time(),
                         'host': socket.gethostname(), 'pid': os.getpid(),
                         'status': None, 'cause': None})
    self._write()

  def end(self, status, cause):
    if self._starts and self._starts[-1].get('pid') == os.getpid():
      self._starts[-1].update(status=int(status), cause=cause)
      self._write()

  @staticmethod
  def _cause(start):
    if start.get('status') is None:
      return 'ended without a word (killed: SIGKILL, out of memory, a lost node)'
    return 'status %d: %s' % (start['status'], start.get('cause') or '')

  def _write(self):
    temporary = self.path + '.tmp'
    try:
      with open(temporary, 'w') as f:
        json.dump({'starts': self._starts[-self.KEEP:]}, f, indent=1)
      os.replace(temporary, self.path)
    except OSError:
      pass  # a full disk: the count is advice, training goes on
