"""tests/scripts.py: a script run from the warm interpreter is the run
`python script args` gives, without TensorFlow's start-up."""
import json
import os
import subprocess
import time

import pytest

import scripts

PROGRAM = r'''
import json, os, random, sys
from absl import flags
import numpy as np
import tensorflow as tf
flags.DEFINE_string('program_flag', 'default', 'defined by every run')
flags.FLAGS(sys.argv[:1])  # a second definition in one process would raise
print(json.dumps(dict(
    argv=sys.argv, path0=sys.path[0], cwd=os.getcwd(), file=__file__,
    name=__name__, pid=os.getpid(), ppid=os.getppid(),
    variable=os.environ.get('TF_CONFIG'),
    random=random.random(), numpy=float(np.random.random_sample()),
    eager=tf.executing_eagerly(), flag=flags.FLAGS.program_flag)))
print('to stderr', file=sys.stderr)
if len(sys.argv) > 1 and sys.argv[1] == 'fail':
  raise ValueError('the failure')
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0)
'''


@pytest.fixture
def program(tmp_path):
  path = tmp_path / 'program.py'
  path.write_text(PROGRAM)
  return str(path)


def test_a_run_is_a_process_of_its_own_with_argv_cwd_and_environment(
    program, tmp_path, monkeypatch):
  monkeypatch.setenv('PYTEST_CURRENT_TEST', 'another test')  # runtime only
  env = dict(os.environ, TF_CONFIG='{"task": {}}')
  runs = [scripts.run(program, '7', 'two words', cwd=str(tmp_path), env=env)
          for _ in range(2)]
  seen = [json.loads(r.stdout) for r in runs]
  for result, facts in zip(runs, seen):
    assert result.returncode == 7 and result.stderr == 'to stderr\n'
    assert facts['argv'] == [program, '7', 'two words']
    assert facts['path0'] == os.path.dirname(program)
    assert (facts['cwd'], facts['file'], facts['name']) == (
        str(tmp_path), program, '__main__')
    assert facts['variable'] == '{"task": {}}' and facts['eager']
    assert facts['flag'] == 'default'  # defined afresh in each run
    assert facts['pid'] not in (os.getpid(), facts['ppid'])
  assert seen[0]['pid'] != seen[1]['pid']
  # Python's and numpy's generators are seeded per run, as in a new process.
  assert seen[0]['random'] != seen[1]['random']
  assert seen[0]['numpy'] != seen[1]['numpy']
  # The warm interpreter ran both: the same parent.
  assert seen[0]['ppid'] == seen[1]['ppid'] != os.getpid()


def test_an_exception_is_a_traceback_and_status_1(program):
  result = scripts.run(program, 'fail')
  assert result.returncode == 1
  assert result.stderr.rstrip().endswith('ValueError: the failure')
  assert 'Traceback (most recent call last):' in result.stderr


def test_a_run_that_outlives_its_timeout_is_killed(tmp_path):
  path = tmp_path / 'sleeper.py'
  path.write_text('import time\nprint("started", flush=True)\n'
                  'time.sleep(60)\n')
  began = time.time()
  with pytest.raises(subprocess.TimeoutExpired) as raised:
    scripts.run(str(path), timeout=3)
  assert time.time() - began < 30
  assert raised.value.output == 'started\n'
  path.write_text('print("still serving")\n')
  assert scripts.run(str(path)).stdout == 'still serving\n'


def test_another_import_time_environment_gets_a_fresh_interpreter(program):
  env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS='0')
  warm = json.loads(scripts.run(program).stdout)
  fresh = json.loads(scripts.run(program, env=env).stdout)
  assert fresh['ppid'] == os.getpid() != warm['ppid']


QUIETED = r'''
import os, sys
sys.path.insert(0, %r)
import quiet_tensorflow
print(os.getppid(), os.environ['TF_CPP_MIN_LOG_LEVEL'])
''' % scripts.ROOT


def test_a_quieted_script_without_a_log_level_is_served_as_it_imports(
    tmp_path):
  """quiet_tensorflow imports TensorFlow at level 3 when none is set; with
  a verbosity flag it sets its own, so that run starts fresh."""
  path = tmp_path / 'quieted.py'
  path.write_text(QUIETED)
  env = dict(os.environ)
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)
  warm = scripts.run(str(path), env=env)
  fresh = scripts.run(str(path), '-v', '0', env=env)
  assert warm.returncode == fresh.returncode == 0, warm.stderr + fresh.stderr
  parent, level = warm.stdout.split()
  assert int(parent) != os.getpid() and level == '3'
  assert fresh.stdout.split() == [str(os.getpid()), '0']
