"""Training throughput of the harness against a bare graph, in one run.

    python benchmarks/train_benchmark.py --models=lenet,vgg_16 --clones=1,2

For each model and clone count it measures images/sec of
  * harness: the real path -- digits TFRecords through the parallel reader and
    preprocessing, classifier.model_fn on model_deploy clones, the
    Estimator-compatible runner (MonitoredTrainingSession, hooks, checkpoints);
  * anchor: a bare TF-Slim style graph of the same network on one device --
    a constant batch in the graph, one SGD step per session.run, nothing else;
and prints the ratio harness/anchor. Clones on CPU are logical devices sharing
this machine's cores, so more clones show the overhead of splitting, not a
speed-up.
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_compat  # noqa: E402,F401
import classifier  # noqa: E402
from datasets import converters, dataset_factory  # noqa: E402
from deployment import estimator as est  # noqa: E402
from deployment import model_deploy  # noqa: E402
from nets import nets_factory  # noqa: E402

tf1 = tf.compat.v1


class _Timer(tf1.train.SessionRunHook):
  """Times the steps after `warmup` steps."""

  def __init__(self, warmup):
    self.warmup, self.count, self.start, self.elapsed = warmup, 0, None, 0.0

  def before_run(self, run_context):
    if self.count == self.warmup:
      self.start = time.time()

  def after_run(self, run_context, run_values):
    self.count += 1
    if self.start is not None:
      self.elapsed = time.time() - self.start


def _session_config(clones):
  config = tf1.ConfigProto(allow_soft_placement=True)
  config.device_count['CPU'] = max(clones, 1)
  return config


def harness(model, clones, batch, steps, warmup, digits_dir):
  dataset = dataset_factory.get_dataset('digits', 'train', digits_dir)
  params = classifier.ClassifierParams(
      model_name=model, num_classes=10, num_samples_per_epoch=dataset.num_samples,
      batch_size=batch // clones,  # per clone: the step takes `batch` in all
      weight_decay=0.0, summarize_activations=False,
      optimizer=classifier.OptimizerParams(optimizer='sgd', learning_rate=0.001),
      deployment=model_deploy.DeploymentConfig(num_clones=clones,
                                               clone_on_cpu=clones > 1),
      log_every_n_steps=10 ** 9)
  with tempfile.TemporaryDirectory() as train_dir:
    config = est.RunConfig(save_summary_steps=None, log_step_count_steps=None,
                           save_checkpoints_secs=3600,
                           session_config=_session_config(clones))
    estimator = est.Estimator(classifier.model_fn, train_dir, config=config,
                              params={'classifier': params})
    timer = _Timer(warmup)
    estimator.train(classifier.make_input_fn(dataset, model, batch, True),
                    hooks=[timer], steps=warmup + steps)
  return steps * batch / timer.elapsed


def anchor(model, batch, steps, warmup):
  info = nets_factory.get_info(model)
  size = info.default_image_size
  with tf.Graph().as_default():
    rng = np.random.RandomState(0)
    images = tf.constant(rng.uniform(-1, 1, [batch, size, size, 1]), tf.float32)
    labels = tf.constant(rng.randint(0, 10, batch))
    logits, _ = nets_factory.get_network_fn(model, 10, is_training=True)(images)
    loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf1.train.GradientDescentOptimizer(0.001).minimize(loss)
    with tf1.Session(config=_session_config(1)) as sess:
      sess.run(tf1.global_variables_initializer())
      for _ in range(warmup):
        sess.run(train_op)
      start = time.time()
      for _ in range(steps):
        sess.run(train_op)
      return steps * batch / (time.time() - start)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--models', default='lenet,vgg_16')
  parser.add_argument('--clones', default='1,2')
  parser.add_argument('--batch_size', type=int, default=32)
  parser.add_argument('--steps', type=int, default=0,
                      help='timed steps (default: 200 for small nets, 5 for vgg)')
  parser.add_argument('--warmup', type=int, default=2)
  args = parser.parse_args()
  digits_dir = os.path.join(tempfile.gettempdir(), 'slim_zoo_bench_digits')
  if not os.path.exists(os.path.join(digits_dir, 'digits_dataset.json')):
    converters.convert('digits', digits_dir, stream=open(os.devnull, 'w'))
  print('model        clones  harness img/s  anchor img/s  ratio')
  for model in args.models.split(','):
    steps = args.steps or (5 if model.startswith(('vgg', 'resnet', 'inception'))
                           else 200)
    base = anchor(model, args.batch_size, steps, args.warmup)
    for clones in [int(c) for c in args.clones.split(',')]:
      ours = harness(model, clones, args.batch_size, steps, args.warmup,
                     digits_dir)
      print('%-12s %6d  %13.1f  %12.1f  %5.2f' % (model, clones, ours, base,
                                                  ours / base))
      sys.stdout.flush()


if __name__ == '__main__':
  main()
