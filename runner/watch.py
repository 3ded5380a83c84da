"""What a cluster task does when its main thread cannot: a thread that
watches the other tasks and the stop signals while training blocks.

A training step, or making its session, can block in TensorFlow's C++ for
ever on a task that is gone: a master waits for every device of the cluster
before a session starts, a step for its ps or, in an all-reduce, for its
peers. Python runs a signal handler only between bytecodes, so a thread
blocked there also ignores SIGTERM until Slurm or Kubernetes kills it 30 s
later. This thread does not block: it probes the tasks' addresses (a TCP
connect) and, through `signal.set_wakeup_fd`, learns of a signal the moment
it arrives. Its two ways out end the process (os._exit), since nothing else
frees a thread blocked in C++:
- a watched task missed for `timeout_secs` after it had answered: one line
  when it is first missed, one when it is given up on, status 200
  (retryable: every task resumes from the last checkpoint when restarted);
- a stop signal that the training loop has not taken up within
  `grace_secs` while another task is down: the step in flight waits on it,
  so the last completed step is saved (when the variables are reachable)
  and the process ends with 128 + the signal.
"""
import os
import select
import signal
import socket
import sys
import threading
import time

from deployment import cluster as cluster_lib
from runner import faults

_POLL_SECS = 1.0
GRACE_SECS = 2.0


def program_name():
  return os.path.splitext(os.path.basename(sys.argv[0] or 'python'))[0]


def end_process(status, line=None, error=True):
  """Prints `line` (as the scripts print errors, when `error`) and ends the
  process at once with `status`."""
  if line:
    if error:
      print('%s: error: %s' % (program_name(), line), file=sys.stderr)
    else:
      print(line)
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(status)  # pylint: disable=protected-access


class TaskWatch(object):
  """While entered, watches `peers` ([(name, address)]: given up on after
  `timeout_secs`; None: only probed) and `others` (probed at a signal), and
  takes stop signals a blocked training loop cannot.

  `step()` is the last completed global step; `save()` (the chief's) saves
  a checkpoint from this thread and returns (step, path); `done()` says
  the job ended (then a lost task ends this one with status 0); `report`
  prints a line; `ending(status, line)` is told before the process ends.
  """

  def __init__(self, peers, others=(), timeout_secs=None, step=lambda: 0,
               report=print, done=lambda: False, ending=lambda s, l: None,
               grace_secs=GRACE_SECS, poll_secs=_POLL_SECS):
    self._peers = list(peers)
    self._others = [p for p in others if p not in self._peers]
    self._timeout, self._grace, self._poll = timeout_secs, grace_secs, poll_secs
    self._step, self._report, self._done = step, report, done
    self._ending = ending
    self.save = None  # () -> (step, path) of a checkpoint saved now, or None
    self.acknowledged = False  # the training loop took the signal up
    self._missed, self._seen = {}, set()
    self._signal = self._signal_time = None
    self._stop = threading.Event()
    self._thread = None
    self._wakeup = self._previous_fd = None

  # -- entering and leaving -------------------------------------------------
  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      reader, writer = socket.socketpair()
      reader.setblocking(False)
      writer.setblocking(False)
      self._wakeup = (reader, writer)
      # The handlers (faults.StopSignals) are installed by the caller; the
      # interpreter writes each signal's number here as it arrives.
      self._previous_fd = signal.set_wakeup_fd(writer.fileno(),
                                               warn_on_full_buffer=False)
    self._thread = threading.Thread(target=self._run, name='task-watch',
                                    daemon=True)
    self._thread.start()
    return self

  def __exit__(self, *exc):
    self._stop.set()
    if self._thread is not None:
      self._thread.join(self._poll + 5)
    if self._wakeup is not None:
      signal.set_wakeup_fd(self._previous_fd)
      for end in self._wakeup:
        end.close()
      self._wakeup = None
    return False

  # -- the thread -----------------------------------------------------------
  def _run(self):
    while not self._stop.is_set():
      self._take_signals()
      if self._stop.is_set():
        return
      self._check_peers()
      if (self._signal is not None and not self.acknowledged and
          time.time() - self._signal_time >= self._grace):
        down = self._down(self._peers + self._others)
        if down:
          self._stop_blocked(down)

  def _take_signals(self):
    if self._wakeup is None:
      self._stop.wait(self._poll)
      return
    ready, _, _ = select.select([self._wakeup[0]], [], [], self._poll)
    if not ready:
      return
    try:
      data = self._wakeup[0].recv(64)
    except OSError:
      return
    for signum in data:
      if signum in faults.STOP_SIGNALS and self._signal is None:
        self._signal, self._signal_time = signum, time.time()

  @staticmethod
  def _down(tasks):
    return [name for name, address in tasks
            if not cluster_lib.answers(address)]

  def _check_peers(self):
    now = time.time()
    for name, address in self._peers:
      if cluster_lib.answers(address):
        if name in self._missed:
          self._report('%s answers again after %.0fs' % (
              name, now - self._missed.pop(name)))
        self._seen.add(name)
        continue
      if name not in self._seen:
        continue  # not up yet: TensorFlow waits for it quietly
      if name not in self._missed:
        self._missed[name] = now
        if self._timeout is not None:
          self._report('%s is not answering at step %d; waiting up to %gs '
                       'for it to come back (--peer_timeout_secs)' % (
                           name, self._step(), self._timeout))
      elif (self._timeout is not None and
            now - self._missed[name] >= self._timeout):
        self._give_up(name)

  def _give_up(self, name):
    if self._done():
      self._end(0, '%s is gone and the job is done (step %d)' % (
          name, self._step()), error=False)
    self._end(200, '%s did not come back within %gs (at step %d); this task '
              'stops: restart the job to resume from the last checkpoint' % (
                  name, self._timeout, self._step()))

  def _stop_blocked(self, down):
    step, checkpoint, why = self._step(), None, None
    waiting = ', '.join(down)
    if self.save is None:
      pass  # not the chief: the chief saves
    elif any(name.startswith('ps:') for name in down):
      why = 'the variables are on %s' % waiting
    else:
      saved = []
      saver = threading.Thread(target=lambda: saved.append(self.save()),
                               daemon=True)
      saver.start()
      saver.join(5.0)
      if not saved:
        why = 'saving it failed or took more than 5s'
      elif saved[0] is None:
        why = 'no session yet'
      else:
        step, checkpoint = saved[0]
    stopped = faults.Stopped(self._signal, step, checkpoint)
    if why:
      line = ('stopped by %s at step %d while waiting on %s; no checkpoint at '
              'this step: %s' % (stopped.signal_name, step, waiting, why))
    else:
      line = '%s (the step in flight waited on %s)' % (stopped, waiting)
    self._end(stopped.exit_status, line, error=False)

  def _end(self, status, line, error=True):
    try:
      self._ending(status, line)
    finally:
      end_process(status, line, error)
