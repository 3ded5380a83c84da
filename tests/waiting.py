"""Bounded waits on the tasks a test starts (deployment.launch.Task)."""
import time


def wait_for(predicate, seconds, what, *watched):
  """Returns once predicate() holds; fails after `seconds`, or at once with
  its output when one of the `watched` tasks has exited meanwhile."""
  deadline = time.time() + seconds
  while time.time() < deadline:
    if predicate():
      return
    for task in watched:
      if task.poll() is not None:
        raise AssertionError('%s exited (%s) while waiting for %s:\n%s' % (
            task.name, task.poll(), what, task.output()[-3000:]))
    time.sleep(0.5)
  raise AssertionError('timed out after %ds waiting for %s' % (seconds, what))
