"""Training throughput on a local cluster against one process, in one run.

    python benchmarks/cluster_benchmark.py --layouts=local,ps2,collective2 --rounds=3

Runs train_image_classifier.py on digits (LeNet by default), the same net
and per-worker batch, as
  * local: one process, no cluster (the anchor);
  * psW: 1 ps + W workers, asynchronous, through deployment.launch on
    127.0.0.1 (--async_worker_warmup_steps=0: every worker from the start);
  * collectiveW: W workers, no ps, --variable_update=collective_all_reduce;
the layouts interleaved in --rounds rounds.
A worker's throughput is the median of its progress lines' images/sec
(the first line, which holds the start-up, is left out); a cluster's is the
sum over its workers. Prints the median over rounds, the spread (min-max)
and the ratio to local in the same run.

All tasks share this machine's cores, so more workers show the cost of the
distributed runtime (variables on a ps, gRPC per step), not a speed-up.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from deployment import launch  # noqa: E402

TRAIN = os.path.join(ROOT, 'train_image_classifier.py')
RATE = re.compile(r'^(?:\[(\S+)\] )?step .*\(([\d.]+) images/sec;', re.M)


def worker_rates(log):
  """{task: [images/sec of each progress line after its first]}."""
  rates = {}
  for task, rate in RATE.findall(log):
    rates.setdefault(task or 'local', []).append(float(rate))
  return {task: values[1:] for task, values in rates.items() if values[1:]}


def parse_layout(text):
  """'local' -> ('local', 0); 'ps2' -> ('ps', 2); 'collective2' -> ..."""
  match = re.match(r'^(local|ps|collective)(\d*)$', text)
  if not match or (match.group(1) != 'local') != bool(match.group(2)):
    raise SystemExit("unknown layout '%s': local, ps<N> or collective<N>" %
                     text)
  return match.group(1), int(match.group(2) or 0)


def layout_name(kind, workers):
  if kind == 'local':
    return 'local'
  if kind == 'ps':
    return '1 ps + %d workers' % workers
  return '%d workers all-reduce' % workers


def run_once(layout, args, digits_dir, scratch):
  kind, workers = layout
  train_dir = tempfile.mkdtemp(dir=scratch)
  argv = [TRAIN, '--dataset_name=digits', '--dataset_dir=' + digits_dir,
          '--model_name=' + args.model_name, '--train_dir=' + train_dir,
          '--max_number_of_steps=%d' % args.steps,
          '--batch_size=%d' % args.batch_size, '--optimizer=sgd',
          '--learning_rate=0.01', '--learning_rate_decay_type=fixed',
          '--weight_decay=0', '--log_every_n_steps=%d' % args.log_every,
          '--save_interval_secs=600', '--save_summaries_secs=600',
          '--async_worker_warmup_steps=0']
  if kind == 'collective':
    argv.append('--variable_update=collective_all_reduce')
  log_path = os.path.join(train_dir, 'log')
  with open(log_path, 'w') as out:
    if kind == 'local':
      status = subprocess.run([sys.executable] + argv, stdout=out,
                              stderr=subprocess.STDOUT, cwd=ROOT).returncode
    else:
      status = launch.run(1 if kind == 'ps' else 0, workers, argv,
                          grace_secs=30, out=out)
  log = open(log_path).read()
  if status != 0:
    raise SystemExit('run of %s failed:\n%s' % (layout_name(*layout),
                                                log[-3000:]))
  rates = worker_rates(log)
  expected = ['local'] if kind == 'local' else [
      'worker:%d' % i for i in range(workers)]
  missing = [task for task in expected if task not in rates]
  if missing:
    raise SystemExit('no progress lines after the first from %s; raise '
                     '--steps' % ', '.join(missing))
  return sum(statistics.median(rates[task]) for task in expected)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--layouts', default='local,ps2,collective2',
                      help='local, ps<N> (1 ps + N workers), collective<N>')
  parser.add_argument('--rounds', type=int, default=3)
  parser.add_argument('--model_name', default='lenet')
  parser.add_argument('--batch_size', type=int, default=50,
                      help='per worker (and for local)')
  parser.add_argument('--steps', type=int, default=1500,
                      help='global steps per run')
  parser.add_argument('--log_every', type=int, default=100)
  args = parser.parse_args()
  layouts = [parse_layout(t.strip()) for t in args.layouts.split(',')]
  with tempfile.TemporaryDirectory() as scratch:
    digits_dir = os.path.join(scratch, 'digits')
    subprocess.run([sys.executable, os.path.join(ROOT, 'download_and_convert_data.py'),
                    '--dataset_name=digits', '--dataset_dir=' + digits_dir],
                   check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    results = {layout: [] for layout in layouts}
    for round_ in range(args.rounds):
      for layout in layouts:
        results[layout].append(run_once(layout, args, digits_dir, scratch))
        print('round %d, %s: %.1f images/sec' % (
            round_ + 1, layout_name(*layout), results[layout][-1]), flush=True)
  anchor = statistics.median(results[layouts[0]])
  print('\n%-24s %12s %18s %8s' % ('layout', 'images/sec',
                                   'spread (min-max)', 'ratio'))
  for layout in layouts:
    values = results[layout]
    median = statistics.median(values)
    print('%-24s %12.1f %8.1f-%-9.1f %8.2f' % (
        layout_name(*layout), median, min(values), max(values),
        median / anchor))


if __name__ == '__main__':
  main()
