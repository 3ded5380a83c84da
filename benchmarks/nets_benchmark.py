"""Graph-build time and one-image inference time of every registered network.

    python benchmarks/nets_benchmark.py [--models='mobilenet*'] [--runs=3]

Per network, at its default image size (video networks: one clip of their
default frame count), is_training=False, batch 1: the
seconds to build the graph (network function only), and the median of
`--runs` timed forward passes after one warm-up pass. The anchor printed
first is a single 3x3 convolution at 224, the floor of a session call.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_slim as slim  # noqa: E402

import tf_compat  # noqa: E402,F401
from nets import nets_factory  # noqa: E402

tf1 = tf.compat.v1


def measure(build, shape, runs):
  with tf.Graph().as_default():
    images = tf1.placeholder(tf.float32, shape)
    start = time.time()
    output = build(images)
    build_secs = time.time() - start
    feed = {images: np.random.RandomState(0).uniform(-1, 1, shape)}
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      sess.run(output, feed)
      times = []
      for _ in range(runs):
        start = time.time()
        sess.run(output, feed)
        times.append(time.time() - start)
  return build_secs, float(np.median(times))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--models', default='*')
  parser.add_argument('--runs', type=int, default=3)
  args = parser.parse_args()
  print('%-34s %5s %9s %12s' % ('model', 'size', 'build s', 'infer ms'))
  build, infer = measure(lambda x: slim.conv2d(x, 8, 3, activation_fn=None),
                         [1, 224, 224, 3], args.runs)
  print('%-34s %5d %9.2f %12.1f' % ('anchor: one 3x3 conv', 224, build,
                                     infer * 1000))
  for name in nets_factory.list_models(args.models):
    info = nets_factory.get_info(name)
    fn = nets_factory.get_network_fn(name, info.num_classes)
    build, infer = measure(lambda x: fn(x)[0], info.input_shape(1), args.runs)
    print('%-34s %5d %9.2f %12.1f' % (name, info.default_image_size, build,
                                       infer * 1000))
    sys.stdout.flush()


if __name__ == '__main__':
  main()
