"""What the processes of a run hold, sampled while it runs: each task's
threads and resident memory (/proc/<pid>/status) against the training step.

    python benchmarks/task_resources.py [--steps=N] -- python -m deployment.launch --workers=2 -- \
        train_image_classifier.py ... --variable_update=collective_all_reduce
    python benchmarks/task_resources.py -- python train_image_classifier.py ...

runs the command, reads its output for the tasks ('launch: started' lines:
the launcher's tasks and evaluator; else the command's own process) and the
step (the chief's progress lines), and prints per task its threads and
resident MB at 20%, 50% and 85% of the steps and its most threads, then
whether the run holds the rule: a leak is growth with the steps, so a run
is judged by two points of its own, not by a time: between 20% and 85% of
the steps no task may gain more than 64 threads or 10% of its resident
memory, and none may ever hold more than MAX_THREADS (docs/cluster.md,
"Threads": the collective layout gained two threads per variable per step
until it aborted). The tests use the Sampler on their own runs.
"""
import os
import re
import threading

STARTED = re.compile(r'^launch: started (.*)$', re.M)
# What a task of LeNet on the digits holds on a 2-core machine is about 140
# threads; TensorFlow's pools grow with the cores.
MAX_THREADS = max(300, 140 + 8 * (os.cpu_count() or 1))
# The rule, for a long run (2,000 steps). In the test suite's runs of
# 150-300 steps the window starts inside the allocator's warm-up: there
# glibc's per-thread arenas grow by up to 12% (measured on a Zen 3 EPYC,
# where the steps are slower) before they level off, so those tests allow
# SHORT_RUN_RSS_GROWTH; a thread leak, the one this catches, is caught by
# the thread rule at any length.
MAX_RSS_GROWTH = 0.10
SHORT_RUN_RSS_GROWTH = 0.25


def launcher_tasks(log):
  """{task: pid} from the launcher's last 'launch: started' line in `log`
  (a fork of its warm interpreter is known by no other name)."""
  started = STARTED.findall(log)
  return {name: int(pid) for name, pid in
          re.findall(r'(\S+) \(pid (\d+)\)', started[-1])} if started else {}


def usage(pid):
  """(threads, resident kB) of process `pid`, None once it has gone."""
  try:
    with open('/proc/%d/status' % pid) as f:
      status = f.read()
  except OSError:
    return None
  threads = re.search(r'^Threads:\s+(\d+)', status, re.M)
  rss = re.search(r'^VmRSS:\s+(\d+) kB', status, re.M)
  if not (threads and rss):  # a zombie has no memory left
    return None
  return int(threads.group(1)), int(rss.group(1))


def _median(usages):
  """The median threads and the median resident kB of (threads, kB) pairs."""
  middle = len(usages) // 2
  return (sorted(u[0] for u in usages)[middle],
          sorted(u[1] for u in usages)[middle])


class Sampler(threading.Thread):
  """Samples every `every` seconds, until `stop()`: `tasks()` gives the
  {name: pid} to read and `step()` the run's step now (None before the
  first); `samples` is a list of (step, {name: (threads, rss kB)})."""

  def __init__(self, tasks, step, every=0.25):
    super().__init__(daemon=True)
    self._tasks, self._step, self._every = tasks, step, every
    self._done = threading.Event()
    self.samples = []

  def run(self):
    while not self._done.is_set():
      step = self._step()
      if step is not None:
        now = {}
        for name, pid in self._tasks().items():
          used = usage(pid)
          if used:
            now[name] = used
        if now:
          self.samples.append((step, now))
      self._done.wait(self._every)

  def stop(self):
    self._done.set()
    self.join(5)
    return self

  def problems(self, steps, max_threads=MAX_THREADS, names=None,
               max_rss_growth=MAX_RSS_GROWTH):
    """What breaks the rule above over a run of `steps` steps, one line
    each, for the tasks `names` (default: every task sampled); [] when
    none. A task sampled at neither end of the window is a problem too: the
    rule would hold by not looking. `max_rss_growth`: the share the resident
    memory may grow by across the window."""
    lines = []
    names = names or sorted({n for _, now in self.samples for n in now})
    low, high = 0.2 * steps, 0.85 * steps
    for name in names:
      seen = [(step, now[name]) for step, now in self.samples if name in now]
      if not seen:
        lines.append('%s: never sampled' % name)
        continue
      most = max(seen, key=lambda s: s[1][0])
      if most[1][0] > max_threads:
        lines.append('%s: %d threads at step %d (at most %d)' % (
            name, most[1][0], most[0], max_threads))
      window = [s for s in seen if low <= s[0] <= high]
      # The chief's step lines come every few steps (an asynchronous one's
      # global step jumps): the window's ends must span its middle at least.
      if not window or window[0][0] > 0.4 * steps or (
          window[-1][0] < 0.6 * steps):
        lines.append('%s: not sampled across steps %d-%d (%s)' % (
            name, low, high, [s for s, _ in window][:3] +
            [s for s, _ in window][-3:]))
        continue
      # Each end is the median of its samples within 10% of the steps: one
      # reading of the resident memory swings by several per cent as the
      # allocator returns and takes pages.
      first, last = window[0][0], window[-1][0]
      early = [used for step, used in window if step <= first + 0.1 * steps]
      late = [used for step, used in window if step >= last - 0.1 * steps]
      (threads0, rss0), (threads1, rss1) = _median(early), _median(late)
      if threads1 - threads0 > 64:
        lines.append('%s: %d -> %d threads from step %d to %d' % (
            name, threads0, threads1, first, last))
      if rss1 > (1 + max_rss_growth) * rss0:
        lines.append('%s: %d -> %d MB resident from step %d to %d' % (
            name, rss0 // 1024, rss1 // 1024, first, last))
    return lines

  def report(self, steps):
    """Per task: threads and resident MB at the samples nearest 20%, 50% and
    85% of `steps`, and its most threads."""
    names = sorted({n for _, now in self.samples for n in now})
    lines = ['task        at 20%            at 50%            at 85%'
             '            most threads']
    for name in names:
      seen = [(step, now[name]) for step, now in self.samples if name in now]
      cells = []
      for share in (0.2, 0.5, 0.85):
        step, (threads, rss) = min(seen, key=lambda s: abs(s[0] -
                                                           share * steps))
        cells.append('%5d: %4d, %4d MB' % (step, threads, rss // 1024))
      most = max(seen, key=lambda s: s[1][0])
      lines.append('%-10s  %s   %d (step %d)' % (
          name, '  '.join(cells), most[1][0], most[0]))
    return '\n'.join(lines)

  def table(self):
    """One line per task: threads and MB at the first, middle and last
    sample, for a test's printout."""
    names = sorted({n for _, now in self.samples for n in now})
    lines = []
    for name in names:
      seen = [(step, now[name]) for step, now in self.samples if name in now]
      picks = [seen[0], seen[len(seen) // 2], seen[-1]]
      lines.append('%s: %s' % (name, ', '.join(
          'step %d: %d threads %d MB' % (s, t, r // 1024)
          for s, (t, r) in picks)))
    return '\n'.join(lines)


def sample_while(tasks, step, every=0.25):
  """A started Sampler (see Sampler)."""
  sampler = Sampler(tasks, step, every)
  sampler.start()
  return sampler


def sample_launcher(log_path, step_line, every=0.25, tasks=None):
  """A started Sampler of the tasks a launcher's log at `log_path` names
  (or `tasks()`), against the last step `step_line` (a pattern whose first
  group is the step) finds there."""
  def text():
    try:
      with open(str(log_path)) as f:
        return f.read()
    except OSError:
      return ''
  return sample_while(tasks or (lambda: launcher_tasks(text())),
                      lambda: last_step(step_line, text()), every)


def last_step(pattern, text):
  """The last step `pattern` (its first group) finds in `text`, None before
  any."""
  found = pattern.findall(text)
  if not found:
    return None
  last = found[-1]
  return int(last[0] if isinstance(last, tuple) else last)


_STEP = re.compile(r'^(?:\[worker:0\] |\[chief:0\] )?step (\d+)/(\d+) ', re.M)


def main(argv):
  import argparse
  import subprocess
  import sys
  import tempfile
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n')[0],
      usage='%(prog)s [--every=SECS] -- COMMAND ...')
  parser.add_argument('--every', type=float, default=0.5,
                      help='seconds between samples')
  split = argv.index('--') if '--' in argv else len(argv)
  args = parser.parse_args(argv[:split])  # --help ends here
  command = argv[split + 1:]
  if not command:
    parser.error('give the command to run after --')
  with tempfile.NamedTemporaryFile('w+', suffix='.log') as log:
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def tasks():
      with open(log.name) as f:
        found = launcher_tasks(f.read())
      return found or {'process': process.pid}

    sampler = sample_launcher(log.name, _STEP, args.every, tasks=tasks)
    status = process.wait()
    sampler.stop()
    with open(log.name) as f:
      text = f.read()
  found = _STEP.findall(text)
  if not found:
    print(text[-3000:])
    print('task_resources: no progress line (step N/M) in the output; '
          'exit status %d' % status)
    return 1
  steps = int(found[-1][1])
  print(sampler.report(steps))
  problems = sampler.problems(steps)
  print('exit status %d; %s' % (status, '; '.join(problems) if problems else
                                'flat: no task over %d threads, none grew by '
                                'more than 64 threads or 10%% of its memory '
                                'between 20%% and 85%% of the steps'
                                % MAX_THREADS))
  return 1 if problems or status else 0


if __name__ == '__main__':
  import sys
  sys.exit(main(sys.argv[1:]))
