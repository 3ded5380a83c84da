"""Images/sec of the harness, the bare graph and Keras, side by side.

    python benchmark_image_classifier.py --models=resnet_v1_50,inception_v3,mobilenet_v1 \
        --batch_sizes=32 --rounds=5 --output_json=bench.json

The command: the flags, checked here, go to benchmarks/classifier_benchmark.py,
which measures -- the harness (classifier.model_fn on model_deploy clones in
the Estimator-compatible runner), the bare TF-Slim graph, keras.applications
and the reader, each in a fresh process, the kinds interleaved within each of
--rounds rounds, the matmul peaks first in each -- and reports the medians,
spreads, ratios to the bare graph and to float32, and each row's GFLOP/s and
fraction of its precision's peak (its docstring tells how). --zoo_table
instead measures every image network's build time, latency and throughput;
--profile_dir adds an op table of one traced step of harness and bare graph;
--precision_table instead traces one step of the harness in float32 and in
bfloat16 and prints their op time by op type side by side, the CPU named;
--input_table instead runs benchmarks/input_benchmark.py (the input pipeline
alone, on ImageNet-size photo JPEGs). docs/benchmarks.md has the
measurements.
"""
import argparse
import os
import sys

# First, before anything imports TensorFlow: its start-up lines stay off.
import quiet_tensorflow  # noqa: F401  pylint: disable=unused-import
from benchmarks import classifier_benchmark

ROOT = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODELS = 'resnet_v1_50,inception_v3,mobilenet_v1'


def parse_args(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--models', default=None,
                      help='%s (--zoo_table: every image network)'
                      % DEFAULT_MODELS)
  parser.add_argument('--batch_sizes', default='32',
                      help='images per step, all clones together')
  parser.add_argument('--num_clones', default='1')
  parser.add_argument('--precisions', default='float32',
                      help='float32, bfloat16, float16 (as --precision of '
                      'train_image_classifier.py)')
  parser.add_argument('--modes', default='train,inference')
  parser.add_argument('--kinds', default='harness,bare,keras',
                      help=', '.join(classifier_benchmark.KINDS))
  parser.add_argument('--rounds', type=int, default=5)
  parser.add_argument('--steps', type=int, default=10, help='timed steps')
  parser.add_argument('--warmup', type=int, default=3)
  parser.add_argument('--data', default='synthetic',
                      help='synthetic, real or both (synthetic,real): the '
                      'harness on one random batch or on --dataset_dir\'s '
                      'records through reader and preprocessing')
  parser.add_argument('--dataset_name', default='digits')
  parser.add_argument('--dataset_split_name', default='train')
  parser.add_argument('--dataset_dir', default=None)
  parser.add_argument('--num_readers', type=int, default=4)
  parser.add_argument('--num_preprocessing_threads', type=int, default=4)
  parser.add_argument('--threads', default='0:0',
                      help='intra_op:inter_op thread pairs, e.g. 0:0,1:1,2:1 '
                      '(0: TensorFlow\'s default)')
  parser.add_argument('--peak_size', type=int, default=2048,
                      help='the square matmul whose GFLOP/s in float32 and '
                      'bfloat16, measured each round, is the peak the rows\' '
                      'efficiency is a fraction of')
  parser.add_argument('--zoo_table', action='store_true',
                      help='build s, inference ms/image at batch 1 and '
                      'images/sec at --zoo_batch_size of every --models')
  parser.add_argument('--zoo_batch_size', type=int, default=32)
  parser.add_argument('--input_table', action='store_true',
                      help='instead, the input pipeline on ImageNet-size '
                      'photo JPEGs per preprocessing family, training and '
                      'evaluation, one core and all: the whole-image decoder, '
                      'TF-Slim\'s order and the fused pipeline, interleaved '
                      '(benchmarks/input_benchmark.py; --rounds, the first '
                      '--batch_sizes, --num_readers, --dataset_dir to keep '
                      'its records, --output_json/--output_markdown)')
  parser.add_argument('--precision_table', action='store_true',
                      help='instead, the harness of each --models, '
                      '--batch_sizes and --modes in float32 and in bfloat16, '
                      'one step of each traced after the timed ones: op time '
                      'by op type side by side (fp32 ms, bf16 ms, ratio; '
                      'casts on rows of their own; sorted by bf16 time; the '
                      'total), the CPU and its bfloat16 units named (the '
                      'median of --rounds; --profile_dir keeps the traces)')
  parser.add_argument('--output_json', default=None)
  parser.add_argument('--output_markdown', default=None,
                      help='the table as markdown')
  parser.add_argument('--profile_dir', default=None,
                      help='after the timed steps, trace one more step of '
                      'harness and bare graph: Chrome traces and op time by '
                      'op type written here, compared in a printed table')
  args = parser.parse_args(argv)

  def items(text, name, allowed=None, cast=str):
    values = [cast(v) for v in text.split(',') if v]
    bad = [v for v in values if allowed is not None and v not in allowed]
    if not values or bad:
      parser.error('--%s: %s not one of %s' % (name, ', '.join(map(str, bad))
                                               or 'nothing', ', '.join(allowed)))
    return values
  sys.path.insert(0, ROOT)
  import tf_compat  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  from deployment import session_options  # pylint: disable=import-outside-toplevel
  from nets import nets_factory  # pylint: disable=import-outside-toplevel
  # The zoo table covers the video networks too (batch 1); the rest trains
  # on images.
  models = [name for name in nets_factory.list_models()
            if args.zoo_table or not nets_factory.get_info(name).num_frames]
  if args.models is None:
    args.models = ','.join(models) if args.zoo_table else DEFAULT_MODELS
  args.models = items(args.models, 'models', models)
  args.batch_sizes = items(args.batch_sizes, 'batch_sizes', cast=int)
  args.num_clones = items(args.num_clones, 'num_clones', cast=int)
  args.precisions = items(args.precisions, 'precisions',
                          session_options.PRECISIONS)
  args.modes = items(args.modes, 'modes', classifier_benchmark.MODES)
  args.kinds = items(args.kinds, 'kinds', classifier_benchmark.KINDS)
  args.data = items(args.data, 'data', classifier_benchmark.DATA)
  try:
    for precision in args.precisions:
      session_options.check_precision(precision)
    try:
      args.threads = [tuple(int(n) for n in pair.split(':'))
                      for pair in args.threads.split(',') if pair]
    except ValueError:
      args.threads = []
    if not args.threads or any(len(pair) != 2 for pair in args.threads):
      raise ValueError('--threads: give intra:inter pairs, e.g. 0:0,2:1')
    for intra, inter in args.threads:
      session_options.check_threads(intra, inter)
  except ValueError as e:
    parser.error(str(e).replace('--precision=', '--precisions=', 1))
  for batch in args.batch_sizes:
    for clones in args.num_clones:
      if clones < 1 or batch < clones or batch % clones:
        parser.error('--batch_sizes=%d does not split over --num_clones=%d'
                     % (batch, clones))
  if args.precision_table:
    if args.zoo_table or args.input_table:
      parser.error('--precision_table: not with --zoo_table or --input_table')
    args.precisions = ['float32', 'bfloat16']  # the table's two columns
  if 'real' in args.data and not args.dataset_dir:
    parser.error('--data=real needs --dataset_dir')
  if args.profile_dir:
    args.profile_dir = os.path.abspath(os.path.expanduser(args.profile_dir))
    try:
      os.makedirs(args.profile_dir, exist_ok=True)
    except OSError as e:
      parser.error('--profile_dir=%s: %s' % (args.profile_dir, e.strerror))
  if args.rounds < 1 or args.steps < 1 or args.warmup < 0:
    parser.error('--rounds and --steps must be at least 1, --warmup 0')
  if args.peak_size < 1:
    parser.error('--peak_size must be at least 1')
  if args.num_readers < 1 or args.num_preprocessing_threads < 1:
    parser.error('--num_readers and --num_preprocessing_threads must be at '
                 'least 1')
  return args


def main(argv=None):
  args = parse_args(argv)
  if args.input_table:
    sys.path.insert(0, ROOT)
    from benchmarks import input_benchmark  # pylint: disable=import-outside-toplevel
    return input_benchmark.main(
        ['--rounds=%d' % args.rounds, '--batch_size=%d' % args.batch_sizes[0],
         '--num_readers=%d' % args.num_readers] +
        ['--%s=%s' % (name, getattr(args, name)) for name in
         ('dataset_dir', 'output_json', 'output_markdown')
         if getattr(args, name)])
  return classifier_benchmark.measure_and_report(args)


if __name__ == '__main__':
  sys.exit(main())
