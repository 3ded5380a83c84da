"""Image classification on the runner: the model_fn and input_fn that the
train, eval and export paths and the tests share.

Training builds one clone per device and its train op with
`model_deploy.deploy` (one code path for one clone and for N), with TF-Slim's
optimizers and learning-rate schedules (optimization.py), optional moving
averages, and fine-tuning from a TF-Slim checkpoint (fine_tuning.py).
"""
import dataclasses
from typing import Optional, Sequence

import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from classification import eval_report
from classification import fine_tuning
from classification import optimization
from classification import progress
from datasets import reader
from deployment import cluster
from deployment import model_deploy
from deployment import session_options
from nets import nets_factory
from preprocessing import encoded_image
from preprocessing import inception_preprocessing
from preprocessing import preprocessing_factory
import quantization
from quantization import rewrite as quantization_rewrite
from runner import estimator as est

tf1 = tf.compat.v1


@dataclasses.dataclass
class ClassifierParams:
  """Everything the classification model_fn needs (the scripts' flags)."""
  model_name: str
  num_classes: int  # the network's outputs: dataset classes - labels_offset
  num_samples_per_epoch: int = 0
  batch_size: int = 32  # per clone, as in TF-Slim (see images_per_step)
  # flag_field: also a flag of the scripts, default and help written here.
  weight_decay: float = optimization.flag_field(0.00004, 'L2 weight decay.')
  label_smoothing: float = optimization.flag_field(
      0.0, 'Label smoothing amount.')
  moving_average_decay: Optional[float] = optimization.flag_field(
      None, 'Decay of the moving averages of the model variables; '
      'evaluation then uses the averages.')
  trainable_scopes: Optional[Sequence[str]] = None
  checkpoint_path: Optional[str] = None
  checkpoint_exclude_scopes: Optional[Sequence[str]] = None
  ignore_missing_vars: bool = optimization.flag_field(
      False, 'Skip variables missing from checkpoint_path.')
  optimizer: optimization.OptimizerParams = dataclasses.field(
      default_factory=optimization.OptimizerParams)
  deployment: model_deploy.DeploymentConfig = dataclasses.field(
      default_factory=lambda: model_deploy.DeploymentConfig(exact=True))
  summarize_activations: bool = True
  log_every_n_steps: int = optimization.flag_field(
      10, 'Steps between log lines.')
  async_worker_warmup_steps: int = optimization.flag_field(
      100, 'Asynchronous parameter-server training: non-chief worker k '
      '(1, 2, ...) takes its first step when the global step reaches k times '
      'this; the chief alone takes the steep first steps (0: all at once).')
  distort_colors_after_batching: bool = optimization.flag_field(
      False, "Inception preprocessing: the colour distortion (brightness, "
      "saturation) runs on each batch on the training devices, not per "
      "image in the input pipeline; the same draws from the same ranges. "
      "For GPUs: it takes two fifths of the input's CPU time off each "
      "image (on a CPU alone it is slower).")
  max_steps: Optional[int] = None  # the last step, for the progress lines' ETA
  precision: str = 'float32'  # float16 adds loss scaling (session_options)
  # Quantization-aware training (TF-Slim's --quantize_delay; -1: off): the
  # graph is rewritten by quantization.create_training_graph, fake quant on
  # from that step. Evaluation and prediction: `quantize`, the eval rewrite.
  quantize_delay: int = -1
  quantize: bool = False


def images_per_step(p):
  """Images one global step learns from: batch_size per clone, times the
  clones, times the replicas whose gradients a synchronous step aggregates."""
  replicas = p.optimizer.replicas_to_aggregate if p.optimizer.sync_replicas else 1
  return p.batch_size * p.deployment.num_clones * replicas


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


def _input_wait():
  """The seconds a step waits for its batch, when the runner measures them."""
  waits = tf1.get_collection(est.INPUT_WAIT_SECONDS)
  return waits[-1] if waits else None


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


# TF-Slim's evaluation metric Recall_5: whether the label is among the 5
# best classes.
RECALL_K = 5


def model_fn(features, labels, mode, params, config=None):
  """Classification model_fn; params['classifier'] is a ClassifierParams;
  config (the RunConfig) says whether this task is the chief."""
  p = params['classifier']
  info = image_network_info(p.model_name)
  is_training = mode == est.ModeKeys.TRAIN
  network_fn = nets_factory.get_network_fn(
      p.model_name, p.num_classes, weight_decay=p.weight_decay,
      is_training=is_training)
  global_step = tf1.train.get_or_create_global_step()

  if is_training:
    def clone_fn(images, clone_labels):
      if p.distort_colors_after_batching:  # on the clone's device
        images = inception_preprocessing.distort_color_batch(images)
      logits, end_points = network_fn(images)
      _add_losses(logits, end_points, clone_labels, p.num_classes,
                  p.label_smoothing)
      return end_points, _correct(logits, clone_labels)

    p.optimizer.validate()
    with tf1.device(p.deployment.device_function()):
      learning_rate = optimization.configure_learning_rate(
          p.optimizer, p.num_samples_per_epoch, images_per_step(p),
          global_step)
      optimizer = session_options.loss_scale_optimizer(
          optimization.configure_optimizer(p.optimizer, learning_rate),
          p.precision)
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
        var_list=lambda: optimization.variables_to_train(p.trainable_scopes),
        # With sync replicas the chief's SyncReplicasOptimizer applies them.
        moving_averages=None if p.optimizer.sync_replicas else ema,
        rewrite_graph=_quantization_rewrite(p, training=True))
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
    if p.checkpoint_path or p.trainable_scopes:
      progress.print_now(fine_tuning.trainable_line(
          optimization.variables_to_train(p.trainable_scopes),
          p.trainable_scopes))
    init_fn = None
    if p.checkpoint_path:
      exclude_scopes, why = info.fine_tuning_exclusions(
          p.num_classes, p.checkpoint_exclude_scopes, dict(
              tf.train.list_variables(
                  fine_tuning.resolve_checkpoint(p.checkpoint_path))))
      init_fn = fine_tuning.fine_tune_init_fn(
          p.checkpoint_path, exclude_scopes, p.ignore_missing_vars, note=why,
          quantized=p.quantize_delay >= 0)
    warmup = async_warmup_step(p, config)
    if warmup:
      hooks.append(tf1.train.GlobalStepWaiterHook(warmup))
    hooks.append(progress.ChanceLevelHook(
        tf.add_n([c.outputs[1] for c in model.clones]), images_per_batch,
        p.num_classes))
    hooks.append(progress.TrainingProgressHook(
        model.total_loss, images_per_batch, p.log_every_n_steps,
        max_steps=p.max_steps, clones=p.deployment.num_clones,
        input_wait=_input_wait(),
        # images_per_sec goes beside the chief's other summaries.
        summary_dir=(config.model_dir if config is not None and config.is_chief
                     else None)))
    return est.EstimatorSpec(mode, loss=model.total_loss,
                             train_op=model.train_op,
                             scaffold=tf1.train.Scaffold(init_fn=init_fn),
                             training_hooks=hooks)

  # The last batch may be smaller than the clone count: padded, then cut.
  images, size = model_deploy.pad_batch(features, p.deployment.num_clones)
  clones = model_deploy.create_clones(
      p.deployment, lambda images: network_fn(images)[0], [images])
  logits = tf.concat([c.outputs for c in clones], axis=0)[:size]
  rewrite = _quantization_rewrite(p, training=False)
  if rewrite:  # after the logits' reader, before the metrics (TF-Slim's order)
    rewrite()
  predictions = {'classes': tf.argmax(logits, 1),
                 'probabilities': tf.nn.softmax(logits, name='Predictions')}
  scaffold = None
  if p.moving_average_decay:
    ema = tf1.train.ExponentialMovingAverage(p.moving_average_decay,
                                             global_step)
    to_restore = ema.variables_to_restore(slim.get_model_variables())
    to_restore[global_step.op.name] = global_step
    for variable in tf1.global_variables():  # the quantization ranges
      if variable.op.name not in to_restore and not any(
          v is variable for v in to_restore.values()):
        to_restore[variable.op.name] = variable
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
      # An array: printed and plotted by eval_report, not a `name = value`.
      'confusion_matrix': eval_report.confusion_matrix_metric(
          labels, predictions['classes'], p.num_classes),
  }
  if p.num_classes > RECALL_K:  # else every label is in the top k: always 1
    metrics['Recall_%d' % RECALL_K] = tf1.metrics.recall_at_k(labels, logits,
                                                              RECALL_K)
  return est.EstimatorSpec(mode, predictions=predictions, loss=loss,
                           eval_metric_ops=metrics, scaffold=scaffold)


def _quantization_rewrite(p, training):
  """The quantization rewrite of this graph (quantization/), None without
  one. The clones share one set of ranges under one device's names, the
  ones an eval graph restores (quantization.rewrite.shared_by_clones); in a
  parameter-server cluster they live on the ps with the other variables."""
  if not (p.quantize_delay >= 0 if training else p.quantize):
    return None
  flag = '--quantize_delay' if training else '--quantize'
  d = p.deployment
  if d.collective and d.num_replicas > 1:
    # Each worker keeps its own copy of every variable and only gradients
    # are all-reduced: each would learn its own ranges (docs/deploying.md).
    raise ValueError(
        '%s does not run with --variable_update=collective_all_reduce in a '
        'cluster (%d workers): each worker would learn ranges of its own, '
        'the ranges are no gradients to all-reduce; use parameter servers '
        '(--variable_update=parameter_server) or one worker' % (
            flag, d.num_replicas))
  scopes = [d.clone_scope(i) for i in range(d.num_clones)]
  if training:
    def rewrite():
      with quantization_rewrite.shared_by_clones(scopes):
        quantization.create_training_graph(quant_delay=p.quantize_delay)
  else:
    def rewrite():
      with quantization_rewrite.shared_by_clones(scopes):
        quantization.create_eval_graph()
  return rewrite


def async_warmup_step(p, config):
  """The global step at which this non-chief worker of an asynchronous
  parameter-server job takes its first step (0: at once).

  Asynchronous workers that start together apply gradients computed on the
  same parameters: at the start, where the loss is steepest, two workers'
  steps add up to one step at twice the learning rate from stale values.
  LeNet on digits at --learning_rate=0.05 swings from a loss of 11 to 57 in
  its first steps in one process and diverges at 0.1; a second worker
  joining at once tipped 1 start in 4 into NaN or a chance-level model. So
  the chief takes the first steps alone (one process's steps) and worker k
  joins at step k x async_worker_warmup_steps, as tf.estimator delayed its
  workers (GlobalStepWaiterHook). Synchronous layouts need every worker at
  every step and never wait."""
  if (config is None or not p.async_worker_warmup_steps or
      p.optimizer.sync_replicas or not p.deployment.num_ps_tasks or
      config.is_chief or not config.cluster.is_training_task):
    return 0
  task = config.cluster
  ordinal = task.task_id + (1 if 'chief' in task.jobs else 0)
  return ordinal * p.async_worker_warmup_steps


# -- the input_fn ------------------------------------------------------------
def make_input_fn(descriptor, model_name, batch_size, is_training,
                  preprocessing_name=None, image_size=None,
                  num_readers=reader.NUM_READERS,
                  num_preprocessing_threads=reader.NUM_PREPROCESSING_THREADS,
                  labels_offset=0,
                  num_epochs=None, deterministic=False, seed=None,
                  use_grayscale=False, fused_decoding=True,
                  distort_colors=True):
  """input_fn reading `descriptor`'s records, preprocessed for `model_name`
  (fused_decoding: see reader.make_dataset). distort_colors=False leaves a
  training preprocessing's colour distortion to the model_fn
  (ClassifierParams.distort_colors_after_batching)."""
  info = image_network_info(model_name)
  name = preprocessing_name or model_name
  preprocess = preprocessing_factory.get_preprocessing(
      name, is_training=is_training, use_grayscale=use_grayscale)
  size = image_size or info.default_image_size
  options = {}
  if is_training and not distort_colors:
    family = preprocessing_factory.get_info(name)
    if family.preprocess_image is not inception_preprocessing.preprocess_image:
      raise ValueError(
          "--distort_colors_after_batching: preprocessing '%s' is not "
          "inception's, the one whose colour distortion runs on batches"
          % name)
    options['distort_colors'] = False

  # kwargs: the record's bounding boxes (bbox=) where the data has them.
  def preprocess_fn(image, **kwargs):
    return preprocess(image, size, size, **options, **kwargs)
  preprocess_fn.takes_encoded_images = encoded_image.accepts_encoded(preprocess)

  def input_fn():
    return reader.make_dataset(
        descriptor, batch_size, preprocess_fn=preprocess_fn,
        is_training=is_training, num_readers=num_readers,
        num_preprocessing_threads=num_preprocessing_threads,
        num_epochs=num_epochs, seed=seed, deterministic=deterministic,
        labels_offset=labels_offset, fused_decoding=fused_decoding)

  return input_fn
