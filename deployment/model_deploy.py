"""Deploys a model on several devices ("clones") with averaged gradients.

The semantics, shared by TF-Slim style training (`deploy`) and by
`replicate_model_fn` (deployment/replicate.py):
  * one clone per device; model variables live on one variables device (the
    CPU when there are several clones, the clone's own device for one);
  * the input batch is split along its first dimension; a batch that does not
    divide evenly gives the remainder to the last clone;
  * each clone's loss covers its slice; the gradient applied is the average of
    the clones' gradients weighted by each clone's share of the batch, so N
    clones take exactly the step one clone takes on the whole batch;
  * regularization losses are added once; every clone's batch-norm update ops
    run each step; the reported loss is the (share-weighted) mean over clones.
"""
import collections
import contextlib

import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401

tf1 = tf.compat.v1

Clone = collections.namedtuple('Clone', ['outputs', 'scope', 'device', 'weight'])
DeployedModel = collections.namedtuple(
    'DeployedModel', ['train_op', 'summary_op', 'total_loss', 'clones'])


class DeploymentConfig(object):
  """Where clones, variables, inputs and the optimizer go.

  Args:
    num_clones: clones per replica (one per GPU, or per CPU device with
      `clone_on_cpu`).
    clone_on_cpu: place clones on CPU devices (`/device:CPU:i`; with a single
      CPU device, soft placement folds them onto it).
    replica_id, num_replicas: this worker's index and the worker count.
    num_ps_tasks: parameter servers; 0 keeps variables on this worker.
    worker_job_name, ps_job_name: cluster job names.
    devices: explicit clone devices (overrides num_clones/clone_on_cpu).
  """

  def __init__(self, num_clones=1, clone_on_cpu=False, replica_id=0,
               num_replicas=1, num_ps_tasks=0, worker_job_name='worker',
               ps_job_name='ps', devices=None):
    if devices is not None:
      devices = list(devices)
      num_clones = len(devices)
    if num_clones < 1:
      raise ValueError('num_clones must be at least 1, got %d' % num_clones)
    if num_replicas > 1 and num_ps_tasks < 1:
      raise ValueError('num_replicas=%d needs num_ps_tasks >= 1' % num_replicas)
    if not 0 <= replica_id < max(num_replicas, 1):
      raise ValueError('replica_id %d outside [0, %d)' % (replica_id,
                                                           num_replicas))
    self.num_clones = num_clones
    self.clone_on_cpu = clone_on_cpu
    self.replica_id = replica_id
    self.num_replicas = num_replicas
    self.num_ps_tasks = num_ps_tasks
    self.worker_job_name = worker_job_name
    self.ps_job_name = ps_job_name
    self._devices = devices
    self.worker_device = ('/job:%s/task:%d' % (worker_job_name, replica_id)
                          if num_ps_tasks > 0 else '')

  def clone_device(self, clone_index):
    if not 0 <= clone_index < self.num_clones:
      raise ValueError('clone_index %d outside [0, %d)' % (clone_index,
                                                           self.num_clones))
    if self._devices is not None:
      return self.worker_device + self._devices[clone_index]
    if self.num_clones == 1 and not self.clone_on_cpu:
      return self.worker_device  # let TensorFlow pick the best device
    kind = 'CPU' if self.clone_on_cpu else 'GPU'
    return self.worker_device + '/device:%s:%d' % (kind, clone_index)

  def clone_scope(self, clone_index):
    return 'clone_%d' % clone_index if self.num_clones > 1 else ''

  def variables_device(self):
    """A device (or device function) for model variables."""
    if self.num_ps_tasks > 0:
      return tf1.train.replica_device_setter(
          ps_tasks=self.num_ps_tasks, ps_device='/job:%s' % self.ps_job_name,
          worker_device=self.worker_device + '/device:CPU:0')
    if self.num_clones == 1:
      return self.clone_device(0)
    return '/device:CPU:0'

  def inputs_device(self):
    return self.worker_device + '/device:CPU:0'

  def optimizer_device(self):
    if self.num_ps_tasks > 0 or self.num_clones > 1:
      return self.worker_device + '/device:CPU:0'
    return self.clone_device(0)

  def check_devices_available(self):
    """Raises ValueError when clones ask for more GPUs than this machine has."""
    if self._devices is not None or self.clone_on_cpu:
      return
    if self.num_clones == 1:
      return
    gpus = len(tf.config.list_physical_devices('GPU'))
    if self.num_clones > gpus:
      raise ValueError(
          'num_clones=%d but only %d GPU(s) are available; use --clone_on_cpu '
          'to place clones on CPU devices' % (self.num_clones, gpus))


def batch_split_sizes(batch_size, num_clones):
  """Slice sizes: equal shares, the remainder to the last clone (int or tensor)."""
  share = batch_size // num_clones
  return [share] * (num_clones - 1) + [batch_size - share * (num_clones - 1)]


def split_batch(structure, num_clones, require_full_clones=True):
  """Splits every tensor of a nest along axis 0 into `num_clones` slices.

  Returns (list of per-clone nests, list of float32 weights = slice/batch).
  Non-tensor leaves are passed to every clone unchanged. With
  `require_full_clones`, a batch smaller than num_clones fails at run time
  (an empty slice has no mean loss); serving allows it.
  """
  tensors = [t for t in tf.nest.flatten(structure) if tf.is_tensor(t)]
  if num_clones == 1 or not tensors:
    return [structure] * num_clones, [tf.constant(1.0)] * num_clones
  batch = tf.shape(tensors[0], out_type=tf.int32)[0]
  sizes = batch_split_sizes(batch, num_clones)
  if require_full_clones:
    check = tf.debugging.assert_greater_equal(
        batch, num_clones, message='batch is smaller than the number of clones')
    with tf.control_dependencies([check]):
      sizes = [tf.identity(s) for s in sizes]
  pieces = [tf.split(t, sizes, axis=0) if tf.is_tensor(t) else [t] * num_clones
            for t in tf.nest.flatten(structure)]
  per_clone = [tf.nest.pack_sequence_as(structure, [p[i] for p in pieces])
               for i in range(num_clones)]
  weights = [tf.cast(s, tf.float32) / tf.cast(batch, tf.float32) for s in sizes]
  return per_clone, weights


@contextlib.contextmanager
def clone_scope(config, clone_index):
  """Device, name scope and variable reuse for clone `clone_index`.

  Re-entering the root variable scope *object* (not its name) makes
  TensorFlow restore its default-name counters on exit, so every clone gets
  the same auto-named scopes ('BatchNorm', 'OptimizeLoss', ...) and reuses the
  first clone's variables instead of creating 'BatchNorm_1'.
  """
  root = tf1.get_variable_scope()
  reuse = True if clone_index > 0 else root.reuse
  with tf1.variable_scope(root, reuse=reuse, auxiliary_name_scope=False):
    with tf1.name_scope(config.clone_scope(clone_index) or None):
      with slim.arg_scope([slim.model_variable, slim.variable],
                          device=config.variables_device()):
        with tf.device(config.clone_device(clone_index)):
          yield


def create_clones(config, model_fn, args=None, kwargs=None):
  """Calls `model_fn(*args, **kwargs)` once per clone on its slice of the batch.

  Tensors in args/kwargs are split along axis 0 (see `split_batch`).
  Returns a list of Clone(outputs, scope, device, weight).
  """
  args, kwargs = list(args or []), dict(kwargs or {})
  with tf.device(config.inputs_device()):
    pieces, weights = split_batch((args, kwargs), config.num_clones)
  clones = []
  for i in range(config.num_clones):
    with clone_scope(config, i):
      clone_args, clone_kwargs = pieces[i]
      outputs = model_fn(*clone_args, **clone_kwargs)
    clones.append(Clone(outputs, config.clone_scope(i), config.clone_device(i),
                        weights[i]))
  return clones


def _clone_loss(clone, regularization_losses):
  """The clone's share-weighted loss (plus regularization, given once)."""
  with tf.device(clone.device):
    losses = tf1.losses.get_losses(scope=clone.scope or None)
    clone_loss = tf.add_n(losses, name='clone_loss') if losses else None
    parts = []
    if clone_loss is not None:
      parts.append(clone_loss * clone.weight)
    if regularization_losses:
      parts.append(tf.add_n(regularization_losses, name='regularization_loss'))
  if clone_loss is not None:  # tagged '<clone scope>/clone_loss' by the caller's scope
    tf1.summary.scalar('clone_loss', clone_loss)
  return tf.add_n(parts) if parts else None, clone_loss


def combine_gradients(clone_grads):
  """Sums per-clone lists of (gradient, variable) into one list, on the
  variables' device. Gradients must already carry their clone's weight."""
  by_var, order = {}, []
  for grads_and_vars in clone_grads:
    for grad, var in grads_and_vars:
      if grad is None:
        continue
      key = var.ref()
      if key not in by_var:
        by_var[key] = []
        order.append(var)
      by_var[key].append(grad)
  combined = []
  for var in order:
    grads = by_var[var.ref()]
    with tf1.name_scope(var.op.name + '/combine_gradients'):
      with tf.device(var.device):
        if len(grads) == 1:
          total = grads[0]
        elif all(isinstance(g, tf.IndexedSlices) for g in grads):
          total = tf.IndexedSlices(tf.concat([g.values for g in grads], 0),
                                   tf.concat([g.indices for g in grads], 0),
                                   grads[0].dense_shape)
        else:
          total = tf.add_n([tf.convert_to_tensor(g) for g in grads])
    combined.append((total, var))
  return combined


def optimize_clones(clones, optimizer, regularization_losses=None, **kwargs):
  """Computes each clone's gradients and combines them.

  Returns (total_loss, grads_and_vars): total_loss is the share-weighted mean
  of the clone losses plus the regularization losses (added once).
  kwargs go to `optimizer.compute_gradients` (e.g. var_list).
  """
  if regularization_losses is None:
    regularization_losses = tf1.losses.get_regularization_losses()
  losses, clone_grads = [], []
  for i, clone in enumerate(clones):
    with tf1.name_scope(clone.scope or None):
      loss, _ = _clone_loss(clone, regularization_losses if i == 0 else None)
      if loss is None:
        continue
      with tf.device(clone.device):
        clone_grads.append(optimizer.compute_gradients(loss, **kwargs))
      losses.append(loss)
  if not losses:
    raise ValueError('the model_fn added no loss (tf.compat.v1.losses.*) and '
                     'there are no regularization losses')
  total_loss = tf.add_n(losses, name='total_loss')
  return total_loss, combine_gradients(clone_grads)


def deploy(config, model_fn, args=None, kwargs=None, optimizer=None,
           summarize_gradients=False, var_list=None):
  """TF-Slim's model_deploy.deploy: clones, one averaged apply, summaries.

  Without an optimizer, only the clones and the total loss are built (eval).
  """
  global_step = tf1.train.get_or_create_global_step()
  clones = create_clones(config, model_fn, args, kwargs)
  update_ops = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)
  train_op = None
  if optimizer is not None:
    with tf.device(config.optimizer_device()):
      total_loss, grads_and_vars = optimize_clones(clones, optimizer,
                                                   var_list=var_list)
      if summarize_gradients:
        for grad, var in grads_and_vars:
          tf1.summary.histogram(var.op.name + '/gradient',
                                tf.convert_to_tensor(grad))
      apply_op = optimizer.apply_gradients(grads_and_vars,
                                           global_step=global_step)
      with tf.control_dependencies(update_ops + [apply_op]):
        train_op = tf.identity(total_loss, name='train_op')
  else:
    regularization = tf1.losses.get_regularization_losses()
    losses = []
    for i, clone in enumerate(clones):
      with tf1.name_scope(clone.scope or None):
        losses.append(_clone_loss(clone, regularization if i == 0 else None)[0])
    total_loss = tf.add_n(losses, name='total_loss')
  tf1.summary.scalar('total_loss', total_loss)
  summary_op = tf1.summary.merge_all()
  return DeployedModel(train_op, summary_op, total_loss, clones)
