"""The most bfloat16 can gain on this CPU: matmul and convolution, bf16 vs fp32.

    python benchmarks/bf16_peak.py [--rounds=5] [--size=2048]

`--precision=bfloat16` training gains what its matrix products gain, less
what stays float32 (casts, batch norm, the optimizer). This measures the
products alone with the kernels the rewrite uses: a square matmul of --size
and a ResNet-50 3x3 convolution (batch 32, 56x56, 64 -> 64 channels), in
float32 and in bfloat16 (inputs made once, in variables of that type),
rounds interleaved; it prints GFLOP/s, the spread and the bf16/fp32 ratio.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import quiet_tensorflow  # noqa: E402,F401  pylint: disable=unused-import
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1


def kernels(size):
  """name -> (input shapes, op on the inputs, floating-point operations)."""
  conv = lambda x, w: tf.nn.conv2d(x, w, 1, 'SAME')  # noqa: E731
  return {
      'matmul %dx%d' % (size, size): (
          [(size, size), (size, size)], tf.matmul, 2 * size ** 3),
      'conv 3x3 b32 56x56 64->64': (
          [(32, 56, 56, 64), (3, 3, 64, 64)], conv,
          2 * 32 * 56 * 56 * 9 * 64 * 64)}


def gflops(shapes, op, flops, dtype, steps):
  """GFLOP/s of `op` alone: its inputs are made once, in `dtype`, and kept
  in variables."""
  with tf.Graph().as_default():
    inputs = [tf1.Variable(tf.cast(tf.random.stateless_uniform(
        shape, (i, 0)), dtype)) for i, shape in enumerate(shapes)]
    output = op(*inputs)
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      session.run(output.op)
      start = time.perf_counter()
      for _ in range(steps):
        session.run(output.op)
      return flops * steps / (time.perf_counter() - start) / 1e9


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--rounds', type=int, default=5)
  parser.add_argument('--steps', type=int, default=10)
  parser.add_argument('--size', type=int, default=2048)
  args = parser.parse_args(argv)
  if args.rounds < 1 or args.steps < 1 or args.size < 1:
    parser.error('--rounds, --steps and --size must be at least 1')
  tf1.disable_eager_execution()
  results = {}
  for round_ in range(args.rounds):
    for name, (shapes, op, flops) in kernels(args.size).items():
      for dtype in (tf.float32, tf.bfloat16):
        rate = gflops(shapes, op, flops, dtype, args.steps)
        results.setdefault((name, dtype.name), []).append(rate)
        print('round %d/%d  %-28s %-8s %8.1f GFLOP/s' % (
            round_ + 1, args.rounds, name, dtype.name, rate), flush=True)
  print('\n| kernel | float32 GFLOP/s | bfloat16 GFLOP/s | bf16 / fp32 |')
  print('|---|---:|---:|---:|')
  for name in kernels(args.size):
    fp32, bf16 = results[(name, 'float32')], results[(name, 'bfloat16')]
    print('| %s | %.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) | %.2f |' % (
        name, statistics.median(fp32), min(fp32), max(fp32),
        statistics.median(bf16), min(bf16), max(bf16),
        statistics.median(bf16) / statistics.median(fp32)))
  return 0


if __name__ == '__main__':
  sys.exit(main())
