"""benchmark_image_classifier.py runs and reports what it measured (speed
itself is never asserted: it is the benchmark's to print)."""
import json
import os

import pytest

from benchmark_image_classifier import parse_args
from benchmarks import classifier_benchmark as bench
from deployment import session_options
import scripts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, 'benchmark_image_classifier.py')


def run(*args):
  return scripts.run(BENCH, *args, timeout=900)


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
               '--warmup=1', '--peak_size=64', '--output_json=' + out)
  assert result.returncode == 0, result.stderr[-3000:]
  rounds = [line.split()[2:6] for line in result.stdout.splitlines()
            if line.startswith('round ')]
  # Each round measures the matmul peak first, then every kind.
  assert [r[:2] for r in rounds[::7]] == [['matmul', '64'], ['matmul', '64']]
  order = [r for r in rounds if r[0] != 'matmul']
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
    assert row['gflops_per_sec'] == pytest.approx(
        row['median'] * row['forward_flops_per_image'] * (
            3 if row['mode'] == 'train' else 1) / 1e9)
    assert row['fraction_of_peak'] == pytest.approx(
        row['gflops_per_sec'] / report['peak_gflops_per_sec']['float32'])
  assert report['cpu'] == bench.cpu_description()
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
    parse_args(args)
  assert message in capsys.readouterr().err


def test_threads_pairs_are_measured_side_by_side():
  args = parse_args(['--models=lenet', '--kinds=bare', '--modes=train',
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
  args = parse_args(['--zoo_table', '--models=lenet,i3d', '--rounds=2'])
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
  args = parse_args(['--models=lenet', '--batch_sizes=4',
                     '--modes=train', '--kinds=harness,bare',
                     '--profile_dir=' + profile_dir])
  table = bench.profile_table(args, list(bench.jobs_of(args))).splitlines()
  assert table[0].startswith('lenet batch 4 train float32, one traced step:')
  total = table[-1].split('|')
  assert total[1].strip().startswith('all (') and int(total[2]) == sum(
      count for count, _ in ops['harness']['ops'].values())


def test_forward_flops_are_the_networks_multiply_adds_times_two():
  # LeNet at 28x28x3: conv 5x5 3->32 at 28x28, conv 5x5 32->64 at 14x14,
  # 7*7*64 -> 1024 -> 1000; the profiler adds the bias adds and the like.
  products = 2 * (28 * 28 * 25 * 3 * 32 + 14 * 14 * 25 * 32 * 64
                  + 7 * 7 * 64 * 1024 + 1024 * 1000)
  flops = bench.measure_flops(_job(kind='flops'))
  assert products <= flops <= 1.02 * products


def test_peak_is_measured_in_float32_and_bfloat16():
  peak = bench.measure_peak(dict(kind='peak', size=64, steps=2))
  assert sorted(peak) == ['bfloat16', 'float32']
  assert all(rate > 0 for rate in peak.values())


def test_cpu_description_names_the_model_and_its_matrix_units(tmp_path):
  cpuinfo = tmp_path / 'cpuinfo'
  cpuinfo.write_text(
      'processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n'
      'flags\t\t: fpu avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n\n'
      'processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n'
      'flags\t\t: fpu avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n')
  cpu = bench.cpu_description(str(cpuinfo))
  assert (cpu['model'], cpu['amx'], cpu['avx512_bf16']) == (
      'Intel(R) Xeon(R) Platinum 8480+', True, True)
  cpuinfo.write_text('model name\t: AMD EPYC\nflags\t\t: fpu avx512_bf16\n')
  cpu = bench.cpu_description(str(cpuinfo))
  assert (cpu['model'], cpu['amx'], cpu['avx512_bf16']) == (
      'AMD EPYC', False, True)


def test_table_gives_each_row_its_gflops_and_fraction_of_its_precisions_peak(
    monkeypatch):
  """Real-data harness rows beside synthetic ones; the anchors once."""
  args = parse_args([
      '--models=lenet', '--batch_sizes=4', '--modes=train',
      '--kinds=harness,bare', '--precisions=float32,bfloat16',
      '--data=synthetic,real', '--dataset_dir=/nowhere', '--rounds=1'])
  jobs = list(bench.jobs_of(args))
  assert [(j['kind'], j['data'], j['precision']) for j in jobs] == [
      (kind, data, precision) for precision in ('float32', 'bfloat16')
      for kind, data in (('harness', 'synthetic'), ('harness', 'real'),
                         ('bare', 'synthetic'))]
  results = {'flops': 10 ** 9, 'peak': {'float32': 100.0, 'bfloat16': 200.0}}
  rates = iter([10.0, 5.0, 20.0, 30.0, 15.0, 40.0])
  monkeypatch.setattr(bench, 'run_job', lambda job: results.get(
      job['kind']) or next(rates))
  table, markdown, machine = bench.speed_table(args, jobs)
  assert machine['peak_gflops_per_sec'] == {'float32': 100.0,
                                            'bfloat16': 200.0}
  lines = markdown.splitlines()
  cpu = bench.cpu_description()
  assert lines[0].startswith('CPU: %s, %d cores; AMX: %s; AVX512-BF16: %s.' % (
      cpu['model'], cpu['cores'], 'yes' if cpu['amx'] else 'no',
      'yes' if cpu['avx512_bf16'] else 'no'))
  assert 'float32 100 GFLOP/s, bfloat16 200 GFLOP/s (2.00x)' in lines[0]
  rows = [line for line in lines if line.startswith('| lenet')]
  # 10 images/sec x 1 GFLOP x 3 (a training step) = 30 GFLOP/s: 30% of 100.
  assert rows == [
      '| lenet | 4 | train | harness | synthetic | float32 | 1 | 0:0 | 10.0 '
      '| 10.0-10.0 | 0.50 | 1.00 | 30 | 30% |',
      '| lenet | 4 | train | harness | real | float32 | 1 | 0:0 | 5.0 '
      '| 5.0-5.0 | 0.25 | 1.00 | 15 | 15% |',
      '| lenet | 4 | train | bare | synthetic | float32 | 1 | 0:0 | 20.0 '
      '| 20.0-20.0 | 1.00 | 1.00 | 60 | 60% |',
      '| lenet | 4 | train | harness | synthetic | bfloat16 | 1 | 0:0 | 30.0 '
      '| 30.0-30.0 | 0.75 | 3.00 | 90 | 45% |',
      '| lenet | 4 | train | harness | real | bfloat16 | 1 | 0:0 | 15.0 '
      '| 15.0-15.0 | 0.38 | 3.00 | 45 | 22% |',
      '| lenet | 4 | train | bare | synthetic | bfloat16 | 1 | 0:0 | 40.0 '
      '| 40.0-40.0 | 1.00 | 2.00 | 120 | 60% |']


def test_precision_table_is_one_flag_apart_from_the_other_tables(capsys):
  args = parse_args(['--precision_table', '--models=lenet'])
  assert args.precisions == ['float32', 'bfloat16']
  with pytest.raises(SystemExit):
    parse_args(['--precision_table', '--zoo_table'])
  assert '--precision_table: not with --zoo_table' in capsys.readouterr().err


def _trace(ops, step_micros):
  return {'step_micros': step_micros,
          'ops': {op_type: [count, ms * 1000] for op_type, (count, ms)
                  in ops.items()}}


def test_precision_table_puts_float32_and_bfloat16_op_times_side_by_side(
    monkeypatch, tmp_path):
  """Each job traced once a round; medians per op type; sorted by bfloat16
  time, an op type's bfloat16 and float32 instances on one row, the casts
  on rows of their own (kept when beyond `top`), the rest in one row."""
  cpuinfo = tmp_path / 'cpuinfo'
  cpuinfo.write_text('model name\t: Intel(R) Xeon(R) Platinum 8480+\n'
                     'flags\t\t: fpu avx512f avx512_bf16 amx_bf16\n')
  monkeypatch.setattr(session_options, 'CPUINFO', str(cpuinfo))
  profile_dir = tmp_path / 'profiles'
  profile_dir.mkdir()
  args = parse_args(['--precision_table', '--models=lenet', '--batch_sizes=4',
                     '--modes=train', '--rounds=3', '--num_clones=1,2',
                     '--threads=0:0,2:1'])
  jobs = bench.precision_jobs(args, str(profile_dir))
  assert [(j['kind'], j['precision'], j['clones'], j['intra_op_threads'],
           j['profile_dir']) for j in jobs] == [
               ('harness', 'float32', 1, 0, str(profile_dir)),
               ('harness', 'bfloat16', 1, 0, str(profile_dir))]

  def float32(conv_ms):
    return {'Conv2D': (2, conv_ms), 'MatMul': (1, 4.0), 'Relu': (2, 1.0),
            'Cast int64->float32': (1, 0.2)}

  def bfloat16(conv_ms):
    return {'Conv2D bf16': (2, conv_ms), 'MatMul bf16': (1, 2.0),
            'Relu bf16': (2, 0.5), 'MatMul': (1, 1.0),
            'Cast float32->bfloat16': (3, 0.3),
            'Cast bfloat16->float32': (2, 0.1), 'Cast int64->float32': (1, 0.2)}

  traces = iter([  # round by round: float32, then bfloat16
      (float32(10.0), 14000, 10.0), (bfloat16(5.0), 8000, 20.0),
      (float32(12.0), 16000, 11.0), (bfloat16(7.0), 9000, 22.0),
      (float32(11.0), 15000, 12.0), (bfloat16(6.0), 10000, 24.0)])

  def run_job(job):  # as the harness with a profile_dir: the ops written
    ops, step, rate = next(traces)
    path = profile_dir / ('lenet_b4_train_harness_%s.ops.json'
                          % job['precision'])
    path.write_text(json.dumps(_trace(ops, step)))
    return rate
  monkeypatch.setattr(bench, 'run_job', run_job)
  table, markdown, machine = bench.precision_table(args, jobs, top=2)
  lines = markdown.splitlines()
  assert lines[0].startswith('CPU: Intel(R) Xeon(R) Platinum 8480+, %d cores; '
                             'AMX: yes; AVX512-BF16: yes; AVX-512: yes. '
                             % os.cpu_count())
  assert machine['cpu']['amx']
  assert lines[3] == (
      'lenet batch 4 train, harness, one traced step: float32 15.0 ms, '
      'bfloat16 9.0 ms (0.60x); 11.0 and 22.0 images/sec over the timed steps')
  assert lines[4] == ('bfloat16 step: 5 of 12 ops in bfloat16, 5 casts to or '
                      'from bfloat16')
  assert lines[5] == ('| op type | fp32 ms | bf16 ms | bf16 / fp32 | '
                      'bf16 kernels |')
  # Medians: Conv2D 11 ms in float32, 6 in bfloat16; MatMul 2 + 1 ms.
  assert lines[7:] == [
      '| Conv2D | 11.0 | 6.0 | 0.55 | 100% |',
      '| MatMul | 4.0 | 3.0 | 0.75 | 67% |',
      '| Cast float32->bfloat16 | 0.0 | 0.3 | - | - |',
      '| Cast bfloat16->float32 | 0.0 | 0.1 | - | - |',
      '| other (2 types) | 1.2 | 0.7 | 0.58 | 71% |',
      '| all (6 types) | 16.2 | 10.1 | 0.62 | 84% |']
  row, = table
  assert row['step_ms'] == {'float32': 15.0, 'bfloat16': 9.0}
  assert [t['op_type'] for t in row['op_types']] == [
      'Conv2D', 'MatMul', 'Relu', 'Cast float32->bfloat16',
      'Cast int64->float32', 'Cast bfloat16->float32']


@pytest.mark.slow
def test_precision_table_flag_traces_the_harness_in_each_precision(tmp_path):
  """The command, on LeNet: one table, the CPU named, every op type in both
  columns; bfloat16 kernels and casts exactly where this CPU computes in
  bfloat16."""
  out = str(tmp_path / 'precision.json')
  result = run('--precision_table', '--models=lenet', '--batch_sizes=4',
               '--modes=train', '--rounds=1', '--steps=1', '--warmup=1',
               '--output_json=' + out)
  assert result.returncode == 0, result.stderr[-3000:]
  traced = [line for line in result.stdout.splitlines()
            if line.startswith('round ')]
  assert [line.split()[6].rstrip(':') for line in traced] == [
      'float32', 'bfloat16']
  lines = result.stdout.splitlines()
  cpu = bench.cpu_description()
  first = lines.index(next(l for l in lines if l.startswith('CPU: ')))
  assert lines[first].startswith('CPU: %s, %d cores; AMX: %s; AVX512-BF16: %s;'
                                 % (cpu['model'], cpu['cores'],
                                    'yes' if cpu['amx'] else 'no',
                                    'yes' if cpu['avx512_bf16'] else 'no'))
  assert (session_options.bfloat16_note() or '--precision=bfloat16') in lines[
      first]
  header = lines.index('| op type | fp32 ms | bf16 ms | bf16 / fp32 | '
                       'bf16 kernels |')
  assert lines[header - 2].startswith('lenet batch 4 train, harness, one '
                                      'traced step: float32 ')
  rows = [line.split('|')[1:-1] for line in lines[header + 2:]
          if line.startswith('| ')]
  assert rows[-1][0].strip().startswith('all (')
  names = [r[0].strip() for r in rows]
  assert 'Cast float32->bfloat16' in names and 'Cast bfloat16->float32' in names
  report = json.load(open(out))
  row, = report['results']
  types = {t['op_type']: t for t in row['op_types']}
  # Both steps are one LeNet training step: its updates in both columns.
  assert types['ResourceApplyMomentum']['float32_ms'] > 0
  assert types['ResourceApplyMomentum']['bfloat16_ms'] > 0
  both = [t for t in types.values()
          if t['float32_ms'] > 0 and t['bfloat16_ms'] > 0]
  assert len(both) >= 5, types
  compute = session_options.bfloat16_compute()
  bf16 = compute in ('units', 'converted')
  if compute == 'unknown':
    pytest.skip('no x86 CPU flags: whether bfloat16 ran is not predicted')
  assert (row['bfloat16_ops'] > 0) == bf16
  assert (types['Cast float32->bfloat16']['bfloat16_ms'] > 0) == bf16
  assert types['Cast float32->bfloat16']['float32_ms'] == 0
  bf16_ms = [t['bfloat16_ms'] for t in row['op_types']]
  assert bf16_ms == sorted(bf16_ms, reverse=True)
  assert report['cpu'] == cpu
