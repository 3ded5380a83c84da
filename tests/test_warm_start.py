"""deployment/warm_start.py: a task forked from a warm interpreter is the
process a new Python would be (argv, sys.path, working directory,
environment, TensorFlow's settings, signals, output, exit status), signals
reach it and only it, and it ends with its interpreter and with the process
that started it; what cannot be a fork starts as a new Python."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from deployment import launch, warm_start

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(ROOT, 'tests', 'warm_program.py')


def _facts(task):
  return json.loads(task.output().splitlines()[0])


def _parent(pid):
  with open('/proc/%d/stat' % pid) as f:
    return int(f.read().rsplit(')', 1)[1].split()[1])


def _task(name, args, env, warm=True, config='', cwd=ROOT):
  return launch.Task(name, [PROGRAM] + list(args), config,
                     out=open(os.devnull, 'w'), cwd=cwd, env=env, warm=warm)


def _probe(value):
  """An environment of its own, so the test gets a warm interpreter of its
  own (import_key)."""
  return dict(os.environ, WARM_PROBE=value)


@pytest.mark.timeout(300)
def test_a_fork_is_the_process_a_new_python_is(tmp_path):
  env = _probe('facts')
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)  # as quiet_tensorflow sets it
  config = launch.tf_config({'worker': ['127.0.0.1:1', '127.0.0.1:2']},
                            'worker', 1)
  fresh = _task('worker:1', ['3'], env, False, config, str(tmp_path))
  forked = _task('worker:1', ['3'], env, True, config, str(tmp_path))
  assert isinstance(fresh.process, subprocess.Popen)
  assert isinstance(forked.process, warm_start.Forked)
  assert (fresh.wait(120), forked.wait(120)) == (3, 3)
  new, fork = _facts(fresh), _facts(forked)
  assert new.pop('ppid') == os.getpid() != fork.pop('ppid')
  assert new.pop('draw') != fork.pop('draw')  # numpy reseeded in the fork
  # The one intended difference: a fork starts with TensorFlow's objects
  # frozen out of the collector's reach (warm_start._serve); a new Python,
  # the project imported, has nothing frozen.
  assert new.pop('gc_frozen') == 0 and fork.pop('gc_frozen') > 100000
  assert new == fork
  assert new['environ']['TF_CONFIG'] == config
  assert new['environ']['TF_CPP_MIN_LOG_LEVEL'] == '3'
  assert (new['cwd'], new['path0'], new['main']) == (
      str(tmp_path), os.path.dirname(PROGRAM), '__main__')
  for task in (fresh, forked):
    assert task.output().splitlines()[1:] == ['to stderr']


@pytest.mark.timeout(300)
def test_forks_share_an_interpreter_only_where_the_import_is_the_same():
  """TF_CONFIG is read after the import: one interpreter serves both
  workers; another environment gets its own; signals reach the fork."""
  env = _probe('share')
  config = lambda i: launch.tf_config({'worker': ['a:1', 'a:2']}, 'worker', i)
  tasks = [_task('worker:0', ['0', 'wait'], env, config=config(0)),
           _task('worker:1', ['0', 'wait'], env, config=config(1)),
           _task('worker:0', ['0', 'wait'], _probe('other'), config=config(0))]
  try:
    deadline = time.time() + 120
    while time.time() < deadline and not all(t.lines for t in tasks):
      time.sleep(0.2)
    parents = [_parent(t.process.pid) for t in tasks]
    assert parents[0] == parents[1] != parents[2], parents
    assert os.getpid() not in parents
    facts = [_facts(t) for t in tasks]
    assert [f['environ']['TF_CONFIG'] for f in facts] == [
        config(0), config(1), config(0)]
    assert facts[0]['draw'] != facts[1]['draw']  # numpy reseeded in each
    tasks[0].process.terminate()  # its handler exits 42
    assert tasks[0].wait(30) == 42
    assert tasks[1].poll() is None
    assert tasks[1].kill() == -signal.SIGKILL
  finally:
    for task in tasks:
      task.stop()


@pytest.mark.timeout(300)
def test_a_killed_interpreter_takes_its_forks_with_it_and_the_next_starts():
  env = _probe('killed')
  task = _task('worker:0', ['0', 'wait'], env)
  try:
    deadline = time.time() + 120
    while time.time() < deadline and not task.lines:
      time.sleep(0.2)
    os.kill(_parent(task.process.pid), signal.SIGKILL)
    assert task.wait(30) == -signal.SIGKILL  # as the launcher sees a lost task
    again = _task('worker:0', ['5'], env)
    assert again.wait(120) == 5, again.output()
  finally:
    task.stop()


@pytest.mark.timeout(300)
def test_forks_get_sigterm_when_the_process_that_started_them_is_gone():
  owner = subprocess.Popen(
      [sys.executable, '-c', 'import sys, time; sys.path.insert(0, %r)\n'
       'from deployment import launch\n'
       't = launch.Task("worker:0", [%r, "0", "wait"], "", cwd=%r,\n'
       '                out=open("/dev/null", "w"))\n'
       'print(t.process.pid, type(t.process).__name__, flush=True)\n'
       'time.sleep(300)' % (ROOT, PROGRAM, ROOT)],
      stdout=subprocess.PIPE, text=True)
  try:
    pid, kind = owner.stdout.readline().split()
    assert kind == 'Forked'
    pid = int(pid)
    time.sleep(3)  # past the fork's start-up
    owner.kill()
    owner.wait()
    deadline = time.time() + 60
    while time.time() < deadline and os.path.exists('/proc/%d' % pid):
      time.sleep(0.2)
    assert not os.path.exists('/proc/%d' % pid)
  finally:
    owner.kill()


def test_a_program_that_does_not_import_quiet_tensorflow_first_starts_anew(
    tmp_path):
  plain = tmp_path / 'plain.py'
  plain.write_text('import os\nprint(os.getppid())\n')
  assert warm_start.import_key([str(plain)], dict(os.environ)) is None
  assert warm_start.import_key([PROGRAM], dict(os.environ)) is not None
  task = launch.Task('worker:0', [str(plain)], '', out=open(os.devnull, 'w'))
  assert isinstance(task.process, subprocess.Popen)
  assert task.wait(60) == 0
  assert task.output().strip() == str(os.getpid())


@pytest.mark.timeout(300)
@pytest.mark.parametrize('fresh', [False, True])
def test_the_launcher_names_each_tasks_pid_and_starts_forks_unless_told(
    fresh, tmp_path, capsys):
  del tmp_path
  argv = ['--workers=1', '--ps=0'] + (['--fresh_processes'] if fresh else [])
  assert launch.main(argv + ['--', PROGRAM, '0']) == 0
  out = capsys.readouterr().out
  pid = int(re.search(r'^launch: started worker:0 \(pid (\d+)\)$', out,
                      re.M).group(1))
  facts = json.loads(re.search(r'^\[worker:0\] (\{.*\})$', out, re.M).group(1))
  assert (facts['ppid'] == os.getpid()) == fresh, (facts['ppid'], pid)


def test_the_launcher_imports_no_tensorflow():
  """`python -m deployment.launch` starts in a fraction of a second and its
  output is its own (no TensorFlow start-up lines): the package and
  zoo_errors import no TensorFlow; the modules that build graphs do (the
  control)."""
  env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
  probe = ('import sys, deployment.%s\n'
           'print(sorted(m for m in ("tensorflow", "tf_slim", "numpy") '
           'if m in sys.modules))')
  loaded = {}
  for module in ('launch', 'model_deploy'):
    result = subprocess.run([sys.executable, '-c', probe % module], cwd=ROOT,
                            env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    loaded[module] = (result.stdout.strip(), result.stderr)
  assert loaded['launch'] == ('[]', '')
  assert loaded['model_deploy'][0] == "['numpy', 'tensorflow', 'tf_slim']"


@pytest.mark.timeout(300)
def test_run_returns_a_forks_status_and_output_as_subprocess_run_does(
    tmp_path):
  """warm_start.run, the benchmark's measurements: a fork where it can be
  one, else a new Python; output and errors together, in order."""
  env = _probe('run')
  forked = warm_start.run([PROGRAM, '4'], env=env, cwd=str(tmp_path))
  plain = tmp_path / 'plain.py'
  plain.write_text('import os, sys\nprint(os.getppid())\n'
                   'print("to stderr", file=sys.stderr)\nsys.exit(5)\n')
  fresh = warm_start.run([str(plain)], env=env)
  assert (forked.returncode, fresh.returncode) == (4, 5)
  facts = json.loads(forked.stdout.splitlines()[0])
  assert facts['ppid'] != os.getpid() and facts['cwd'] == str(tmp_path)
  assert forked.stdout.splitlines()[1:] == ['to stderr']
  assert fresh.stdout.splitlines() == [str(os.getpid()), 'to stderr']


@pytest.mark.timeout(300)
def test_a_request_too_large_for_one_message_starts_a_new_python():
  env = dict(_probe('large'), **{'WARM_LARGE_%d' % i: 'x' * 60000
                                 for i in range(4)})
  task = _task('worker:0', ['6'], env)
  assert isinstance(task.process, subprocess.Popen)
  assert task.wait(120) == 6, task.output()[-2000:]
