"""benchmark_image_classifier.py runs and reports what it measured (speed
itself is never asserted: it is the benchmark's to print)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, 'benchmark_image_classifier.py')


def run(*args):
  return subprocess.run([sys.executable, BENCH] + list(args), cwd=ROOT,
                        capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize('args, message', [
    (['--models=no_such_net'], '--models: no_such_net not one of'),
    (['--models=i3d'], '--models: i3d not one of'),
    (['--batch_sizes=6', '--num_clones=4'],
     '--batch_sizes=6 does not split over --num_clones=4'),
    (['--data=real'], '--data=real needs --dataset_dir'),
    (['--kinds=harness,jax'], '--kinds: jax not one of'),
])
def test_bad_arguments_name_the_flag(args, message):
  result = run(*args)
  assert result.returncode == 2 and message in result.stderr, result.stderr


@pytest.mark.slow
def test_rounds_are_interleaved_and_the_json_has_every_measurement(tmp_path):
  out = str(tmp_path / 'bench.json')
  result = run('--models=lenet', '--batch_sizes=4', '--num_clones=1,2',
               '--kinds=harness,bare', '--rounds=2', '--steps=2',
               '--warmup=1', '--output_json=' + out)
  assert result.returncode == 0, result.stderr[-3000:]
  order = [line.split()[2:6] for line in result.stdout.splitlines()
           if line.startswith('round ')]
  one_round = [['lenet', 'b4', 'train', 'harness'],
               ['lenet', 'b4', 'train', 'bare'],
               ['lenet', 'b4', 'inference', 'harness'],
               ['lenet', 'b4', 'inference', 'bare'],
               ['lenet', 'b4', 'train', 'harness'],
               ['lenet', 'b4', 'inference', 'harness']]
  assert order == one_round * 2
  report = json.load(open(out))
  rows = {(r['mode'], r['kind'], r['clones']): r for r in report['results']}
  assert sorted(rows) == sorted([
      (mode, kind, clones) for mode in ('train', 'inference')
      for kind, clones in (('harness', 1), ('harness', 2), ('bare', 1))])
  for row in rows.values():
    assert len(row['rounds']) == 2 and all(v > 0 for v in row['rounds'])
    assert row['min'] <= row['median'] <= row['max']
  for mode in ('train', 'inference'):
    assert rows[(mode, 'bare', 1)]['ratio_to_bare'] == 1.0
    assert rows[(mode, 'harness', 1)]['ratio_to_bare'] == pytest.approx(
        rows[(mode, 'harness', 1)]['median'] / rows[(mode, 'bare', 1)]['median'])
