"""TF-Slim's own way of training and evaluating, on this project's packages.

Written as TF-Slim's train_image_classifier.py and eval_image_classifier.py
are (their calls, our code): `get_dataset` -> `DatasetDataProvider` ->
`tf.train.batch` -> `prefetch_queue`, `create_clones(config,
clone_fn, [batch_queue])` whose clones each dequeue a batch of their own,
`optimize_clones`, the first clone's update ops, `slim.learning.train`; then
`slim.evaluation.evaluate_once` on the validation split. One and two clones
train on one scale and evaluate like the project's own script's checkpoint.
"""
import math
import os
import re

import pytest
import tensorflow as tf
import tf_slim as slim

from datasets import dataset_factory
from deployment import model_deploy
from nets import nets_factory
from preprocessing import preprocessing_factory
import chaos
import scripts

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS, BATCH, LEARNING_RATE = 400, 50, 0.01
EVAL_BATCH = 40  # 9 batches: the 360 validation images once
# TF-Slim's --train_image_size and --eval_image_size: the cluster tests'
# size for the 8x8 digits, not LeNet's default 28 (tests/chaos.py).
IMAGE_SIZE = chaos.IMAGE_SIZE


def train_tf_slim_style(dataset_dir, train_dir, num_clones):
  """TF-Slim's training script's calls; returns the total loss of every step."""
  losses = []
  with tf.Graph().as_default():
    tf1.set_random_seed(0)
    config = model_deploy.DeploymentConfig(num_clones=num_clones,
                                           clone_on_cpu=True)
    with tf1.device(config.variables_device()):
      global_step = slim.create_global_step()
    dataset = dataset_factory.get_dataset('digits', 'train', dataset_dir)
    network_fn = nets_factory.get_network_fn(
        'lenet', num_classes=dataset.num_classes, weight_decay=0.0,
        is_training=True)
    preprocess = preprocessing_factory.get_preprocessing('lenet',
                                                         is_training=True)
    size = IMAGE_SIZE
    with tf1.device(config.inputs_device()):
      provider = slim.dataset_data_provider.DatasetDataProvider(
          dataset, num_readers=2, common_queue_capacity=20 * BATCH,
          common_queue_min=10 * BATCH)
      image, label = provider.get(['image', 'label'])
      image = preprocess(image, size, size)
      images, labels = tf1.train.batch([image, label], batch_size=BATCH,
                                       num_threads=2, capacity=5 * BATCH)
      labels = slim.one_hot_encoding(labels, dataset.num_classes)
      batch_queue = slim.prefetch_queue.prefetch_queue(
          [images, labels], capacity=2 * config.num_clones)

    def clone_fn(batch_queue):
      images, labels = batch_queue.dequeue()
      logits, end_points = network_fn(images)
      tf1.losses.softmax_cross_entropy(labels, logits)
      return end_points

    clones = model_deploy.create_clones(config, clone_fn, [batch_queue])
    update_ops = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS,
                                    config.clone_scope(0))
    optimizer = tf1.train.GradientDescentOptimizer(LEARNING_RATE)
    total_loss, gradients = model_deploy.optimize_clones(
        clones, optimizer, var_list=tf1.trainable_variables())
    update_ops.append(optimizer.apply_gradients(gradients,
                                                global_step=global_step))
    with tf.control_dependencies([tf.group(*update_ops)]):
      train_tensor = tf.identity(total_loss, name='train_op')

    def train_step(sess, train_op, step, train_step_kwargs):
      loss, should_stop = slim.learning.train_step(sess, train_op, step,
                                                   train_step_kwargs)
      losses.append(loss)
      return loss, should_stop

    slim.learning.train(train_tensor, logdir=train_dir, number_of_steps=STEPS,
                        train_step_fn=train_step, save_summaries_secs=600,
                        save_interval_secs=600, log_every_n_steps=10 ** 6)
  return losses


def evaluate_tf_slim_style(dataset_dir, checkpoint_dir, eval_dir):
  """TF-Slim's evaluation script's calls; returns the validation accuracy."""
  with tf.Graph().as_default():
    slim.get_or_create_global_step()
    dataset = dataset_factory.get_dataset('digits', 'validation', dataset_dir)
    network_fn = nets_factory.get_network_fn(
        'lenet', num_classes=dataset.num_classes, is_training=False)
    preprocess = preprocessing_factory.get_preprocessing('lenet')
    size = IMAGE_SIZE
    provider = slim.dataset_data_provider.DatasetDataProvider(
        dataset, shuffle=False, common_queue_capacity=2 * EVAL_BATCH,
        common_queue_min=EVAL_BATCH)
    image, label = provider.get(['image', 'label'])
    images, labels = tf1.train.batch([preprocess(image, size, size), label],
                                     batch_size=EVAL_BATCH, num_threads=1,
                                     capacity=5 * EVAL_BATCH)
    logits, _ = network_fn(images)
    accuracy, update = tf1.metrics.accuracy(labels, tf.argmax(logits, 1))
    return slim.evaluation.evaluate_once(
        master='', checkpoint_path=tf1.train.latest_checkpoint(checkpoint_dir),
        logdir=eval_dir,
        num_evals=math.ceil(dataset.num_samples / EVAL_BATCH),
        eval_op=update, final_op=accuracy)


def project_script_accuracy(dataset_dir, train_dir):
  """The project's own train and eval scripts on the same flags."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  common = ['--model_name=lenet', '--dataset_name=digits',
            '--dataset_dir=%s' % dataset_dir]
  trained = scripts.run(
      'train_image_classifier.py', *common,
      '--train_dir=%s' % train_dir, '--batch_size=%d' % BATCH,
      '--train_image_size=%d' % IMAGE_SIZE,
      '--max_number_of_steps=%d' % STEPS, '--optimizer=sgd',
      '--learning_rate=%g' % LEARNING_RATE,
      '--learning_rate_decay_type=fixed', '--weight_decay=0', env=env,
      timeout=600)
  assert trained.returncode == 0, trained.stderr[-3000:]
  evaluated = scripts.run(
      'eval_image_classifier.py', *common, '--dataset_split_name=validation',
      '--eval_image_size=%d' % IMAGE_SIZE,
      '--checkpoint_path=%s' % train_dir, env=env, timeout=600)
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  return float(re.search(r'^Accuracy = ([\d.]+)$', evaluated.stdout,
                         re.M).group(1))


@pytest.mark.slow
def test_tf_slim_style_training_with_one_and_two_clones(digits, tmp_path):
  reference = project_script_accuracy(str(digits), str(tmp_path / 'project'))
  results = {}
  for clones in (1, 2):
    train_dir = str(tmp_path / ('clones_%d' % clones))
    losses = train_tf_slim_style(str(digits), train_dir, clones)
    accuracy = evaluate_tf_slim_style(str(digits), train_dir,
                                      str(tmp_path / ('eval_%d' % clones)))
    results[clones] = (losses, accuracy)
    print('%d clone(s): loss %.3f at step 1, %.3f over the last 50 steps; '
          'validation accuracy %.4f (the project script: %.4f)' % (
              clones, losses[0], sum(losses[-50:]) / 50, accuracy, reference))
  (one, one_accuracy), (two, two_accuracy) = results[1], results[2]
  assert len(one) == len(two) == STEPS
  # Two clones average their losses (TF-Slim divides by num_clones): the
  # first step's loss is one clone's scale, not twice it, and training ends
  # on the same scale (it sees twice the images, so no higher).
  assert abs(two[0] - one[0]) < 0.5 * one[0]
  assert sum(two[-50:]) / 50 < 1.5 * sum(one[-50:]) / 50
  assert all(math.isfinite(loss) for loss in one + two)
  for accuracy in (one_accuracy, two_accuracy):
    assert abs(accuracy - reference) <= 0.02, (accuracy, reference)
