"""Runs the project's scripts for the tests as users run them, without paying
TensorFlow's start-up for each.

`run(script, *args)` is `subprocess.run([python, script, *args])` with the
output captured: a CompletedProcess with the exit status, stdout and stderr.
Starting Python and importing TensorFlow costs about 4.5 CPU-seconds, most
of a script run that ends in a flag error, and the suite runs several
hundred scripts. So each test process keeps one warm interpreter that has
imported TensorFlow, tf-keras, tf-slim, numpy and absl (nothing of the
project) and forks it for a run: the fork is a process of its own (its pid,
exit status, files, working directory and environment), sys.argv and
sys.path[0] as `python script` sets them, the script executed as __main__
and its flags defined afresh, random generators reseeded.

What it cannot give is a first import: TensorFlow was imported before the
script ran, with the environment the warm interpreter was started with. A
run whose import-time environment (`_as_imported`: all variables but
RUNTIME_VARIABLES) differs from that one therefore starts a fresh
interpreter, and so do the tests about first imports (tests/test_compat.py,
quiet_tensorflow in tests/test_watching.py), which call subprocess
themselves. Tests that signal or wait on a script use subprocess.Popen.
`SCRIPTS_FRESH=1` runs every script in a fresh interpreter, to compare.
"""
import gc
import importlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Read by the scripts when they run, not when TensorFlow is imported: a run
# may set them and still use the warm interpreter.
RUNTIME_VARIABLES = ('TF_CONFIG', 'PYTEST_CURRENT_TEST')


def run(script, *args, cwd=ROOT, env=None, timeout=600):
  """`python script *args` in `cwd` with `env` (default: this process's),
  output captured as text; raises subprocess.TimeoutExpired after
  `timeout` seconds (the run killed)."""
  path = script if os.path.isabs(script) else os.path.join(ROOT, script)
  env = dict(os.environ if env is None else env)
  argv = [path] + [str(a) for a in args]
  server = _server()
  if (server is None or not os.path.isfile(path) or
      not server.serves(_as_imported(path, argv, env))):
    return subprocess.run([sys.executable] + argv, cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout,
                          check=False)
  return server.run(argv, cwd, env, timeout)


def _as_imported(path, argv, env):
  """The environment TensorFlow is imported with in `python argv` under
  `env`. A script that imports quiet_tensorflow first imports it with
  TF_CPP_MIN_LOG_LEVEL=3 when the variable is unset and no --verbosity is
  given (quiet_tensorflow.py), so the warm interpreter started with 3
  serves it."""
  if 'TF_CPP_MIN_LOG_LEVEL' in env:
    return env
  with open(path, errors='replace') as f:
    quieted = '\nimport quiet_tensorflow' in f.read()
  verbosity = [a for a in argv[1:] if re.match(r'--?(v|verbosity)(=|$)', a)]
  if not quieted or verbosity:  # with a verbosity: fresh, whatever it is
    return env
  return dict(env, TF_CPP_MIN_LOG_LEVEL='3')


class _Server(object):
  """The warm interpreter (this file run as a program) and its pipe."""

  def __init__(self):
    self.env = dict(os.environ)
    # Its own stderr (TensorFlow's start-up lines) kept off the test's.
    self.log = tempfile.TemporaryFile()
    self.process = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=self.log, bufsize=0, cwd=ROOT,
        env=self.env)
    self.lock = threading.Lock()
    if self._read(300, 'start') != {'ready': True}:
      self.process.kill()
      raise self._died('start (no reply in 300 s)')

  def _died(self, what):
    self.log.seek(0)
    return RuntimeError('the warm interpreter died at %s: %s' % (
        what, self.log.read()[-2000:].decode(errors='replace')))

  def serves(self, env):
    def relevant(variables):
      return {k: v for k, v in variables.items() if k not in RUNTIME_VARIABLES}
    return self.process.poll() is None and relevant(env) == relevant(self.env)

  def _read(self, timeout, what):
    """The next reply, None after `timeout` seconds without one."""
    ready, _, _ = select.select([self.process.stdout], [], [], timeout)
    if not ready:
      return None
    line = self.process.stdout.readline()
    if not line:
      raise self._died(what)
    return json.loads(line)

  def run(self, argv, cwd, env, timeout):
    with self.lock, tempfile.TemporaryDirectory() as scratch:
      out, err = (os.path.join(scratch, n) for n in ('out', 'err'))
      request = dict(argv=argv, cwd=cwd, env=env, stdout=out, stderr=err)
      self.process.stdin.write((json.dumps(request) + '\n').encode())
      self.process.stdin.flush()
      pid = self._read(60, 'fork')['pid']
      reply = self._read(timeout, argv[0])
      if reply is None:  # as subprocess.run: kill, then raise
        os.kill(pid, signal.SIGKILL)
        self._read(60, argv[0])
        raise subprocess.TimeoutExpired([sys.executable] + argv, timeout,
                                        _text(out), _text(err))
      return subprocess.CompletedProcess([sys.executable] + argv,
                                         reply['status'], _text(out),
                                         _text(err))


def _text(path):
  with open(path, errors='replace') as f:
    return f.read()


_SERVER = []


def _server():
  """This process's warm interpreter, started at the first run; None when
  SCRIPTS_FRESH=1 asks for a fresh interpreter per run (to compare)."""
  if os.environ.get('SCRIPTS_FRESH') == '1':
    return None
  if not _SERVER or _SERVER[0].process.poll() is not None:
    _SERVER[:] = [_Server()]
  return _SERVER[0]


# -- the warm interpreter ----------------------------------------------------------
def _serve():
  import random  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  # TensorFlow and what every script imports through tf_compat, before any
  # line of the project runs.
  for name in ('absl.flags', 'tensorflow', 'tf_keras', 'tf_slim'):
    importlib.import_module(name)
  # Out of the cyclic collector's reach from here on: each fork's full
  # collections would otherwise walk these imports' ~400,000 objects and,
  # writing to their headers, copy every page of the shared heap (see
  # deployment/warm_start.py). An eval_image_classifier.py run: 2.2 -> 1.2 s.
  gc.freeze()
  replies = os.fdopen(os.dup(1), 'w')
  devnull = os.open(os.devnull, os.O_WRONLY)
  os.dup2(devnull, 1)  # stray prints off the pipe
  os.close(devnull)
  print(json.dumps({'ready': True}), file=replies, flush=True)
  for line in sys.stdin:
    request = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
      replies.close()
      _become(request, random, np)  # never returns
    print(json.dumps({'pid': pid}), file=replies, flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({'status': os.waitstatus_to_exitcode(status)}),
          file=replies, flush=True)


def _become(request, random, np):
  """In the fork: the process `python argv...` would be, then its run."""
  os.chdir(request['cwd'])
  os.environ.clear()
  os.environ.update(request['env'])
  for fd, (path, mode) in enumerate([
      (os.devnull, os.O_RDONLY),
      (request['stdout'], os.O_WRONLY | os.O_CREAT),
      (request['stderr'], os.O_WRONLY | os.O_CREAT)]):
    opened = os.open(path, mode, 0o600)
    os.dup2(opened, fd)
    os.close(opened)
  random.seed()
  np.random.seed()
  script = request['argv'][0]
  sys.argv = list(request['argv'])
  sys.path[0] = os.path.dirname(script)
  import runpy  # pylint: disable=g-import-not-at-top
  runpy.run_path(script, run_name='__main__')
  sys.exit(0)


if __name__ == '__main__':
  sys.path[0] = ROOT
  _serve()
