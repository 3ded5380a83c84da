"""The project's error lines: one line that names the culprit and, for an
unknown name, the closest known one; and the exit statuses every script and
task ends with (0 done, PERMANENT, RETRYABLE or 128 + a signal). Every
package and script may import it (it is part of the platform layer, with
tf_compat and quiet_tensorflow)."""
import difflib
import re
import signal
import sys


def _tf_errors():
  """TensorFlow's errors module, or None before TensorFlow is imported (no
  error of it can exist then). Not imported here: the launcher reads
  statuses with this module and runs without TensorFlow."""
  tf = sys.modules.get('tensorflow')
  return tf.errors if tf is not None else None


def unknown_name_message(what, name, known):
  """`unknown model_name 'x'; did you mean 'y'? (known: ...)` in one line."""
  close = difflib.get_close_matches(str(name), list(known), n=1)
  hint = "; did you mean '%s'?" % close[0] if close else ''
  return "unknown %s '%s'%s (known: %s)" % (what, name, hint,
                                           ', '.join(sorted(known)))


def one_line(error):
  """One line for an error. A TensorFlow run-time error's message is a graph
  trace whose last unindented line is the cause."""
  text = getattr(error, 'message', None) or str(error) or repr(error)
  lines = [l.strip() for l in text.splitlines()
           if l.strip() and not l[0].isspace() and not l.startswith('Node:')]
  errors = _tf_errors()
  if errors is not None and isinstance(error, errors.OpError):
    # Several devices failing at once: "N root error(s) found. (0) KIND: why"
    roots = re.findall(r'^\s*\(\d+\) [A-Z_]+: (.+)$', text, re.M)
    if roots:
      return roots[0]
    if lines:
      return lines[-1]
  return lines[0] if lines else repr(error)


# -- exit statuses ----------------------------------------------------------------
# One table for every script and task kind (docs/cluster.md "Exit statuses"):
# what a scheduler or the launcher should do when a process ends. The split at
# 128 is Kubeflow TFJob's `restartPolicy: ExitCode` (1-127 permanent, 128-255
# retryable); a process killed by signal N ends with 128 + N in a shell, and a
# restart fixes what killed it (preemption, a node lost, OOM).
DONE = 0
PERMANENT = 1   # bad flags, bad data, divergence, nothing readable to resume
RETRYABLE = 200  # a peer lost or refusing connections, a collective timeout,
                 # a ps gone: restart every task; it resumes
# (and 128 + N for a signal: 143 SIGTERM, 130 SIGINT, 137 SIGKILL)


class Retryable(RuntimeError):
  """A failure that restarting the job fixes (its message is the line)."""


# TensorFlow's run-time errors that mean a peer or the network, not the
# program: a task that went away, refused or reset a connection, or a wait
# that timed out.
_RETRYABLE_OP_ERRORS = ('UnavailableError', 'AbortedError',
                        'DeadlineExceededError', 'CancelledError')
_RETRYABLE_TEXT = re.compile(
    r'Connection reset|Connection refused|Socket closed|failed to connect|'
    r'connect to all addresses|Stream removed|recvmsg:|GOAWAY|'
    # a parameter server restarted beneath the job: the chief restores it
    r'was uninitialized|uninitialized value', re.I)


def exit_status(error):
  """The status a script ends with for `error`: RETRYABLE when a restart of
  the job fixes it, else PERMANENT."""
  if isinstance(error, Retryable):
    return RETRYABLE
  errors = _tf_errors()
  if errors is None or not isinstance(error, errors.OpError):
    return PERMANENT
  if isinstance(error, tuple(getattr(errors, n) for n in _RETRYABLE_OP_ERRORS)):
    return RETRYABLE
  return RETRYABLE if _RETRYABLE_TEXT.search(error.message or '') else PERMANENT


def signal_status(signum):
  """The shell's status of a process ended by signal `signum`."""
  return 128 + int(signum)


def is_retryable(status):
  """Whether a process that ended with `status` (a shell status; Popen's
  negative -N for signal N counts as 128 + N) should be restarted."""
  if status is None or status == DONE:
    return False
  if status < 0:
    status = signal_status(-status)
  return status >= 128


def status_meaning(status):
  """'killed by SIGKILL', 'retryable', 'permanent error', 'done'."""
  if status < 0:
    status = signal_status(-status)
  if status == DONE:
    return 'done'
  if status == RETRYABLE:
    return 'retryable: a peer lost or a timeout'
  if 128 < status < 128 + 65:
    try:
      name = signal.Signals(status - 128).name
    except ValueError:
      name = 'signal %d' % (status - 128)
    return 'killed' if name == 'SIGKILL' else 'stopped by %s' % name
  if status >= 128:
    return 'retryable'
  return 'permanent error'
