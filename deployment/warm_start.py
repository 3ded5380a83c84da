"""Starts a cluster's tasks as forks of one Python that has imported
TensorFlow, instead of a new Python each.

A task's process spends its first 4-5 CPU-seconds importing TensorFlow and
tf-slim before it reads a flag; the launcher starts every task of a job
together, and again at each restart, so a 3-task job paid that three times
at each start, on a machine busy training. The launcher starts one
interpreter for a job's command (this file, `python
deployment/warm_start.py SCRIPT FLAGS...`): it imports what the script would
import first, as the script would, then forks a task for each request.

A fork is the process `python SCRIPT FLAGS...` would be: its own pid, exit
status, output pipe, working directory and environment (TF_CONFIG its own),
sys.argv and sys.path[0] as Python sets them, the script run as __main__
with its flags defined afresh, numpy's generator reseeded (Python's
`random` reseeds itself at a fork). What it cannot be is a first import:
TensorFlow was imported with the environment and argv the interpreter
started with. So a task is forked only when that import would be the same:
its script imports `quiet_tensorflow` first (the project's scripts; the
imports of another program are its own, and it starts as a new Python), it
lives in the same directory, its --verbosity (read at that import) and its
environment but for TF_CONFIG are the interpreter's. Anything else starts
as before.

Shown by `ps` as `python .../warm_start.py SCRIPT FLAGS...` (the launcher
names each task's pid as it starts it). A fork dies with the interpreter
(SIGKILL, as a lost task: the launcher restarts the job when asked to), and
the interpreter, left by its launcher (the launcher ended or was killed),
stops its forks with SIGTERM and ends with them.
"""
import ctypes
import gc
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading

# Read by a task after its import, so a fork may carry its own (a program
# that runs tasks may add its own variables).
RUNTIME_VARIABLES = ['TF_CONFIG', 'PYTHONUNBUFFERED']
_QUIET_FIRST = re.compile(r'^import quiet_tensorflow\b', re.M)
_MESSAGE = 1 << 20  # the largest request read (argv and environment)
_PR_SET_PDEATHSIG = 1


def _verbosity(argv):
  """The --verbosity (-v) words of argv, as quiet_tensorflow reads them."""
  words = []
  for i, arg in enumerate(argv[1:], 1):
    if arg == '--':
      break
    if re.fullmatch(r'--?(?:v|verbosity)(?:=.*)?', arg):
      words.append(arg)
      if '=' not in arg and i + 1 < len(argv):
        words.append(argv[i + 1])
  return words


def _script(argv, cwd):
  return os.path.join(cwd or os.getcwd(), argv[0]) if argv else ''


def import_key(argv, env, cwd=None):
  """What TensorFlow's import in `python argv...` in `cwd` under `env`
  depends on; None when that process cannot be a fork (its script does not
  import quiet_tensorflow first, or this platform has no pidfd)."""
  script = os.path.abspath(_script(argv, cwd))
  if not (script.endswith('.py') and hasattr(os, 'pidfd_open')):
    return None
  try:
    with open(script, errors='replace') as f:
      if not _QUIET_FIRST.search(f.read()):
        return None
  except OSError:
    return None
  return (os.path.dirname(script), tuple(_verbosity(argv)),
          tuple(sorted((k, v) for k, v in env.items()
                       if k not in RUNTIME_VARIABLES)))


class Forked(object):
  """A forked task, as much of subprocess.Popen as the launcher and its
  callers use: pid, stdout (its output and errors, text), poll, wait,
  send_signal, terminate, kill, returncode."""

  def __init__(self, starter, pid, stdout):
    self.pid, self.stdout, self.returncode = pid, stdout, None
    self.args = [sys.executable] + starter.argv
    self._starter = starter

  def poll(self):
    if self.returncode is None:
      self.returncode = self._starter.status(self.pid, 0)
    return self.returncode

  def wait(self, timeout=None):
    if self.returncode is None:
      self.returncode = self._starter.status(self.pid, timeout)
      if self.returncode is None:
        raise subprocess.TimeoutExpired(self.args, timeout)
    return self.returncode

  def send_signal(self, sig):
    self._starter.signal(self.pid, sig)

  def terminate(self):
    self.send_signal(signal.SIGTERM)

  def kill(self):
    self.send_signal(signal.SIGKILL)


class Starter(object):
  """One warm interpreter for `argv`'s script under `env`, started at once;
  `start` forks a task from it, `retire` lets it end with its last fork."""

  def __init__(self, argv, env, cwd, key):
    self.key = key  # import_key(argv, env, cwd), read once by the caller
    self.argv = [os.path.abspath(_script(argv, cwd))] + list(argv[1:])
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # Run as a file, not `-m deployment.warm_start`: the package's
    # __init__ imports TensorFlow, which must come after quiet_tensorflow.
    self.process = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__)] + self.argv,
        env=dict({k: v for k, v in env.items() if k != 'TF_CONFIG'},
                 WARM_START_FD=str(theirs.fileno())),
        pass_fds=[theirs.fileno()])
    theirs.close()
    self._socket, self._lock = ours, threading.Lock()
    self._changed = threading.Condition()
    self._statuses, self._live, self._replies = {}, {}, []
    self._gone = False
    threading.Thread(target=self._read, daemon=True).start()

  def serves(self, key):
    return key == self.key and not self._gone

  def _read(self):
    """Records every message of the warm interpreter as it comes."""
    while True:
      try:
        data, fds, _, _ = socket.recv_fds(self._socket, _MESSAGE, 1)
      except OSError:
        data, fds = b'', []
      if not data:
        break
      message = json.loads(data)
      with self._changed:
        if 'pid' in message:
          self._live[message['pid']] = fds[0]
          self._replies.append(message['pid'])
        else:
          self._ended(message['ended'], message['status'])
        self._changed.notify_all()
    # Gone (killed?): its forks die with it (_PR_SET_PDEATHSIG).
    with self._changed:
      live = dict(self._live)
    for pid, pidfd in live.items():
      select.select([pidfd], [], [], 30)
      with self._changed:
        self._ended(pid, -signal.SIGKILL)
    with self._changed:
      self._gone = True
      self._changed.notify_all()

  def _ended(self, pid, status):
    self._statuses[pid] = status
    pidfd = self._live.pop(pid, None)
    if pidfd is not None:
      os.close(pidfd)

  def signal(self, pid, sig):
    """Sends `sig` to the fork `pid` unless it has ended: through its pidfd,
    since the warm interpreter, not this process, reaps it, and its pid
    may be another process's by the time we know."""
    with self._changed:
      if pid in self._live:
        try:
          signal.pidfd_send_signal(self._live[pid], sig)
        except ProcessLookupError:
          pass

  def start(self, name, argv, env, cwd):
    """A Forked `python argv...` in `cwd` with `env` named `name`; None when
    the warm interpreter is gone."""
    read, write = os.pipe()
    request = json.dumps(dict(name=name, argv=list(argv), env=env,
                              cwd=cwd or os.getcwd())).encode()
    with self._lock, self._changed:
      try:
        socket.send_fds(self._socket, [request], [write])
      except OSError:  # gone, or a request too large for one message
        os.close(read)
        return None
      finally:
        os.close(write)
      self._changed.wait_for(lambda: self._replies or self._gone, 300)
      if not self._replies:
        os.close(read)
        return None
      pid = self._replies.pop(0)
      stdout = os.fdopen(read, 'r', errors='replace')
      return Forked(self, pid, stdout)

  def status(self, pid, timeout):
    """pid's exit code (Popen's: -N for signal N), None if it has not ended
    within `timeout` seconds (None: as long as it takes)."""
    with self._changed:
      self._changed.wait_for(
          lambda: pid in self._statuses or self._gone, timeout)
      return self._statuses.get(pid, -signal.SIGKILL if self._gone else None)

  def retire(self):
    """No more forks: the warm interpreter ends after its last one."""
    try:
      self._socket.send(b'retire')
    except OSError:
      pass


_STARTERS = []  # the recent ones: a caller's next tasks likely share one


def start(name, argv, env, cwd, keep=2):
  """`python argv...` as a Forked of a warm interpreter that serves it (one
  is started if none of the last `keep` does), or None when it cannot be a
  fork (import_key)."""
  key = import_key(argv, env, cwd)
  if key is None:
    return None
  for starter in _STARTERS:
    if starter.serves(key):
      break
  else:
    starter = Starter(argv, env, cwd, key)
    _STARTERS.insert(0, starter)
    for old in _STARTERS[keep:]:
      old.retire()
    del _STARTERS[keep:]
  return starter.start(name, argv, env, cwd)


def run(argv, env=None, cwd=None):
  """subprocess.run([python] + argv) to its end, its output and errors
  together in .stdout: a fork where it can be one (`start`)."""
  env = dict(os.environ if env is None else env)
  process = start(os.path.basename(argv[0]), argv, env, cwd)
  if process is None:
    process = subprocess.Popen([sys.executable] + list(argv), env=env,
                               cwd=cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True,
                               errors='replace')
  with process.stdout:
    output = process.stdout.read()
  return subprocess.CompletedProcess([sys.executable] + list(argv),
                                     process.wait(), output, '')


# -- the warm interpreter -----------------------------------------------------
def _serve(link, argv):
  """Imports as `python argv...` would, then forks a task per request until
  the launcher retires it (it ends after its last fork) or is gone (its
  forks get SIGTERM and it ends with them)."""
  started_with = dict(os.environ)
  sigint = signal.getsignal(signal.SIGINT)
  sys.argv, sys.path[0] = list(argv), os.path.dirname(os.path.abspath(argv[0]))
  # A script outside the project puts the project on its path before this
  # import: so does the interpreter, for the import only.
  project = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  sys.path.append(project)
  import quiet_tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  sys.path.remove(project)
  # What the imports made (some 400,000 objects) is out of the cyclic
  # collector's reach from here on: a fork's full collections would otherwise
  # walk all of them, writing to each object's header and so copying every
  # page of the shared heap (CPython's documented advice for a server that
  # forks: gc.freeze() before fork). A one-step LeNet task: 3.0 -> 2.2 CPU-s
  # (its whole process tree).
  gc.freeze()
  signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the tasks
  wakeup, woken = os.pipe()
  os.set_blocking(woken, False)
  signal.set_wakeup_fd(woken)
  signal.signal(signal.SIGCHLD, lambda *_: None)
  children, retired = set(), False
  while children or not retired:
    ready = select.select([wakeup] + ([] if retired else [link]), [], [])[0]
    if wakeup in ready:
      os.read(wakeup, 512)
    _reap(link, children)
    if link not in ready:
      continue
    try:
      data, fds, _, _ = socket.recv_fds(link, _MESSAGE, 1)
    except OSError:
      data, fds = b'', []
    if data == b'retire':
      retired = True
      continue
    if not data:  # the launcher is gone: its tasks stop with it
      break
    interpreter = os.getpid()
    pid = os.fork()
    if pid == 0:
      link.close()
      os.close(wakeup)
      os.close(woken)
      _become(json.loads(data), fds[0], started_with, sigint, interpreter)
      return  # to the end of the interpreter, as `python script` ends
    os.close(fds[0])
    children.add(pid)
    pidfd = os.pidfd_open(pid)
    socket.send_fds(link, [json.dumps({'pid': pid}).encode()], [pidfd])
    os.close(pidfd)
  signal.signal(signal.SIGCHLD, signal.SIG_DFL)
  for pid in children:
    os.kill(pid, signal.SIGTERM)
  for pid in children:
    os.waitpid(pid, 0)


def _reap(link, children):
  for pid in list(children):
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
      children.discard(pid)
      try:
        link.send(json.dumps({'ended': pid, 'status':
                              os.waitstatus_to_exitcode(status)}).encode())
      except OSError:
        pass


def _become(request, output, started_with, sigint, interpreter):
  """In the fork: the process `python argv...` would be, then its run."""
  signal.set_wakeup_fd(-1)
  signal.signal(signal.SIGCHLD, signal.SIG_DFL)
  signal.signal(signal.SIGINT, sigint)
  libc = ctypes.CDLL(None, use_errno=True)
  libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
  if os.getppid() != interpreter:  # it died before that: adopted elsewhere
    os._exit(128 + signal.SIGKILL)
  sys.stdout.flush()
  sys.stderr.flush()
  os.dup2(output, 1)
  os.dup2(output, 2)
  os.close(output)
  os.chdir(request['cwd'])
  # As imported (quiet_tensorflow's TF_CPP_MIN_LOG_LEVEL among it), with
  # what the request changes (its TF_CONFIG; import_key allows no more).
  env = request['env']
  for name in set(started_with) - set(env):
    os.environ.pop(name, None)
  os.environ.update({k: v for k, v in env.items()
                     if started_with.get(k) != v})
  if 'numpy' in sys.modules:
    sys.modules['numpy'].random.seed()
  sys.argv = list(request['argv'])
  sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
  import runpy  # pylint: disable=import-outside-toplevel
  runpy.run_path(os.path.abspath(sys.argv[0]), run_name='__main__')


if __name__ == '__main__':
  _serve(socket.socket(fileno=int(os.environ.pop('WARM_START_FD'))),
         sys.argv[1:])
