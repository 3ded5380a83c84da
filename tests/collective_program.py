"""One task of a collective_all_reduce cluster in the exactness tests.

    TF_CONFIG=... python tests/collective_program.py MODEL_DIR STEPS \
        OPTIMIZER[,OPTIMIZER...] BATCH_NORM API

Every worker trains `STEPS` steps with 2 CPU clones on its own slice of one
fixed batch (worker i of n gets rows [i*B/n, (i+1)*B/n)), through the runner,
with model_deploy.deploy (API=deploy) or replicate_model_fn (API=replicate).
One job per optimizer, one after the other, in MODEL_DIR/<optimizer> (one
process start for several). The chief saves a checkpoint at step 0 and at
the last step; every worker writes its final variables to
MODEL_DIR/<optimizer>/<task>_<index>.npz, so the test compares workers with
each other and with one device on the whole batch.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_slim as slim  # noqa: E402

import tf_compat  # noqa: E402,F401
from deployment import cluster as cluster_lib  # noqa: E402
from deployment import model_deploy  # noqa: E402
from runner import estimator as est  # noqa: E402
from runner import replicate  # noqa: E402

tf1 = tf.compat.v1
BATCH = 16
# The cluster's gradients differ from one device's by float32 rounding (the
# sum of four clones' gradients in another order), about 1e-9 here. Adam
# and RMSProp divide by the gradient's own scale plus epsilon: with their
# defaults (Adam 1e-8; RMSProp 1e-10, inside its square root) an element
# whose gradient is that small, which a random initialisation gives now and
# then, turns 1e-9 into updates 1e-4 apart (seen once: 6.7e-05 against the
# 1e-5 tolerance). These epsilons bound that gain (lr / epsilon: 500;
# lr / sqrt(epsilon): 50), so the comparison measures the all-reduce,
# whatever the initialisation.
OPTIMIZERS = {
    'sgd': lambda: tf1.train.GradientDescentOptimizer(0.5),
    'momentum': lambda: tf1.train.MomentumOptimizer(0.1, 0.9),
    'adam': lambda: tf1.train.AdamOptimizer(0.05, epsilon=1e-4),
    'rmsprop': lambda: tf1.train.RMSPropOptimizer(0.05, momentum=0.9,
                                                  epsilon=1e-6),
}


def data(batch=BATCH, seed=0):
  rng = np.random.RandomState(seed)
  return (rng.rand(batch, 6, 6, 3).astype(np.float32),
          rng.randint(0, 4, size=batch).astype(np.int64))


def model(images, labels, batch_norm):
  """conv (+ batch norm) + dense, a softmax loss."""
  normalizer = slim.batch_norm if batch_norm else None
  net = slim.conv2d(images, 4, [3, 3], normalizer_fn=normalizer,
                    normalizer_params={'is_training': True}, scope='conv')
  logits = slim.fully_connected(slim.flatten(net), 4, activation_fn=None,
                                scope='fc')
  tf1.losses.sparse_softmax_cross_entropy(labels, logits)


def deploy_model_fn(features, labels, mode, params, config):
  deployment = model_deploy.DeploymentConfig(exact=True,
      num_clones=2, clone_on_cpu=True,
      variable_update='collective_all_reduce',
      collective_timeout_secs=params['timeout']).for_task(config.cluster)
  deployed = model_deploy.deploy(
      deployment, lambda i, l: model(i, l, params['batch_norm']),
      [features, labels], optimizer=OPTIMIZERS[params['optimizer']]())
  return est.EstimatorSpec(mode, loss=deployed.total_loss,
                           train_op=deployed.train_op)


def one_device_model_fn(features, labels, mode, params):
  model(features, labels, params['batch_norm'])
  loss = tf1.losses.get_total_loss()
  optimizer = OPTIMIZERS[params['optimizer']]()
  with tf.control_dependencies(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)):
    train_op = optimizer.minimize(loss, tf1.train.get_global_step())
  return est.EstimatorSpec(mode, loss=loss, train_op=train_op)


class SaveValues(tf1.train.SessionRunHook):
  """Writes this worker's global variables to `path` at the end."""

  def __init__(self, path):
    self._path = path

  def end(self, session):
    variables = tf1.global_variables()
    values = session.run(variables)
    np.savez(self._path, **{v.op.name: x for v, x in zip(variables, values)})


def main(model_dir, steps, optimizers, batch_norm, api, timeout='60'):
  task = cluster_lib.Cluster.from_tf_config()
  images, labels = data()
  n, i = task.num_workers, task.task_id + (
      1 if task.task_type == 'worker' and 'chief' in task.jobs else 0)
  rows = slice(i * BATCH // n, (i + 1) * BATCH // n)
  mine = (images[rows], labels[rows])
  session = tf1.ConfigProto(device_count={'CPU': 2})
  for optimizer in optimizers.split(','):
    params = {'optimizer': optimizer, 'batch_norm': batch_norm == '1',
              'timeout': float(timeout)}
    config = est.RunConfig(save_checkpoints_steps=int(steps),
                           log_step_count_steps=None, save_summary_steps=None,
                           session_config=session, cluster=task)
    model_fn = deploy_model_fn
    if api == 'replicate':
      model_fn = replicate.replicate_model_fn(
          one_device_model_fn, num_clones=2, clone_on_cpu=True,
          variable_update='collective_all_reduce')
    directory = os.path.join(model_dir, optimizer)
    estimator = est.Estimator(model_fn, directory, config, params=params)
    path = os.path.join(directory, '%s_%d.npz' % (task.task_type,
                                                  task.task_id))
    estimator.train(lambda: tf.data.Dataset.from_tensors(mine).repeat(),
                    max_steps=int(steps), hooks=[SaveValues(path)])
    print('done: %s %s:%d ran %d steps' % (optimizer, task.task_type,
                                           task.task_id, estimator.steps_run))


if __name__ == '__main__':
  main(*sys.argv[1:])
