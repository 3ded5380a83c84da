"""setup_env.sh, sourced as README says, leaves the user's shell as the venv's
activation alone would, and still stops the set-up when a step fails."""
import os
import shutil
import stat
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What an interactive shell can carry: options, traps, functions, variables.
STATE = ('set -o; shopt; trap -p; echo "functions: $(compgen -A function | sort | xargs)"; '
         'echo "variables: $(compgen -v | grep -v "^BASH_\\|^_$\\|^PIPESTATUS$'
         '\\|^LINENO$\\|^RANDOM$\\|^SECONDS$\\|^SRANDOM$\\|^EPOCH" | sort | xargs)"')


def interactive(commands, cwd=ROOT, env=None):
  """`commands` typed into an interactive bash (no rc files); its result."""
  return subprocess.run(
      ['bash', '--norc', '--noprofile', '-i'], input=commands + '\nexit 0\n',
      cwd=cwd, capture_output=True, text=True, timeout=120,
      env=dict(env or os.environ, PS1='$ '))


def test_sourcing_leaves_the_shell_as_the_venvs_activation_does():
  sourced = interactive('. ./setup_env.sh\n' + STATE)
  activated = interactive('. .venv/bin/activate\n' + STATE)
  assert sourced.returncode == 0, sourced.stderr
  assert 'errexit        \toff' in sourced.stdout
  assert 'VIRTUAL_ENV' in sourced.stdout  # the venv is active
  assert sourced.stdout == activated.stdout


def test_a_failing_command_after_sourcing_does_not_close_the_shell():
  result = interactive('. ./setup_env.sh\nfalse\nls /nonexistent\n'
                       'echo "survived $(set -o | grep errexit)"')
  assert result.stdout.split() == ['survived', 'errexit', 'off']


def test_the_harness_sees_a_shell_that_set_e_closes(tmp_path):
  """The control: a sourced `set -e` (what setup_env.sh did) closes the shell
  at the next failing command, and the test above would see it."""
  (tmp_path / 'errexit.sh').write_text('set -e\n')
  result = interactive('. %s\nfalse\necho survived' % (tmp_path / 'errexit.sh'))
  assert 'survived' not in result.stdout


def _checkout_whose_pip_fails(tmp_path):
  """setup_env.sh beside a requirements.txt, with a PYTHON whose venv's
  pip fails (as without a network)."""
  shutil.copy(os.path.join(ROOT, 'setup_env.sh'), str(tmp_path))
  (tmp_path / 'requirements.txt').write_text('tensorflow==2.21.0\n')
  fake = tmp_path / 'python3'
  fake.write_text(
      '#!/bin/sh\n'
      '# -m venv DIR: a venv whose python fails every pip install\n'
      'mkdir -p "$3/bin"\n'
      'printf \'#!/bin/sh\\necho "pip: no network" >&2\\nexit 1\\n\' > "$3/bin/python"\n'
      'chmod +x "$3/bin/python"\n')
  fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
  return dict(os.environ, PYTHON=str(fake))


def test_a_failing_pip_step_returns_non_zero_and_the_shell_survives(tmp_path):
  env = _checkout_whose_pip_fails(tmp_path)
  result = interactive('. ./setup_env.sh\necho "status $?"\n' + STATE,
                       cwd=str(tmp_path), env=env)
  assert 'pip: no network' in result.stderr
  assert 'setting up %s/.venv failed' % tmp_path in result.stderr
  assert 'status 1' in result.stdout
  assert 'errexit        \toff' in result.stdout
  assert '_slim_zoo' not in result.stdout  # its function is gone too
  assert not (tmp_path / '.venv' / '.requirements.sha256').exists()


def test_a_failing_step_stops_a_script_that_sources_it_and_a_run(tmp_path):
  env = _checkout_whose_pip_fails(tmp_path)
  # As demo.sh and test.sh source it (set -e), and as .ci/run (set -euo pipefail).
  for options in ('set -e', 'set -euo pipefail'):
    result = subprocess.run(
        ['bash', '-c', '%s; . ./setup_env.sh; echo reached' % options],
        cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout.strip().splitlines()[-1]) == (
        1, 'Setting up %s/.venv with requirements.txt ...' % tmp_path)
  run = subprocess.run(['bash', 'setup_env.sh'], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=60)
  assert run.returncode == 1
  assert 'setting up %s/.venv failed' % tmp_path in run.stderr


def test_scripts_sourcing_it_get_the_venv(tmp_path):
  # As .ci/run does: strict options, then the venv's python.
  result = subprocess.run(
      ['bash', '-c', 'set -euo pipefail; . ./setup_env.sh; '
       'python -c "import sys; print(sys.prefix)"; set -o | grep errexit'],
      cwd=ROOT, capture_output=True, text=True, timeout=60)
  assert result.returncode == 0, result.stderr
  prefix, errexit = result.stdout.splitlines()
  assert os.path.realpath(prefix) == os.path.realpath(os.path.join(ROOT, '.venv'))
  assert errexit.split() == ['errexit', 'on']  # the script's own option stays
