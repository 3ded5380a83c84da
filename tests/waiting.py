"""Bounded waits on the tasks a test starts (deployment.launch.Task)."""
import time


def wait_for(predicate, seconds, what, *watched):
  """Returns once predicate() holds; fails after `seconds`, or at once with
  its output when one of the `watched` tasks has exited meanwhile."""
  deadline = time.time() + seconds
  while time.time() < deadline:
    # Who has exited is read before the predicate: a task that fulfils it and
    # exits between the two reads must not fail the wait (test_slurm_real's
    # wait on a job's state did, once).
    exited = [task for task in watched if task.poll() is not None]
    if predicate():
      return
    if exited:
      raise AssertionError('%s exited (%s) while waiting for %s:\n%s' % (
          exited[0].name, exited[0].poll(), what, exited[0].output()[-3000:]))
    time.sleep(0.5)
  raise AssertionError('timed out after %ds waiting for %s' % (seconds, what))
