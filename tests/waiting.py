"""Bounded waits on what a test starts: tasks (deployment.launch.Task), or
anything with a `name`, `poll()` (None while it runs) and `output()`, such
as test_slurm_real's Slurm job."""
import time


def wait_for(predicate, seconds, what, *watched):
  """Returns once predicate() holds; fails after `seconds`, or at once when
  one of the `watched` has ended without it, with their output."""
  deadline = time.time() + seconds
  while True:
    # Who has ended is read before the predicate: one that fulfils it and
    # ends between the two reads must not fail the wait (a Slurm job that
    # ended so failed a wait for its end, once in three loaded runs).
    ended = [w for w in watched if w.poll() is not None]
    if predicate():
      return
    if ended:
      raise AssertionError('%s exited (%s) while waiting for %s:\n%s' % (
          ended[0].name, ended[0].poll(), what, ended[0].output()[-3000:]))
    if time.time() > deadline:
      raise AssertionError('timed out after %ds waiting for %s%s' % (
          seconds, what, ''.join('\n%s, still running:\n%s' % (
              w.name, w.output()[-2000:]) for w in watched)))
    time.sleep(0.5)
