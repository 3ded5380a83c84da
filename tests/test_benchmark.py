"""benchmark_image_classifier.py runs and reports what it measured (speed
itself is never asserted: it is the benchmark's to print)."""
import json
import os
import subprocess
import sys

import pytest

import benchmark_image_classifier as bench

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


@pytest.mark.parametrize('args, message', [
    (['--precisions=float32,fp8'], '--precisions: fp8 not one of'),
    (['--threads=2'], '--threads: give intra:inter pairs'),
    (['--threads=0:x'], '--threads: give intra:inter pairs'),
    (['--threads=0:-1'], '--inter_op_threads must be 0'),
])
def test_bad_precisions_and_threads_name_the_flag(args, message, capsys):
  with pytest.raises(SystemExit):
    bench.parse_args(args)
  assert message in capsys.readouterr().err


def test_threads_pairs_are_measured_side_by_side():
  args = bench.parse_args(['--models=lenet', '--kinds=bare', '--modes=train',
                           '--threads=0:0,2:1'])
  assert [bench.key(job)[-1] for job in bench.jobs_of(args)] == ['0:0', '2:1']


def _job(**fields):
  job = dict(kind='bare', mode='inference', model='lenet', batch=4, clones=1,
             precision='float32', image_size=28, steps=2, warmup=1,
             intra_op_threads=0, inter_op_threads=0, num_readers=1,
             num_preprocessing_threads=1, data='synthetic')
  job.update(fields)
  return job


def test_reader_reads_decodes_and_batches_synthetic_jpegs(tmp_path):
  records = bench.synthetic_jpegs(str(tmp_path), count=4, width=64,
                                  height=48)
  rate = bench.measure_reader(_job(
      kind='reader', mode='train', model='mobilenet_v1_025',
      dataset_name='image_folder', dataset_split_name='train',
      dataset_dir=records))
  assert rate > 0


@pytest.mark.parametrize('precision', ['float32', 'bfloat16'])
def test_bare_graph_runs_in_each_precision(precision):
  assert bench.measure_bare(_job(mode='train', precision=precision)) > 0


def test_zoo_row_has_build_time_latency_and_throughput():
  row = bench.measure_zoo(_job(kind='zoo', batch=3))
  assert row['image_size'] == 28
  assert row['build_secs'] > 0 and row['ms_per_image_b1'] > 0
  assert row['images_per_sec'] > 0


def test_zoo_table_is_the_median_of_rounds_as_markdown(monkeypatch):
  # Rounds run every network in turn: lenet, i3d, lenet, i3d.
  results = iter([
      dict(build_secs=1.0, ms_per_image_b1=2.0, images_per_sec=30.0,
           image_size=28, num_frames=None),
      dict(build_secs=5.0, ms_per_image_b1=900.0, images_per_sec=None,
           image_size=224, num_frames=64),
      dict(build_secs=3.0, ms_per_image_b1=4.0, images_per_sec=10.0,
           image_size=28, num_frames=None),
      dict(build_secs=7.0, ms_per_image_b1=1100.0, images_per_sec=None,
           image_size=224, num_frames=64)])
  monkeypatch.setattr(bench, 'run_job', lambda job: next(results))
  # The zoo table takes video networks (one clip, batch 1 only).
  args = bench.parse_args(['--zoo_table', '--models=lenet,i3d', '--rounds=2'])
  table, markdown = bench.zoo_table(args, list(bench.jobs_of(args)))
  assert [(r['model'], r['build_secs'], r['images_per_sec']) for r in table] \
      == [('lenet', 2.0, 20.0), ('i3d', 6.0, None)]
  assert markdown.splitlines()[2:] == [
      '| lenet | 28 | 2.0 | 3.0 | 20.0 |',
      '| i3d | 224, 64 frames | 6.0 | 1000.0 | - |']


def test_profile_traces_one_step_of_each_kind_and_compares_op_types(tmp_path):
  profile_dir = str(tmp_path)
  for kind in ('harness', 'bare'):
    assert bench.MEASURE[kind](_job(kind=kind, mode='train',
                                    profile_dir=profile_dir)) > 0
  ops = {}
  for kind in ('harness', 'bare'):
    base = tmp_path / ('lenet_b4_train_%s_float32' % kind)
    assert json.load(open(str(base) + '.trace.json'))['traceEvents']
    ops[kind] = json.load(open(str(base) + '.ops.json'))
    assert ops[kind]['step_micros'] > 0
    # One momentum update per LeNet variable (4 layers x weights, biases).
    assert ops[kind]['ops']['ResourceApplyMomentum'][0] == 8
  assert 'IteratorGetNext' in ops['harness']['ops']  # the harness's tf.data
  assert 'IteratorGetNext' not in ops['bare']['ops']
  args = bench.parse_args(['--models=lenet', '--batch_sizes=4',
                           '--modes=train', '--kinds=harness,bare',
                           '--profile_dir=' + profile_dir])
  table = bench.profile_table(args, list(bench.jobs_of(args))).splitlines()
  assert table[0].startswith('lenet batch 4 train float32, one traced step:')
  total = table[-1].split('|')
  assert total[1].strip().startswith('all (') and int(total[2]) == sum(
      count for count, _ in ops['harness']['ops'].values())
