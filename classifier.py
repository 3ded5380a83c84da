"""Image classification on the runner: the model_fn and input_fn that the
train, eval and export paths and the tests share.

Training builds one clone per device with `model_deploy` (one code path for
one clone and for N), TF-Slim's optimizers and learning-rate schedules,
optional moving averages, and fine-tuning from a TF-Slim checkpoint.
"""
import dataclasses
import os
import re
from typing import Optional, Sequence

import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
import eval_report
import progress
from datasets import dataset_factory, reader
from deployment import cluster
from deployment import estimator as est
from deployment import model_deploy
from nets import nets_factory, registry
from preprocessing import preprocessing_factory

tf1 = tf.compat.v1

OPTIMIZERS = ('adadelta', 'adagrad', 'adam', 'ftrl', 'momentum', 'rmsprop',
              'sgd')
DECAY_TYPES = ('exponential', 'fixed', 'polynomial')


@dataclasses.dataclass
class OptimizerParams:
  """TF-Slim's optimizer and learning-rate flags, with their defaults."""
  optimizer: str = 'rmsprop'
  learning_rate: float = 0.01
  end_learning_rate: float = 0.0001
  learning_rate_decay_type: str = 'exponential'
  learning_rate_decay_factor: float = 0.94
  num_epochs_per_decay: float = 2.0
  adadelta_rho: float = 0.95
  adagrad_initial_accumulator_value: float = 0.1
  adam_beta1: float = 0.9
  adam_beta2: float = 0.999
  opt_epsilon: float = 1.0
  ftrl_learning_rate_power: float = -0.5
  ftrl_initial_accumulator_value: float = 0.1
  ftrl_l1: float = 0.0
  ftrl_l2: float = 0.0
  momentum: float = 0.9
  rmsprop_momentum: float = 0.9
  rmsprop_decay: float = 0.9
  sync_replicas: bool = False
  replicas_to_aggregate: int = 1

  def validate(self):
    if self.replicas_to_aggregate < 1:
      raise ValueError('--replicas_to_aggregate must be at least 1, got %d' %
                       self.replicas_to_aggregate)
    if self.optimizer not in OPTIMIZERS:
      raise ValueError(registry.unknown_name_message(
          'optimizer', self.optimizer, OPTIMIZERS))
    if self.learning_rate_decay_type not in DECAY_TYPES:
      raise ValueError(registry.unknown_name_message(
          'learning_rate_decay_type', self.learning_rate_decay_type,
          DECAY_TYPES))


@dataclasses.dataclass
class ClassifierParams:
  """Everything the classification model_fn needs (the scripts' flags)."""
  model_name: str
  num_classes: int  # the network's outputs: dataset classes - labels_offset
  num_samples_per_epoch: int = 0
  batch_size: int = 32  # per clone, as in TF-Slim (see images_per_step)
  weight_decay: float = 0.00004
  label_smoothing: float = 0.0
  moving_average_decay: Optional[float] = None
  trainable_scopes: Optional[Sequence[str]] = None
  checkpoint_path: Optional[str] = None
  checkpoint_exclude_scopes: Optional[Sequence[str]] = None
  ignore_missing_vars: bool = False
  optimizer: OptimizerParams = dataclasses.field(default_factory=OptimizerParams)
  deployment: model_deploy.DeploymentConfig = dataclasses.field(
      default_factory=model_deploy.DeploymentConfig)
  summarize_activations: bool = True
  log_every_n_steps: int = 10
  max_steps: Optional[int] = None  # the last step, for the progress lines' ETA


def images_per_step(p):
  """Images one global step learns from: batch_size per clone, times the
  clones, times the replicas whose gradients a synchronous step aggregates."""
  replicas = p.optimizer.replicas_to_aggregate if p.optimizer.sync_replicas else 1
  return p.batch_size * p.deployment.num_clones * replicas


def split_scopes(text):
  """'a, b' -> ['a', 'b']; None or '' -> []."""
  return [s.strip() for s in (text or '').split(',') if s.strip()]


# -- optimization ------------------------------------------------------------
def configure_learning_rate(p, num_samples_per_epoch, images_per_step,
                            global_step):
  """TF-Slim's schedules. Decay steps count global steps of
  `images_per_step` images (all clones and aggregated replicas: TF-Slim
  divided by the batch of one clone only, so N clones decayed N times late)."""
  decay_steps = int(num_samples_per_epoch * p.num_epochs_per_decay /
                    images_per_step)
  decay_steps = max(decay_steps, 1)
  if p.learning_rate_decay_type == 'exponential':
    return tf1.train.exponential_decay(
        p.learning_rate, global_step, decay_steps,
        p.learning_rate_decay_factor, staircase=True,
        name='exponential_decay_learning_rate')
  if p.learning_rate_decay_type == 'fixed':
    return tf.constant(p.learning_rate, name='fixed_learning_rate')
  return tf1.train.polynomial_decay(
      p.learning_rate, global_step, decay_steps, p.end_learning_rate,
      power=1.0, cycle=False, name='polynomial_decay_learning_rate')


def configure_optimizer(p, learning_rate):
  train = tf1.train
  makers = {
      'adadelta': lambda: train.AdadeltaOptimizer(
          learning_rate, rho=p.adadelta_rho, epsilon=p.opt_epsilon),
      'adagrad': lambda: train.AdagradOptimizer(
          learning_rate,
          initial_accumulator_value=p.adagrad_initial_accumulator_value),
      'adam': lambda: train.AdamOptimizer(
          learning_rate, beta1=p.adam_beta1, beta2=p.adam_beta2,
          epsilon=p.opt_epsilon),
      'ftrl': lambda: train.FtrlOptimizer(
          learning_rate, learning_rate_power=p.ftrl_learning_rate_power,
          initial_accumulator_value=p.ftrl_initial_accumulator_value,
          l1_regularization_strength=p.ftrl_l1,
          l2_regularization_strength=p.ftrl_l2),
      'momentum': lambda: train.MomentumOptimizer(
          learning_rate, momentum=p.momentum, name='Momentum'),
      'rmsprop': lambda: train.RMSPropOptimizer(
          learning_rate, decay=p.rmsprop_decay, momentum=p.rmsprop_momentum,
          epsilon=p.opt_epsilon),
      'sgd': lambda: train.GradientDescentOptimizer(learning_rate),
  }
  p.validate()
  return makers[p.optimizer]()


def variables_to_train(trainable_scopes):
  if not trainable_scopes:
    return tf1.trainable_variables()
  chosen = []
  for scope in trainable_scopes:
    found = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, scope)
    if not found:
      raise ValueError("--trainable_scopes: scope '%s' matches no trainable "
                       'variable' % scope)
    chosen.extend(found)
  return chosen


# -- fine-tuning -------------------------------------------------------------
def resolve_checkpoint(path, what='--checkpoint_path'):
  """A checkpoint file prefix from a file prefix or a directory."""
  if tf.io.gfile.isdir(path):
    found = tf.train.latest_checkpoint(path)
    if not found:
      raise ValueError("%s '%s' is a directory without a checkpoint" % (
          what, path))
    return found
  if not (tf.io.gfile.glob(path + '.index') or tf.io.gfile.glob(path)):
    raise ValueError("%s '%s' is not a checkpoint" % (what, path))
  return path


def checkpoint_mismatches(checkpoint_shapes, wanted):
  """(missing names, 'name [shape] (checkpoint: [shape])' lines) of the
  variables `wanted` ({checkpoint name: shape}) against a checkpoint's
  {name: shape}, in the order of `wanted`."""
  missing = [name for name in wanted if name not in checkpoint_shapes]
  wrong = ['%s %s (checkpoint: %s)' % (name, list(shape),
                                       list(checkpoint_shapes[name]))
           for name, shape in wanted.items()
           if name in checkpoint_shapes
           and list(shape) != list(checkpoint_shapes[name])]
  return missing, wrong


def fine_tune_init_fn(checkpoint_path, exclude_scopes, ignore_missing_vars):
  """Scaffold init_fn restoring model variables not excluded, after checking
  names and shapes against the checkpoint (the mismatches are listed).

  MonitoredTrainingSession calls it only when the model_dir has no
  checkpoint of its own, so a restarted run resumes instead.
  """
  checkpoint = resolve_checkpoint(checkpoint_path)
  exclusions = [s.rstrip('/') for s in exclude_scopes or ()]
  chosen = [v for v in slim.get_model_variables()
            if not any(v.op.name == e or v.op.name.startswith(e + '/')
                       for e in exclusions)]
  shapes = dict(tf.train.list_variables(checkpoint))
  missing, wrong = checkpoint_mismatches(
      shapes, {v.op.name: v.shape.as_list() for v in chosen})
  if wrong:
    raise ValueError("checkpoint '%s' does not match the network: %d variable(s)"
                     ' with other shapes, first: %s; exclude them with '
                     '--checkpoint_exclude_scopes' % (checkpoint, len(wrong),
                                                       '; '.join(wrong[:3])))
  if missing and not ignore_missing_vars:
    raise ValueError("checkpoint '%s' does not match the network: %d variable(s)"
                     ' missing, first: %s; pass --ignore_missing_vars or '
                     '--checkpoint_exclude_scopes' % (
                         checkpoint, len(missing), ', '.join(missing[:3])))
  chosen = [v for v in chosen if v.op.name in shapes]
  if not chosen:
    raise ValueError("checkpoint '%s' shares no variable with the network" %
                     checkpoint)
  tf1.logging.info('Fine-tuning from %s: restoring %d variables', checkpoint,
                   len(chosen))
  saver = tf1.train.Saver(chosen)
  return lambda scaffold, session: saver.restore(session, checkpoint)


# -- the model_fn ------------------------------------------------------------
def _add_losses(logits, end_points, labels, num_classes, label_smoothing):
  onehot = tf.one_hot(labels, num_classes)
  if 'AuxLogits' in end_points:
    tf1.losses.softmax_cross_entropy(
        onehot, slim.flatten(end_points['AuxLogits']),
        label_smoothing=label_smoothing, weights=0.4, scope='aux_loss')
  tf1.losses.softmax_cross_entropy(onehot, logits,
                                   label_smoothing=label_smoothing, weights=1.0)


# TensorBoard groups tags by their first component and orders the groups by
# name, opening the first two: the essentials (Accuracy, images_per_sec,
# learning_rate, losses) sort first, the network's internals under 'network'.
NETWORK_SUMMARIES = 'network'


def _network_summaries(end_points, variables):
  """TF-Slim's activation histograms and sparsity of every end point, and
  the variables' histograms, under `network/`."""
  for name, tensor in end_points.items():
    model_deploy.histogram_summary(
        '%s/activations/%s' % (NETWORK_SUMMARIES, name), tensor)
    model_deploy.scalar_summary('%s/sparsity/%s' % (NETWORK_SUMMARIES, name),
                                tf.nn.zero_fraction(tensor))
  for variable in variables:
    model_deploy.histogram_summary(
        '%s/variables/%s' % (NETWORK_SUMMARIES, variable.op.name), variable)


def _correct(logits, labels):
  return tf.reduce_sum(tf.cast(
      tf.equal(tf.argmax(logits, 1), tf.cast(labels, tf.int64)), tf.float32))


class _ModelVariables(object):
  """slim.get_model_variables(), read when iterated: SyncReplicasOptimizer
  takes its variables to average before the clones that create them."""

  def __iter__(self):
    return iter(slim.get_model_variables())


def image_network_info(model_name):
  """The NetworkInfo of `model_name`, refusing video networks: what these
  scripts and this model_fn feed is images [batch, height, width, channels]."""
  info = nets_factory.get_info(model_name)
  if info.num_frames:
    raise ValueError(
        "model_name '%s' is a video network: it takes clips [batch, %d frames, "
        "%d, %d, 3], and image classification feeds images [batch, height, "
        "width, channels]; build it with nets_factory.get_network_fn('%s', ...)"
        % (model_name, info.num_frames, info.default_image_size,
           info.default_image_size, model_name))
  return info


def model_fn(features, labels, mode, params, config=None):
  """Classification model_fn; params['classifier'] is a ClassifierParams;
  config (the RunConfig) says whether this task is the chief."""
  p = params['classifier']
  image_network_info(p.model_name)
  is_training = mode == est.ModeKeys.TRAIN
  network_fn = nets_factory.get_network_fn(
      p.model_name, p.num_classes, weight_decay=p.weight_decay,
      is_training=is_training)
  global_step = tf1.train.get_or_create_global_step()

  if is_training:
    def clone_fn(images, clone_labels):
      logits, end_points = network_fn(images)
      _add_losses(logits, end_points, clone_labels, p.num_classes,
                  p.label_smoothing)
      return end_points, _correct(logits, clone_labels)

    p.optimizer.validate()
    with tf1.device(p.deployment.device_function()):
      learning_rate = configure_learning_rate(
          p.optimizer, p.num_samples_per_epoch, images_per_step(p),
          global_step)
      optimizer = configure_optimizer(p.optimizer, learning_rate)
    ema = None
    if p.moving_average_decay:
      ema = tf1.train.ExponentialMovingAverage(p.moving_average_decay,
                                               global_step)
    hooks = []
    if p.optimizer.sync_replicas:
      # TF-Slim's synchronous replicas: the chief applies the sum of
      # replicas_to_aggregate gradients once (one global step) and then the
      # moving averages.
      optimizer = tf1.train.SyncReplicasOptimizer(
          optimizer, replicas_to_aggregate=p.optimizer.replicas_to_aggregate,
          total_num_replicas=p.deployment.num_replicas,
          variable_averages=ema,
          variables_to_average=_ModelVariables() if ema else None)
      hooks.extend(cluster.sync_replicas_hooks(
          optimizer, config.is_chief if config is not None else True,
          p.deployment.num_replicas))
    model = model_deploy.deploy(
        p.deployment, clone_fn, [features, labels], optimizer=optimizer,
        var_list=lambda: variables_to_train(p.trainable_scopes))
    model_deploy.scalar_summary('learning_rate', learning_rate)
    # The training batch's accuracy (with dropout and augmentation), every
    # clone's images: TensorBoard draws it beside the evaluation's Accuracy.
    images_per_batch = tf.shape(features)[0]
    model_deploy.scalar_summary('Accuracy', tf.add_n(
        [c.outputs[1] for c in model.clones]) / tf.cast(images_per_batch,
                                                         tf.float32))
    _network_summaries(
        model.clones[0].outputs[0] if p.summarize_activations else {},
        slim.get_model_variables())
    train_op = model.train_op
    if ema is not None and not p.optimizer.sync_replicas:
      with tf1.device(p.deployment.device_function()):
        with tf.control_dependencies([train_op]):
          train_op = ema.apply(slim.get_model_variables())
    init_fn = None
    if p.checkpoint_path:
      init_fn = fine_tune_init_fn(p.checkpoint_path,
                                  p.checkpoint_exclude_scopes,
                                  p.ignore_missing_vars)
    hooks.append(progress.TrainingProgressHook(
        model.total_loss, images_per_batch, p.log_every_n_steps,
        max_steps=p.max_steps,
        # images_per_sec goes beside the chief's other summaries.
        summary_dir=(config.model_dir if config is not None and config.is_chief
                     else None)))
    return est.EstimatorSpec(mode, loss=model.total_loss, train_op=train_op,
                             scaffold=tf1.train.Scaffold(init_fn=init_fn),
                             training_hooks=hooks)

  # The last batch may be smaller than the clone count: padded, then cut.
  images, size = model_deploy.pad_batch(features, p.deployment.num_clones)
  clones = model_deploy.create_clones(
      p.deployment, lambda images: network_fn(images)[0], [images])
  logits = tf.concat([c.outputs for c in clones], axis=0)[:size]
  predictions = {'classes': tf.argmax(logits, 1),
                 'probabilities': tf.nn.softmax(logits, name='Predictions')}
  scaffold = None
  if p.moving_average_decay:
    ema = tf1.train.ExponentialMovingAverage(p.moving_average_decay,
                                             global_step)
    to_restore = ema.variables_to_restore(slim.get_model_variables())
    to_restore[global_step.op.name] = global_step
    scaffold = tf1.train.Scaffold(saver=tf1.train.Saver(to_restore))
  if mode == est.ModeKeys.PREDICT:
    return est.EstimatorSpec(
        mode, predictions=predictions, scaffold=scaffold,
        export_outputs={'serving_default': est.export.PredictOutput(
            predictions)})
  labels = tf.cast(labels, tf.int64)
  loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
  metrics = {
      'Accuracy': tf1.metrics.accuracy(labels, predictions['classes']),
      'Recall_5': tf1.metrics.recall_at_k(labels, logits,
                                          min(5, p.num_classes)),
      # An array: printed and plotted by eval_report, not a `name = value`.
      'confusion_matrix': eval_report.confusion_matrix_metric(
          labels, predictions['classes'], p.num_classes),
  }
  return est.EstimatorSpec(mode, predictions=predictions, loss=loss,
                           eval_metric_ops=metrics, scaffold=scaffold)


# -- the input_fn ------------------------------------------------------------
def make_input_fn(descriptor, model_name, batch_size, is_training,
                  preprocessing_name=None, image_size=None, num_readers=4,
                  num_preprocessing_threads=4, labels_offset=0,
                  num_epochs=None, deterministic=False, seed=None,
                  use_grayscale=False):
  """input_fn reading `descriptor`'s records, preprocessed for `model_name`."""
  info = image_network_info(model_name)
  preprocess = preprocessing_factory.get_preprocessing(
      preprocessing_name or model_name, is_training=is_training,
      use_grayscale=use_grayscale)
  size = image_size or info.default_image_size

  def input_fn():
    return reader.make_dataset(
        descriptor, batch_size,
        # kwargs: the record's bounding boxes (bbox=) where the data has them.
        preprocess_fn=lambda image, **kwargs: preprocess(image, size, size,
                                                         **kwargs),
        is_training=is_training, num_readers=num_readers,
        num_preprocessing_threads=num_preprocessing_threads,
        num_epochs=num_epochs, seed=seed, deterministic=deterministic,
        labels_offset=labels_offset)

  return input_fn


def one_line(error):
  """One line for an error. A TensorFlow run-time error's message is a graph
  trace whose last unindented line is the cause."""
  text = getattr(error, 'message', None) or str(error) or repr(error)
  lines = [l.strip() for l in text.splitlines()
           if l.strip() and not l[0].isspace() and not l.startswith('Node:')]
  if isinstance(error, tf.errors.OpError):
    # Several devices failing at once: "N root error(s) found. (0) KIND: why"
    roots = re.findall(r'^\s*\(\d+\) [A-Z_]+: (.+)$', text, re.M)
    if roots:
      return roots[0]
    if lines:
      return lines[-1]
  return lines[0] if lines else repr(error)


def check_train_dir(path):
  if os.path.exists(path) and not os.path.isdir(path):
    raise ValueError("--train_dir '%s' is a file, not a directory" % path)
