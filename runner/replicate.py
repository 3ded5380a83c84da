"""Runs an unchanged single-device `model_fn` on N devices.

    estimator = Estimator(replicate_model_fn(model_fn, num_clones=2), model_dir)

Each device ("tower") calls the model_fn on its slice of the batch, with the
same variables, placed by model_deploy's one device function (every
variable -- slim, tf.compat.v1.layers, get_variable, Keras legacy layers,
optimizer slots, moving averages, metrics -- on the variables device; the
tower's compute on its device). The towers' optimizer steps are gathered:
whatever builds the train_op -- `optimizer.minimize`, tf-slim's
`optimize_loss` or `create_train_op` -- ends in `Optimizer.apply_gradients`,
which records each tower's gradients (scaled by the tower's share of the
batch) and, when the last tower calls it, applies their sum once, built
outside the towers: in the name and variable scope replicate was called in,
on the optimizer's device, so optimizer slots are created once on the
variables device. So N towers take the step one device takes on the whole
batch, with any tf.compat.v1.train optimizer.

The step that runs is the LAST tower's train_op: it holds the one combined
apply and whatever the model_fn chained after it (a moving-average update,
say), so that runs once, after the apply. The other towers' train ops are
only used for their gradients. Batch norm follows model_deploy's rule: the
UPDATE_OPS collection shows every tower the first tower's update ops, so the
moving statistics are updated once per step from the first tower's batch,
when the model_fn wires UPDATE_OPS into its train op (as on one device).

Losses in the tf.compat.v1.losses collection are kept per tower, so a
model_fn that calls `get_total_loss()` sees only its own tower's loss (plus
the regularization losses, counted once by the weighting). Metric variables
(like Keras layers' variables) are shared by all towers, so eval metrics
cover every tower's predictions;
predictions are concatenated in input order. Hooks, scaffold and summaries
come from the first tower (one device's worth).

Not exactly one device: a model_fn that transforms its gradients before
apply_gradients (optimize_loss's `clip_gradients`, gradient noise) does so
per tower, on the tower's own gradients; the step then differs from one
device's, and still trains (tested).

`TowerOptimizer(optimizer)` does the same gathering explicitly, for an
optimizer class that overrides `apply_gradients` itself.

`variable_update='replicated'` gives each tower its own copy of the
trainable variables (model_deploy's replicated layout): a tower's
`compute_gradients` differentiates by its copies, and the gathered apply
all-reduces the towers' gradients and updates every copy in one apply.
"""
import contextlib
import threading

import tensorflow as tf

import tf_compat  # noqa: F401
from deployment import all_reduce
from deployment import model_deploy
from runner import estimator as est

tf1 = tf.compat.v1
_state = threading.local()


class _GradientGatherer(object):
  """Collects each tower's apply_gradients calls and applies them once."""

  def __init__(self, config, weights, outside):
    self.config = config
    self.num_towers = config.num_clones
    self.weights = weights
    self.outside = outside  # context manager: where the one apply is built
    self.tower = 0
    self.tower_scope = ''  # the full name scope of the tower being built
    self.records = []  # per tower: model_deploy.CloneRecord
    # per tower: its apply_gradients calls' [grads_and_vars]
    self.calls = [[] for _ in range(self.num_towers)]

  def tower_variables(self, var_list):
    """`var_list` (default: the trainable variables) as the tower being
    built trains them: its own copies when replicated."""
    copies = self.records[self.tower].copies if self.records else None
    if not copies:
      return var_list
    if var_list is None:  # compute_gradients' default
      var_list = (tf1.trainable_variables() + tf1.get_collection(
          tf1.GraphKeys.TRAINABLE_RESOURCE_VARIABLES))
    return [copies.get(v.ref(), v) for v in tf.nest.flatten(var_list)]

  def apply(self, apply_fn, grads_and_vars, global_step, name):
    grads_and_vars = [(g, v) for g, v in grads_and_vars]
    weight = self.weights[self.tower]
    with tf1.name_scope('tower_gradient_weight'):
      weighted = [(None if g is None else _scale(g, weight), v)
                  for g, v in grads_and_vars]
    index = len(self.calls[self.tower])
    self.calls[self.tower].append(weighted)
    if self.tower < self.num_towers - 1:
      return tf.no_op(name='deferred_apply_gradients')
    parts = []
    for tower, calls in enumerate(self.calls):
      if len(calls) <= index:
        raise ValueError(
            'tower %d called apply_gradients %d time(s) but the last tower '
            'called it %d; the model_fn must build the same train_op on every '
            'device' % (tower, len(calls), index + 1))
      parts.append(calls[index])
    with self.outside(self.tower_scope):
      if not self.config.replicated:
        return apply_fn(model_deploy.combine_gradients(parts),
                        global_step=global_step, name=name)
      # Replicated: each tower's gradients are of its own copies; the sums
      # reach every tower and one apply updates every copy (model_deploy's
      # all-reduce and slot rule, as build_train_op uses them).
      clones = [model_deploy.Clone(None, r.scope, self.config.clone_device(i),
                                   copies=r.copies)
                for i, r in enumerate(self.records)]
      reduced = all_reduce.all_reduce_gradients(clones, parts, self.config)
      with all_reduce.replica_slots(clones):
        return apply_fn(reduced, global_step=global_step, name=name)


def _outside_towers(config):
  """A context manager that leaves the tower being built for the place a
  single device would be at: the variable and name scopes inside the model_fn
  (e.g. optimize_loss's 'OptimizeLoss') re-rooted where replicate was called,
  with that place's reuse flag, so slots are created (once, with one
  device's names), and the optimizer's device function."""
  graph = tf1.get_default_graph()
  outer_var_scope = tf1.get_variable_scope()
  outer_name_scope = graph.get_name_scope()
  device_fn = config.device_function()

  def relative(name, prefix):
    if prefix and (name == prefix or name.startswith(prefix + '/')):
      return name[len(prefix):].lstrip('/')
    return name

  @contextlib.contextmanager
  def outside(tower_scope):
    inner = tf1.get_variable_scope()
    var_scope = tf1.VariableScope(
        outer_var_scope.reuse, name=inner.name,
        initializer=inner.initializer, regularizer=inner.regularizer,
        caching_device=inner.caching_device, partitioner=inner.partitioner,
        custom_getter=inner.custom_getter, dtype=inner.dtype,
        use_resource=inner.use_resource, constraint=inner.constraint)
    name_scope = '/'.join(n for n in (
        outer_name_scope, relative(graph.get_name_scope(), tower_scope)) if n)
    with tf1.variable_scope(var_scope, auxiliary_name_scope=False), \
        graph.name_scope(name_scope + '/' if name_scope else ''), \
        tf1.device(None), tf1.device(device_fn):
      yield

  return outside


def _scale(grad, weight):
  if isinstance(grad, tf.IndexedSlices):
    return tf.IndexedSlices(grad.values * weight, grad.indices,
                            grad.dense_shape)
  return grad * weight


_original_apply_gradients = tf1.train.Optimizer.apply_gradients
_original_compute_gradients = tf1.train.Optimizer.compute_gradients


def _tower_compute_gradients(self, loss, var_list=None, *args, **kwargs):
  """Replicated, a tower differentiates its loss by its own copies (the
  model_fn asks for the trainable variables, which are clone 0's)."""
  gatherer = getattr(_state, 'gatherer', None)
  if gatherer is not None:
    var_list = gatherer.tower_variables(var_list)
  return _original_compute_gradients(self, loss, var_list, *args, **kwargs)


def _gathering_apply_gradients(self, grads_and_vars, global_step=None,
                               name=None):
  gatherer = getattr(_state, 'gatherer', None)
  apply_fn = lambda gv, **kw: _original_apply_gradients(self, gv, **kw)
  if gatherer is None:
    return apply_fn(grads_and_vars, global_step=global_step, name=name)
  _state.gatherer = None  # an optimizer wrapping another applies only once
  try:
    return gatherer.apply(apply_fn, grads_and_vars, global_step, name)
  finally:
    _state.gatherer = gatherer


class TowerOptimizer(tf1.train.Optimizer):
  """Wraps an optimizer so its apply_gradients is gathered across towers.

  Needed only when the optimizer's class overrides `apply_gradients`; plain
  tf.compat.v1.train optimizers are gathered without it.
  """

  def __init__(self, optimizer):
    super().__init__(use_locking=False, name='Tower' + optimizer.get_name())
    self._optimizer = optimizer

  def compute_gradients(self, *args, **kwargs):
    return self._optimizer.compute_gradients(*args, **kwargs)

  def get_slot(self, *args, **kwargs):
    return self._optimizer.get_slot(*args, **kwargs)

  def get_slot_names(self, *args, **kwargs):
    return self._optimizer.get_slot_names(*args, **kwargs)

  def variables(self):
    return self._optimizer.variables()

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    gatherer = getattr(_state, 'gatherer', None)
    inner = self._optimizer.apply_gradients
    if gatherer is None:
      return inner(grads_and_vars, global_step=global_step, name=name)
    _state.gatherer = None
    try:
      return gatherer.apply(lambda gv, **kw: inner(gv, **kw), grads_and_vars,
                            global_step, name)
    finally:
      _state.gatherer = gatherer


@contextlib.contextmanager
def _gathering(gatherer):
  """Gathers every tf.compat.v1.train.Optimizer's apply_gradients while the
  towers are built.

  The class attribute is swapped, for the build only, because nothing else
  reaches the apply of an unchanged model_fn: its optimizer is made inside
  it, and minimize, optimize_loss and create_train_op call apply_gradients
  on it directly; TensorFlow offers no hook there (variable creator scopes
  see variables, not updates). The state is per thread, so a graph another
  thread builds meanwhile applies as usual; TowerOptimizer covers classes
  that override apply_gradients.
  """
  tf1.train.Optimizer.apply_gradients = _gathering_apply_gradients
  tf1.train.Optimizer.compute_gradients = _tower_compute_gradients
  _state.gatherer = gatherer
  try:
    yield
  finally:
    _state.gatherer = None
    tf1.train.Optimizer.apply_gradients = _original_apply_gradients
    tf1.train.Optimizer.compute_gradients = _original_compute_gradients


def _concat(tensors):
  if tensors[0] is None:
    return None
  if tensors[0].shape.rank == 0:
    return tensors[0]
  return tf.concat(tensors, axis=0)


def _concat_nest(structures):
  return tf.nest.map_structure(lambda *ts: _concat(list(ts)), *structures)


def _concat_export_outputs(outputs_per_tower):
  if not outputs_per_tower[0]:
    return None
  combined = {}
  for key, first in outputs_per_tower[0].items():
    towers = [outputs[key] for outputs in outputs_per_tower]
    if isinstance(first, est.export.PredictOutput):
      combined[key] = est.export.PredictOutput(
          _concat_nest([t.outputs for t in towers]))
    elif isinstance(first, est.export.ClassificationOutput):
      combined[key] = est.export.ClassificationOutput(
          scores=_concat([t.scores for t in towers]),
          classes=_concat([t.classes for t in towers]))
    elif isinstance(first, est.export.RegressionOutput):
      combined[key] = est.export.RegressionOutput(
          _concat([t.value for t in towers]))
    else:
      raise TypeError('cannot combine export output %r across towers' % first)
  return combined


def replicate_model_fn(model_fn, devices=None, num_clones=None,
                       clone_on_cpu=None, variables_device=None,
                       variable_update='parameter_server'):
  """Returns a model_fn that runs `model_fn` on several devices.

  Args:
    model_fn: an Estimator model_fn written for one device.
    devices: clone devices, e.g. ['/device:GPU:0', '/device:GPU:1'].
    num_clones: instead of devices: that many GPUs (or CPU devices with
      clone_on_cpu); default: every GPU, or one device.
    variables_device: where every variable lives (default: CPU for several
      devices, the device itself for one).
    variable_update: 'parameter_server' (one copy of the variables),
      'replicated' (a copy per device, gradients all-reduced; see
      model_deploy: the gradients a tower's optimizer computes are then of
      the tower's copies) or 'collective_all_reduce' (the same across the
      workers of a cluster without parameter servers; the Estimator's
      RunConfig cluster says which task this is).

  The towers follow model_deploy's exact semantics (`exact=True`): each
  takes its slice of the batch and the step is one device's on the whole
  batch.
  """
  if devices is None:
    if num_clones is None:
      num_clones = max(len(tf.config.list_physical_devices('GPU')), 1)
    deployment = model_deploy.DeploymentConfig(
        num_clones=num_clones, clone_on_cpu=bool(clone_on_cpu),
        variables_device=variables_device, variable_update=variable_update,
        exact=True)
  else:
    deployment = model_deploy.DeploymentConfig(
        devices=devices, variables_device=variables_device,
        variable_update=variable_update, exact=True)

  def replicated_model_fn(features, labels, mode, params=None, config=None):
    task = deployment
    if mode == est.ModeKeys.TRAIN and config is not None:
      task = deployment.for_task(config.cluster)  # a cluster's worker
    return _replicated_call(model_fn, task, features, labels, mode,
                            params, config)

  replicated_model_fn.deployment_config = deployment
  return replicated_model_fn


def _replicated_call(model_fn, config, features, labels, mode, params,
                     run_config):
  n = config.num_clones
  with tf.device(config.inputs_device()):
    pieces, weights = model_deploy.split_batch(
        (features, labels), n, require_full_clones=mode == est.ModeKeys.TRAIN)
  gatherer = _GradientGatherer(config, weights, _outside_towers(config))
  shared, specs = [], []
  with _gathering(gatherer):
    for i in range(n):
      gatherer.tower = i
      with model_deploy.clone_context(config, i, shared) as record:
        gatherer.records.append(record)
        gatherer.tower_scope = record.scope.rstrip('/')
        tower_features, tower_labels = pieces[i]
        specs.append(est.call_model_fn(
            model_fn, tower_features, tower_labels, mode, params, run_config))
  first = specs[0]
  loss = None
  if first.loss is not None:
    with tf1.name_scope('replicated_loss'):
      loss = tf.add_n([s.loss * w for s, w in zip(specs, weights)])
    if n > 1:
      for i, spec in enumerate(specs):
        model_deploy.scalar_summary('losses/clone_%d' % i, spec.loss)
  # The last tower's train op holds the one combined apply (see docstring).
  train_op = specs[-1].train_op if mode == est.ModeKeys.TRAIN else None
  eval_metric_ops = {}
  for key, (value, _) in first.eval_metric_ops.items():
    eval_metric_ops[key] = (value, tf.group(
        *[s.eval_metric_ops[key][1] for s in specs]))
  predictions = (_concat_nest([s.predictions for s in specs])
                 if first.predictions is not None else None)
  return est.EstimatorSpec(
      mode=mode, predictions=predictions, loss=loss, train_op=train_op,
      eval_metric_ops=eval_metric_ops,
      export_outputs=_concat_export_outputs([s.export_outputs for s in specs]),
      training_chief_hooks=first.training_chief_hooks,
      training_hooks=first.training_hooks,
      scaffold=first.scaffold,
      evaluation_hooks=first.evaluation_hooks,
      prediction_hooks=first.prediction_hooks)
