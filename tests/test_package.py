"""`pip install .` gives a package that works from any directory: the
libraries import by TF-Slim's names, the scripts run with `python -m`, and
the data files they read come along."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(args, cwd, env=None, timeout=600):
  result = subprocess.run(args, cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
  assert result.returncode == 0, (args, result.stdout[-2000:],
                                  result.stderr[-3000:])
  return result


@pytest.mark.slow
def test_installed_package_works_from_another_directory(tmp_path):
  # Built from a copy, so the checkout gets no build/ or *.egg-info folders.
  source = tmp_path / 'source'
  def left_out(folder, names):
    top_level = ({'.git', '.venv', 'data', 'runs', 'exports', 'samples', 'build'}
                 if os.path.samefile(folder, ROOT) else set())
    return [n for n in names
            if n in top_level or n == '__pycache__' or n.endswith('.egg-info')]
  shutil.copytree(ROOT, source, ignore=left_out)
  _run([sys.executable, '-m', 'pip', 'wheel', '--no-deps',
        '--no-build-isolation', '--quiet', '-w', str(tmp_path / 'wheel'),
        str(source)], cwd=str(tmp_path))
  wheel, = os.listdir(tmp_path / 'wheel')
  site = tmp_path / 'site'
  _run([sys.executable, '-m', 'pip', 'install', '--no-deps', '--quiet',
        '--target', str(site), str(tmp_path / 'wheel' / wheel)],
       cwd=str(tmp_path))
  elsewhere = tmp_path / 'elsewhere'
  elsewhere.mkdir()
  env = dict(os.environ, PYTHONPATH=str(site))
  imported = _run([sys.executable, '-c', (
      'import nets, datasets, preprocessing, deployment, runner, serving\n'
      'from nets import nets_factory\n'
      'from datasets import imagenet\n'
      'print(nets.__file__)\n'
      'print(len(nets_factory.list_models()))\n'
      'print(sum(1 for _ in open(imagenet.SYNSETS_FILE)))\n')],
      cwd=str(elsewhere), env=env)
  path, count, synsets = imported.stdout.split()
  assert path.startswith(str(site)), path
  assert int(count) == 40
  assert int(synsets) == 1000
  converted = _run([sys.executable, '-m', 'download_and_convert_data',
                    '--dataset_name=digits', '--dataset_dir=digits'],
                   cwd=str(elsewhere), env=env)
  assert (elsewhere / 'digits' / 'labels.txt').is_file(), converted.stdout
