"""Trains a network of the zoo on a converted dataset (TF-Slim's flags).

    python train_image_classifier.py --dataset_name=digits --dataset_dir=data/digits \
        --model_name=lenet --train_dir=runs/lenet --max_number_of_steps=1000

One code path for one clone and for N (--num_clones, --clone_on_cpu): the
classification model_fn deploys clones with model_deploy and the
Estimator-compatible runner trains it, resuming from train_dir's latest
checkpoint. --checkpoint_path fine-tunes only when train_dir has none.
As in TF-Slim, --batch_size is per clone: a step takes batch_size x
num_clones images, and the learning-rate decay counts them all.

Every --log_every_n_steps steps it prints `step N/max (p%): loss = x (y
images/sec; z images/step), ETA t`; TensorBoard summaries go to train_dir
(`tensorboard --logdir` it, see README "Watching training").
"""
import sys

from absl import app
from absl import flags

import quiet_tensorflow  # noqa: F401  (first: TensorFlow's noise off the terminal)
import tf_compat  # noqa: F401
import tensorflow as tf

import classifier
from datasets import dataset_factory
from datasets import dataset_utils
from deployment import cluster
from deployment import estimator as est
from deployment import model_deploy

tf1 = tf.compat.v1
F = flags.FLAGS

flags.DEFINE_string('master', '', 'Session target of servers started '
                    'elsewhere (with --num_ps_tasks/--worker_replicas).')
flags.DEFINE_string('train_dir', '/tmp/tfmodel/',
                    'Directory for checkpoints and event logs.')
flags.DEFINE_integer('num_clones', 1, 'Model clones to deploy (one per GPU).')
flags.DEFINE_boolean('clone_on_cpu', False, 'Place clones on CPU devices.')
flags.DEFINE_integer('worker_replicas', 1, 'Number of worker replicas.')
flags.DEFINE_integer('num_ps_tasks', 0, 'Parameter servers (0: local).')
flags.DEFINE_integer('num_readers', 4, 'Shards read in parallel.')
flags.DEFINE_integer('num_preprocessing_threads', 4,
                     'Parallel decode/preprocess calls.')
flags.DEFINE_integer('log_every_n_steps', 10, 'Steps between log lines.')
flags.DEFINE_integer('save_summaries_secs', 600, 'Seconds between summaries.')
flags.DEFINE_integer('save_summaries_steps', None,
                     'Steps between summaries (instead of seconds).')
flags.DEFINE_integer('save_interval_secs', 600, 'Seconds between checkpoints.')
flags.DEFINE_integer('task', 0, 'Task id of this replica.')
# The cluster: these, or TF_CONFIG (see README "Training on a cluster").
flags.DEFINE_string('ps_hosts', '', 'Comma-separated host:port of the ps.')
flags.DEFINE_string('worker_hosts', '',
                    'Comma-separated host:port of the workers (0: chief).')
flags.DEFINE_string('job_name', '', 'This task\'s job: ps or worker.')
# Optimization.
flags.DEFINE_float('weight_decay', 0.00004, 'L2 weight decay.')
flags.DEFINE_string('optimizer', 'rmsprop', ', '.join(classifier.OPTIMIZERS))
flags.DEFINE_float('adadelta_rho', 0.95, 'Adadelta decay rate.')
flags.DEFINE_float('adagrad_initial_accumulator_value', 0.1,
                   'Adagrad accumulator start.')
flags.DEFINE_float('adam_beta1', 0.9, 'Adam 1st moment decay.')
flags.DEFINE_float('adam_beta2', 0.999, 'Adam 2nd moment decay.')
flags.DEFINE_float('opt_epsilon', 1.0, 'Epsilon of adadelta/adam/rmsprop.')
flags.DEFINE_float('ftrl_learning_rate_power', -0.5, 'FTRL power.')
flags.DEFINE_float('ftrl_initial_accumulator_value', 0.1, 'FTRL accumulator.')
flags.DEFINE_float('ftrl_l1', 0.0, 'FTRL L1 strength.')
flags.DEFINE_float('ftrl_l2', 0.0, 'FTRL L2 strength.')
flags.DEFINE_float('momentum', 0.9, 'Momentum of the momentum optimizer.')
flags.DEFINE_float('rmsprop_momentum', 0.9, 'RMSProp momentum.')
flags.DEFINE_float('rmsprop_decay', 0.9, 'RMSProp decay.')
# Learning rate.
flags.DEFINE_string('learning_rate_decay_type', 'exponential',
                    ', '.join(classifier.DECAY_TYPES))
flags.DEFINE_float('learning_rate', 0.01, 'Initial learning rate.')
flags.DEFINE_float('end_learning_rate', 0.0001, 'Polynomial decay end value.')
flags.DEFINE_float('label_smoothing', 0.0, 'Label smoothing amount.')
flags.DEFINE_float('learning_rate_decay_factor', 0.94, 'Decay factor.')
flags.DEFINE_float('num_epochs_per_decay', 2.0, 'Epochs between decays.')
flags.DEFINE_bool('sync_replicas', False, 'Synchronize replicas (cluster).')
flags.DEFINE_integer('replicas_to_aggregate', 1,
                     'Gradients to collect before an update (cluster).')
flags.DEFINE_float('moving_average_decay', None,
                   'Decay of the moving averages of the model variables.')
# Dataset.
flags.DEFINE_string('dataset_name', 'imagenet', 'Dataset to train on.')
flags.DEFINE_string('dataset_split_name', 'train', 'Split to train on.')
flags.DEFINE_string('dataset_dir', None, 'Directory of the converted dataset.')
flags.DEFINE_integer('labels_offset', 0,
                     'Subtracted from labels (1 drops ImageNet background).')
flags.DEFINE_string('model_name', 'inception_v3', 'Network to train.')
flags.DEFINE_string('preprocessing_name', None,
                    'Preprocessing; defaults to the network\'s.')
flags.DEFINE_bool('use_grayscale', False,
                  'Whether to convert input images to grayscale.')
flags.DEFINE_integer('batch_size', 32,
                     'Images per clone; a step takes batch_size x num_clones.')
flags.DEFINE_integer('train_image_size', None,
                     'Input size; defaults to the network\'s.')
flags.DEFINE_integer('max_number_of_steps', None, 'Steps to train in all.')
# Fine-tuning.
flags.DEFINE_string('checkpoint_path', None,
                    'Checkpoint (file or directory) to fine-tune from.')
flags.DEFINE_string('checkpoint_exclude_scopes', None,
                    'Comma-separated scopes not restored from checkpoint_path.')
flags.DEFINE_string('trainable_scopes', None,
                    'Comma-separated scopes to train (default: all).')
flags.DEFINE_boolean('ignore_missing_vars', False,
                     'Skip variables missing from checkpoint_path.')
flags.DEFINE_integer('random_seed', None, 'Graph-level random seed.')


def expand_path_flags():
  """`~` and $VARIABLES in path flags (the shell leaves --flag=~/x alone)."""
  for name in ('train_dir', 'dataset_dir', 'checkpoint_path'):
    setattr(F, name, dataset_utils.expand_path(getattr(F, name)))


def optimizer_params():
  fields = classifier.OptimizerParams.__dataclass_fields__
  return classifier.OptimizerParams(**{k: getattr(F, k) for k in fields})


def task_cluster():
  return cluster.Cluster.from_flags(
      F.ps_hosts, F.worker_hosts, F.job_name, F.task, master=F.master,
      num_ps_tasks=F.num_ps_tasks, worker_replicas=F.worker_replicas)


def session_config():
  config = tf1.ConfigProto(allow_soft_placement=True)
  if F.clone_on_cpu and F.num_clones > 1:
    config.device_count['CPU'] = F.num_clones  # one device per clone
  return config


def build_estimator(dataset, task):
  classifier.check_train_dir(F.train_dir)
  deployment = model_deploy.DeploymentConfig(
      num_clones=F.num_clones, clone_on_cpu=F.clone_on_cpu).for_task(task)
  deployment.check_devices_available()
  params = classifier.ClassifierParams(
      model_name=F.model_name,
      num_classes=dataset.num_classes - F.labels_offset,
      num_samples_per_epoch=dataset.num_samples, batch_size=F.batch_size,
      weight_decay=F.weight_decay, label_smoothing=F.label_smoothing,
      moving_average_decay=F.moving_average_decay,
      trainable_scopes=classifier.split_scopes(F.trainable_scopes),
      checkpoint_path=F.checkpoint_path,
      checkpoint_exclude_scopes=classifier.split_scopes(
          F.checkpoint_exclude_scopes),
      ignore_missing_vars=F.ignore_missing_vars,
      optimizer=optimizer_params(), deployment=deployment,
      log_every_n_steps=F.log_every_n_steps,
      max_steps=F.max_number_of_steps)
  params.optimizer.validate()
  if F.checkpoint_path:
    classifier.resolve_checkpoint(F.checkpoint_path)
  if F.save_summaries_steps is not None and F.save_summaries_steps < 1:
    raise ValueError('--save_summaries_steps must be at least 1, got %d' %
                     F.save_summaries_steps)
  config = est.RunConfig(
      model_dir=F.train_dir, tf_random_seed=F.random_seed,
      save_summary_steps=F.save_summaries_steps,
      save_summaries_secs=(None if F.save_summaries_steps
                           else F.save_summaries_secs),
      save_checkpoints_secs=F.save_interval_secs,
      log_step_count_steps=None,  # the model_fn's ProgressHook logs
      session_config=session_config(), cluster=task)
  return est.Estimator(classifier.model_fn, F.train_dir, config=config,
                       params={'classifier': params})


def main(_):
  tf.compat.v1.disable_eager_execution()  # a TF 1 program: graph mode
  try:
    task = task_cluster()
    if task.task_type == 'ps':
      task.serve_forever(session_config())  # until the process is stopped
      return 0
    if task.task_type == 'evaluator':
      raise ValueError('an evaluator task does not train: run '
                       'eval_image_classifier.py --wait_for_checkpoints')
    classifier.image_network_info(F.model_name)
    if F.dataset_dir is None:
      raise ValueError('--dataset_dir is required')
    expand_path_flags()
    dataset = dataset_factory.get_dataset(F.dataset_name, F.dataset_split_name,
                                          F.dataset_dir)
    estimator = build_estimator(dataset, task)
    input_fn = classifier.make_input_fn(
        dataset, F.model_name, F.batch_size * F.num_clones, is_training=True,
        preprocessing_name=F.preprocessing_name,
        image_size=F.train_image_size, num_readers=F.num_readers,
        num_preprocessing_threads=F.num_preprocessing_threads,
        labels_offset=F.labels_offset, use_grayscale=F.use_grayscale)
    resumed = estimator.latest_checkpoint()
    if resumed and estimator.config.is_chief:  # the chief restores
      print('Resuming from %s (step %d)' % (resumed,
                                            est.global_step_of(resumed)))
    sys.stdout.flush()
    estimator.train(input_fn, max_steps=F.max_number_of_steps)
  except (ValueError, tf.errors.OpError) as e:
    print('train_image_classifier: error: %s' % classifier.one_line(e),
          file=sys.stderr)
    return 1
  print('Trained to step %d; checkpoint %s' % (
      est.global_step_of(estimator.latest_checkpoint()),
      estimator.latest_checkpoint()))
  return 0


if __name__ == '__main__':
  app.run(lambda argv: sys.exit(main(argv)))
