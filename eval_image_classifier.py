"""Evaluates a trained network (TF-Slim's flags); prints `name = value` lines.

    python eval_image_classifier.py --dataset_name=digits --dataset_dir=data/digits \
        --dataset_split_name=validation --model_name=lenet --checkpoint_path=runs/lenet

--checkpoint_path is a checkpoint file or a directory (its latest checkpoint);
--wait_for_checkpoints evaluates every new checkpoint of the directory until
--eval_timeout_secs pass without one. Trained with --moving_average_decay,
the network is evaluated with the moving averages. --num_clones (with
--clone_on_cpu for CPU devices) evaluates on several devices with the same
metrics; --batch_size is per clone, as in training.

--saved_model=<export dir> or --tflite_model=<file or export dir> evaluate an
export of export_model.py instead, with the same metrics and printing: its
network, input size and preprocessing are the ones it was exported with.

    python eval_image_classifier.py --dataset_name=digits --dataset_dir=data/digits \
        --dataset_split_name=validation --tflite_model=exports/lenet_digits/int8
"""
import math
import os
import sys

from absl import app
from absl import flags

import tf_compat  # noqa: F401
import tensorflow as tf

import classifier
from datasets import dataset_factory
from datasets import dataset_utils
from deployment import estimator as est
from deployment import exporter
from deployment import inference
from deployment import model_deploy
from nets import nets_factory

tf1 = tf.compat.v1
F = flags.FLAGS

flags.DEFINE_integer('batch_size', 100,
                     'Images per clone; a batch is batch_size x num_clones.')
flags.DEFINE_integer('num_clones', 1, 'Devices to evaluate on (one per GPU).')
flags.DEFINE_boolean('clone_on_cpu', False, 'Place clones on CPU devices.')
flags.DEFINE_integer('max_num_batches', None,
                     'Batches to evaluate (default: the whole split once).')
flags.DEFINE_string('master', '', 'The address of the TensorFlow master.')
flags.DEFINE_string('checkpoint_path', '/tmp/tfmodel/',
                    'Checkpoint file or directory of checkpoints.')
flags.DEFINE_string('eval_dir', None,
                    'Where summaries go (default: <checkpoint dir>/eval).')
flags.DEFINE_integer('num_preprocessing_threads', 4,
                     'Parallel decode/preprocess calls.')
flags.DEFINE_integer('num_readers', 4, 'Shards read in parallel.')
flags.DEFINE_string('dataset_name', 'imagenet', 'Dataset to evaluate on.')
flags.DEFINE_string('dataset_split_name', 'test', 'Split to evaluate.')
flags.DEFINE_string('dataset_dir', None, 'Directory of the converted dataset.')
flags.DEFINE_integer('labels_offset', 0,
                     'Subtracted from labels (1 drops ImageNet background).')
flags.DEFINE_string('model_name', 'inception_v3', 'Network to evaluate.')
flags.DEFINE_string('preprocessing_name', None,
                    'Preprocessing; defaults to the network\'s.')
flags.DEFINE_bool('use_grayscale', False,
                  'Whether to convert input images to grayscale.')
flags.DEFINE_float('moving_average_decay', None,
                   'Evaluate the moving averages kept with this decay.')
flags.DEFINE_integer('eval_image_size', None,
                     'Input size; defaults to the network\'s.')
flags.DEFINE_boolean('wait_for_checkpoints', False,
                     'Evaluate each new checkpoint of --checkpoint_path.')
flags.DEFINE_integer('eval_interval_secs', 60,
                     'Seconds between polls for a new checkpoint.')
flags.DEFINE_integer('eval_timeout_secs', None,
                     'Stop waiting after this long without a new checkpoint.')
flags.DEFINE_string('saved_model', None,
                    'Evaluate this SavedModel export instead of a checkpoint.')
flags.DEFINE_string('tflite_model', None,
                    'Evaluate this TFLite model (file or export directory).')


def expand_path_flags():
  """`~` and $VARIABLES in path flags (the shell leaves --flag=~/x alone)."""
  for name in ('checkpoint_path', 'eval_dir', 'dataset_dir', 'saved_model',
               'tflite_model'):
    setattr(F, name, dataset_utils.expand_path(getattr(F, name)))


def checkpoints():
  """The checkpoint(s) to evaluate, in order."""
  if not F.wait_for_checkpoints:
    yield classifier.resolve_checkpoint(F.checkpoint_path)
    return
  if not tf.io.gfile.isdir(F.checkpoint_path):
    raise ValueError("--wait_for_checkpoints needs a directory, got "
                     "--checkpoint_path '%s'" % F.checkpoint_path)
  for path in tf.train.checkpoints_iterator(
      F.checkpoint_path, min_interval_secs=F.eval_interval_secs,
      timeout=F.eval_timeout_secs):
    yield path


def evaluate_export(dataset):
  """--saved_model or --tflite_model on the dataset, printed as a checkpoint's
  evaluation is."""
  if F.saved_model and F.tflite_model:
    raise ValueError('pass one of --saved_model and --tflite_model')
  for flag in ('checkpoint_path', 'wait_for_checkpoints', 'num_clones',
               'moving_average_decay'):
    if F[flag].present:
      raise ValueError('--%s applies to checkpoints, not to --%s' % (
          flag, 'saved_model' if F.saved_model else 'tflite_model'))
  model = inference.open_model(
      saved_model=F.saved_model, tflite_model=F.tflite_model,
      spec_from_flags=lambda: exporter.make_spec(
          F.model_name, F.dataset_name, F.dataset_dir,
          labels_offset=F.labels_offset, image_size=F.eval_image_size,
          preprocessing_name=F.preprocessing_name,
          use_grayscale=F.use_grayscale))
  try:
    explicit = {field: (flag, F[flag].value) for field, flag in (
        ('model_name', 'model_name'), ('image_size', 'eval_image_size'),
        ('preprocessing_name', 'preprocessing_name'),
        ('use_grayscale', 'use_grayscale')) if F[flag].present}
    inference.check_flags_agree(model.spec, model.path, **explicit)
    results = inference.evaluate(
        model, dataset, F.batch_size, labels_offset=F.labels_offset,
        max_num_batches=F.max_num_batches, num_readers=F.num_readers,
        num_preprocessing_threads=F.num_preprocessing_threads)
  finally:
    model.close()
  step = '' if model.global_step is None else ' (step %d)' % model.global_step
  print('Evaluated %s%s on %s/%s' % (model.path, step, F.dataset_name,
                                     F.dataset_split_name))
  for name in ('Accuracy', 'Recall_5'):
    print('%s = %.4f' % (name, results[name]))
  sys.stdout.flush()


def main(_):
  try:
    if F.saved_model or F.tflite_model:
      if F.dataset_dir is None:
        raise ValueError('--dataset_dir is required')
      if F.batch_size < 1:
        raise ValueError('--batch_size must be at least 1, got %d' %
                         F.batch_size)
      expand_path_flags()
      evaluate_export(dataset_factory.get_dataset(
          F.dataset_name, F.dataset_split_name, F.dataset_dir))
      return 0
    nets_factory.get_info(F.model_name)
    if F.dataset_dir is None:
      raise ValueError('--dataset_dir is required')
    if F.batch_size < 1:
      raise ValueError('--batch_size must be at least 1, got %d' % F.batch_size)
    expand_path_flags()
    dataset = dataset_factory.get_dataset(F.dataset_name, F.dataset_split_name,
                                          F.dataset_dir)
    deployment = model_deploy.DeploymentConfig(num_clones=F.num_clones,
                                               clone_on_cpu=F.clone_on_cpu)
    deployment.check_devices_available()
    params = classifier.ClassifierParams(
        model_name=F.model_name,
        num_classes=dataset.num_classes - F.labels_offset,
        batch_size=F.batch_size, moving_average_decay=F.moving_average_decay,
        deployment=deployment)
    batch = F.batch_size * F.num_clones
    session_config = tf1.ConfigProto(allow_soft_placement=True)
    if F.clone_on_cpu and F.num_clones > 1:
      session_config.device_count['CPU'] = F.num_clones  # one per clone
    input_fn = classifier.make_input_fn(
        dataset, F.model_name, batch, is_training=False,
        preprocessing_name=F.preprocessing_name, image_size=F.eval_image_size,
        num_readers=F.num_readers,
        num_preprocessing_threads=F.num_preprocessing_threads,
        labels_offset=F.labels_offset, use_grayscale=F.use_grayscale,
        num_epochs=1, deterministic=True)
    steps = F.max_num_batches or math.ceil(dataset.num_samples / batch)
    for checkpoint in checkpoints():
      # Summaries go to <eval model dir>/eval.
      eval_dir = F.eval_dir or os.path.dirname(checkpoint)
      estimator = est.Estimator(
          classifier.model_fn, eval_dir,
          config=est.RunConfig(log_step_count_steps=None,
                               session_config=session_config),
          params={'classifier': params})
      results = estimator.evaluate(input_fn, steps=steps,
                                   checkpoint_path=checkpoint)
      print('Evaluated %s (step %d) on %s/%s' % (
          checkpoint, results['global_step'], F.dataset_name,
          F.dataset_split_name))
      for name in sorted(results):
        if name not in ('global_step', 'loss'):
          print('%s = %.4f' % (name, results[name]))
      sys.stdout.flush()
  except (ValueError, tf.errors.OpError) as e:
    print('eval_image_classifier: error: %s' % classifier.one_line(e),
          file=sys.stderr)
    return 1
  return 0


if __name__ == '__main__':
  app.run(lambda argv: sys.exit(main(argv)))
