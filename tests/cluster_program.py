"""A tiny Estimator program run as every task of the cluster tests.

    TF_CONFIG=... python tests/cluster_program.py MODEL_DIR MAX_STEPS SYNC

Its model makes each step countable: the loss is `w` (gradient 1), the
optimizer plain SGD with learning rate 1, so every applied update lowers w by
exactly the average of the gradients it holds, 1; `contributions` counts the
training steps the workers ran. Evaluation reports w.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import quiet_tensorflow  # noqa: E402,F401  (as the scripts: first)
import tensorflow as tf  # noqa: E402

from deployment import cluster  # noqa: E402
from runner import estimator as est  # noqa: E402

tf1 = tf.compat.v1
tf1.logging.set_verbosity(tf1.logging.INFO)  # the tests read "Evaluated ..."


def model_fn(features, labels, mode, params, config):
  w = tf1.get_variable('w', [], initializer=tf1.zeros_initializer())
  contributions = tf1.get_variable(
      'contributions', [], tf.int64, initializer=tf1.zeros_initializer(),
      trainable=False)
  loss = w * tf.reduce_mean(features)
  if mode != est.ModeKeys.TRAIN:
    return est.EstimatorSpec(mode, loss=loss, eval_metric_ops={
        'w': tf1.metrics.mean(w)})
  optimizer = tf1.train.GradientDescentOptimizer(1.0)
  hooks = []
  if params['sync']:
    optimizer = tf1.train.SyncReplicasOptimizer(
        optimizer, replicas_to_aggregate=params['sync'],
        total_num_replicas=config.num_worker_replicas)
    hooks = cluster.sync_replicas_hooks(optimizer, config.is_chief,
                                        config.num_worker_replicas)
  step = optimizer.minimize(loss, tf1.train.get_global_step())
  with tf.control_dependencies([step]):
    train_op = contributions.assign_add(1)
  return est.EstimatorSpec(mode, loss=loss, train_op=train_op,
                           training_hooks=hooks)


def input_fn():
  return tf.data.Dataset.from_tensors(tf.ones([4])).repeat()


def main(model_dir, max_steps, sync):
  config = est.RunConfig(save_checkpoints_secs=1, log_step_count_steps=None)
  estimator = est.Estimator(model_fn, model_dir, config,
                            params={'sync': int(sync)})
  result = est.train_and_evaluate(
      estimator, est.TrainSpec(input_fn, max_steps=int(max_steps)),
      est.EvalSpec(input_fn, steps=1, throttle_secs=1))
  if result is not None:
    print('evaluated: global_step=%d w=%g' % (result['global_step'],
                                              result['w']))
  print('done: %s' % config.task_type)


if __name__ == '__main__':
  main(*sys.argv[1:4])
