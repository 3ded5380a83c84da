"""Deploys a model on several devices ("clones") with averaged gradients.

One mechanism -- the clone context (name scope, variable reuse, the clone's
view of the collections), one device function per clone, the gathering of
each clone's losses and the sum of their gradients -- with two semantics,
chosen by `DeploymentConfig(exact=...)`.

Placement, in both: one device function per clone (`DeploymentConfig.
device_function`) puts every variable op -- slim, tf.compat.v1.layers,
get_variable, Keras legacy layers, optimizer slots, moving averages, metric
variables -- on the variables device and every other op on the clone's
device. An explicit `tf.device` inside the model still wins, as in
TensorFlow.

`exact=False` (the default): TF-Slim's model_deploy, as TF-Slim's own
scripts and tests (research/slim/deployment/model_deploy_test.py) expect it.
Every clone is called with the arguments it was given (TF-Slim's
`clone_fn(batch_queue)` dequeues its own batch); each clone's loss is divided
by num_clones and the gradients are summed, so the step is the clones'
average; every clone's batch-norm update ops stay in UPDATE_OPS and `deploy`
(like TF-Slim's scripts) runs the first clone's; TF-Slim's device strings
(`/device:GPU:i`, every CPU clone on `/device:CPU:0`, variables on
`/device:CPU:0` or round-robin over `/job:ps/task:t/device:CPU:0`,
`caching_device()`); `clone.scope` is the name scope with its trailing '/';
`Clone` is TF-Slim's (outputs, scope, device).

`exact=True`: N devices take exactly one device's step on the whole batch.
The project's scripts, `replicate_model_fn` and the 'replicated' and
'collective_all_reduce' layouts (which imply it) use it:
  * variables on the CPU when there are several clones, on the clone's own
    device for one, greedy by size over the parameter servers in a cluster;
    CPU clone i on `/device:CPU:i` (logical devices in one process);
  * the input batch is split along its first dimension; a batch that does not
    divide evenly gives the remainder to the last clone;
  * each clone's loss covers its slice; the gradient applied is the average of
    the clones' gradients weighted by each clone's share of the batch, so N
    clones take exactly the step one clone takes on the whole batch; the
    reported loss is the share-weighted mean of the clone losses;
    regularization losses are added once;
  * batch norm: the moving statistics are updated once per step, from the
    FIRST clone's batch statistics. Only the first clone's update ops are in
    the UPDATE_OPS collection (during and after the build),
    so every consumer -- `deploy`, `create_train_op`, `optimize_loss`, a
    model_fn's own `control_dependencies` -- runs exactly one update,
    whatever the clone count. (Averaging the clones' statistics would need a
    cross-device reduction inside each batch-norm layer; the first clone's
    rule is deterministic and the same for 1 or N clones.)
  * what a clone owns is what it added to the graph's collections while it
    was built (losses, update ops), never a match on scope names, so 12
    clones or an outer name scope select exactly; summaries are kept from
    the first clone only, and per-clone losses are tagged `losses/clone_<i>`.

`variable_update='replicated'` (a copy of the trainable variables per
clone, gradients summed by a collective all-reduce) and
`variable_update='collective_all_reduce'` (the same across the workers of a
cluster without parameter servers) keep this mechanism and change only where
the weights live and how gradients meet: deployment/all_reduce.py holds
them, and this module calls it at three points (a clone's copies, the
all-reduce of the gradients, the copies' optimizer slots).
"""
import collections
import contextlib
import re

import tf_compat  # noqa: F401  (first: tf-slim on TF 2.21)
import tensorflow as tf
import tf_slim as slim

from deployment import cluster
# The all-reduce layouts: the clone mechanism's one seam to them.
from deployment.all_reduce import Copies, all_reduce_gradients, replica_slots

tf1 = tf.compat.v1

# Ops that hold state: they go to the variables device (the same list as
# tf.compat.v1.train.replica_device_setter's parameter-server ops).
VARIABLE_OP_TYPES = frozenset([
    'Variable', 'VariableV2', 'AutoReloadVariable', 'VarHandleOp',
    'MutableHashTable', 'MutableHashTableV2', 'MutableHashTableOfTensors',
    'MutableHashTableOfTensorsV2', 'MutableDenseHashTable',
    'MutableDenseHashTableV2'])

VARIABLE_UPDATES = ('parameter_server', 'replicated', 'collective_all_reduce')
# A collective step waits at most this long for the other workers by default.
COLLECTIVE_TIMEOUT_SECS = 300

class Clone(collections.namedtuple('Clone', ['outputs', 'scope', 'device'])):
  """TF-Slim's Clone: what model_fn returned, the clone's name scope ('' or
  'clone_<i>/', with an outer scope before it) and device; a 3-tuple, as
  TF-Slim's. Also, as attributes, what the deployment recorded while
  building it: `weight` (its share of the step's loss: 1/num_clones, or its
  slice of the batch when exact), the `losses` and `update_ops` it added
  (None: select them by scope name) and, when replicated, its `copies` of
  clone 0's variables ({variable.ref(): copy})."""

  def __new__(cls, outputs, scope, device, *, weight=1.0, losses=None,
              update_ops=None, copies=None):
    clone = super().__new__(cls, outputs, scope, device)
    clone.weight, clone.losses = weight, losses
    clone.update_ops, clone.copies = update_ops, copies
    return clone


DeployedModel = collections.namedtuple(
    'DeployedModel', ['train_op', 'summary_op', 'total_loss', 'clones'])


class _RoundRobinPS(object):
  """TF-Slim's variable placement over parameter servers: each new variable
  op (reference or resource) on the next ps task's CPU, in creation order;
  other ops, and ops that already have a device, keep theirs."""

  def __init__(self, ps_device, num_tasks):
    self._ps_device = ps_device
    self._num_tasks = num_tasks
    self._next = 0

  def __call__(self, op):
    if op.device or op.type not in VARIABLE_OP_TYPES:
      return op.device
    task, self._next = self._next, (self._next + 1) % self._num_tasks
    return '%s/task:%d/device:CPU:0' % (self._ps_device, task)


def _where_it_lives(op):
  """A caching device: a variable's cached read (its `value()`) on the
  variable's own device."""
  return op.inputs[0].device if op.inputs else op.device


def _merged(device, op):
  """`device` under the op's own device: fields the op already has (from a
  `tf.device` inside the model) win, as in TensorFlow's device stacks."""
  return tf.DeviceSpec.from_string(device or '').make_merged_spec(
      tf.DeviceSpec.from_string(op.device or '')).to_string()


class DeploymentConfig(object):
  """Where clones, variables, inputs and the optimizer go, and how clones
  share a step (`exact`; see the module docstring).

  Args:
    num_clones: clones per replica (one per GPU, or per CPU device with
      `clone_on_cpu`).
    clone_on_cpu: place clones on CPU devices (`/device:CPU:i`; with a single
      CPU device, soft placement folds them onto it).
    replica_id, num_replicas: this worker's index and the worker count.
    num_ps_tasks: parameter servers; 0 keeps variables on this worker.
    worker_job_name, ps_job_name: cluster job names.
    devices: explicit clone devices (overrides num_clones/clone_on_cpu).
    variables_device: a device (or device function) for variables, instead
      of the default (CPU for several clones, the clone's device for one,
      the parameter servers with num_ps_tasks; clone 0's device when
      replicated).
    variable_update: 'parameter_server' (one copy of the variables, the
      clones' gradients summed where it lives), 'replicated' (a copy per
      clone, gradients all-reduced; several clones, no parameter servers) or
      'collective_all_reduce' (replicated across every clone of every worker
      of a cluster without parameter servers).
    is_chief: whether this worker initialises, restores and saves (default:
      replica 0).
    collective_timeout_secs: how long a step (or the broadcast at the
      start) that holds collectives across workers waits for the other
      workers before it fails (collective_all_reduce; the runner gives it
      to each session run: all_reduce.step_options).
    exact: False (default), TF-Slim's semantics: every clone gets the
      arguments as given and weighs 1/num_clones, TF-Slim's device strings,
      every clone's update ops in UPDATE_OPS. True: the batch is split
      across clones, which weigh their share of it, so N clones take one
      device's step; CPU clone i on `/device:CPU:i`; only the first clone's
      update ops in UPDATE_OPS. The replicated layouts imply True.
  """

  def __init__(self, num_clones=1, clone_on_cpu=False, replica_id=0,
               num_replicas=1, num_ps_tasks=0, worker_job_name='worker',
               ps_job_name='ps', devices=None, variables_device=None,
               variable_update='parameter_server', is_chief=None,
               collective_timeout_secs=COLLECTIVE_TIMEOUT_SECS, exact=None):
    if exact is None:
      exact = variable_update != 'parameter_server'
    if not exact and variable_update != 'parameter_server':
      raise ValueError("variable_update=%r is exact by construction; it "
                       'cannot take exact=False' % variable_update)
    if devices is not None:
      devices = list(devices)
      num_clones = len(devices)
    if num_clones < 1:
      raise ValueError('num_clones must be at least 1, got %d' % num_clones)
    collective = variable_update == 'collective_all_reduce'
    if num_replicas > 1 and num_ps_tasks < 1 and not collective:
      raise ValueError(
          '%d workers need a ps task (--ps_hosts, or "ps" in TF_CONFIG) for '
          'the variables, or --variable_update=collective_all_reduce (each '
          'worker keeps them)' % num_replicas)
    if collective and num_ps_tasks > 0:
      raise ValueError("variable_update='collective_all_reduce' runs without "
                       'parameter servers, got %d ps task(s): take "ps" out '
                       'of the cluster' % num_ps_tasks)
    if collective and not collective_timeout_secs > 0:
      raise ValueError('collective_timeout_secs must be positive, got %r' %
                       collective_timeout_secs)
    if not 0 <= replica_id < max(num_replicas, 1):
      raise ValueError('replica_id %d outside [0, %d)' % (replica_id,
                                                           num_replicas))
    if variable_update not in VARIABLE_UPDATES:
      raise ValueError('variable_update must be one of %s, got %r' %
                       (', '.join(VARIABLE_UPDATES), variable_update))
    if variable_update == 'replicated' and num_clones < 2:
      raise ValueError("variable_update='replicated' needs num_clones > 1, "
                       'got %d' % num_clones)
    if variable_update == 'replicated' and num_ps_tasks > 0:
      raise ValueError("variable_update='replicated' runs without parameter "
                       'servers, got num_ps_tasks=%d' % num_ps_tasks)
    self.exact = bool(exact)
    self.variable_update = variable_update
    self.num_clones = num_clones
    self.clone_on_cpu = clone_on_cpu
    self.replica_id = replica_id
    self.num_replicas = num_replicas
    self.num_ps_tasks = num_ps_tasks
    self.worker_job_name = worker_job_name
    self.ps_job_name = ps_job_name
    self._devices = devices
    self._variables_device = variables_device
    self.is_chief = replica_id == 0 if is_chief is None else bool(is_chief)
    self.collective_timeout_secs = collective_timeout_secs
    self.ps_device = '/job:%s' % ps_job_name if num_ps_tasks > 0 else ''
    if not self.exact:  # TF-Slim's: the job alone
      self.worker_device = ('/job:%s' % worker_job_name if num_ps_tasks > 0
                            else '')
    elif num_ps_tasks > 0 or (collective and num_replicas > 1):
      self.worker_device = '/job:%s/task:%d' % (worker_job_name, replica_id)
    else:
      self.worker_device = ''

  def for_task(self, task_cluster):
    """This deployment as a task of `task_cluster` (a cluster.Cluster) runs
    it: the same clones, on the task's devices, with variables on the
    parameter servers. Unchanged outside a cluster."""
    args = task_cluster.deployment_args()
    if not args:
      return self
    return DeploymentConfig(
        num_clones=self.num_clones, clone_on_cpu=self.clone_on_cpu,
        devices=self._devices, variables_device=self._variables_device,
        ps_job_name=self.ps_job_name, variable_update=self.variable_update,
        collective_timeout_secs=self.collective_timeout_secs,
        exact=self.exact, **args)

  def clone_device(self, clone_index):
    if not 0 <= clone_index < self.num_clones:
      raise ValueError('clone_index %d outside [0, %d)' % (clone_index,
                                                           self.num_clones))
    if self._devices is not None:
      return self.worker_device + self._devices[clone_index]
    if not self.exact:  # TF-Slim's: every CPU clone on CPU:0
      if self.clone_on_cpu:
        return self.worker_device + '/device:CPU:0'
      return self.worker_device + '/device:GPU:%d' % clone_index
    if self.num_clones == 1 and not self.clone_on_cpu:
      return self.worker_device  # let TensorFlow pick the best device
    kind = 'CPU' if self.clone_on_cpu else 'GPU'
    return self.worker_device + '/device:%s:%d' % (kind, clone_index)

  def clone_scope(self, clone_index):
    """The name scope of clone `clone_index` ('' for a single clone)."""
    if not 0 <= clone_index < self.num_clones:
      raise ValueError('clone_index %d outside [0, %d)' % (clone_index,
                                                           self.num_clones))
    return 'clone_%d' % clone_index if self.num_clones > 1 else ''

  def caching_device(self):
    """TF-Slim's: with parameter servers, a device function that caches a
    variable's reads on the worker that reads it; else None."""
    if self.num_ps_tasks > 0:
      return lambda op: op.device
    return None

  def variables_device(self):
    """A device (or device function) for model variables."""
    if self._variables_device is not None:
      return self._variables_device
    if not self.exact:
      if self.num_ps_tasks > 0:
        return _RoundRobinPS(self.ps_device, self.num_ps_tasks)
      return '/device:CPU:0'
    if self.num_ps_tasks > 0:
      return tf1.train.replica_device_setter(
          ps_tasks=self.num_ps_tasks, ps_device='/job:%s' % self.ps_job_name,
          worker_device=self.worker_device + '/device:CPU:0',
          ps_strategy=cluster.GreedyBySize(self.num_ps_tasks))
    if self.num_clones == 1 or self.replicated:
      return self.clone_device(0)
    return '/device:CPU:0'

  @property
  def replicated(self):
    """A copy of the variables per clone, gradients all-reduced."""
    return self.variable_update in ('replicated', 'collective_all_reduce')

  @property
  def collective(self):
    """Replicated across the workers of a cluster."""
    return self.variable_update == 'collective_all_reduce'

  @property
  def all_reduce_group_size(self):
    """Devices that sum each gradient: every clone of every worker."""
    return self.num_clones * (self.num_replicas if self.collective else 1)

  def inputs_device(self):
    return self.worker_device + '/device:CPU:0'

  def optimizer_device(self):
    if not self.exact or self.num_ps_tasks > 0 or self.num_clones > 1:
      return self.worker_device + '/device:CPU:0'
    return self.clone_device(0)

  def device_function(self, clone_index=None):
    """The one placement rule: a device function sending variable ops to the
    variables device and every other op to clone `clone_index`'s device (to
    the optimizer's device when None). Use with `tf.compat.v1.device`."""
    variables = self.variables_device()
    compute = (self.optimizer_device() if clone_index is None
               else self.clone_device(clone_index))

    def place(op):
      if op.type in VARIABLE_OP_TYPES:
        return variables(op) if callable(variables) else _merged(variables, op)
      for tensor in op.inputs:  # a resource is used where it lives
        if (tensor.dtype == tf.resource and
            tensor.op.type in VARIABLE_OP_TYPES and tensor.op.device):
          return _merged(tensor.op.device, op)
      return _merged(compute, op)

    return place

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


def pad_batch(tensor, num_clones):
  """Pads a batch smaller than `num_clones` by repeating its last row, so no
  clone gets an empty slice (TensorFlow's oneDNN CPU convolution fails on an
  empty batch). Returns (padded tensor, real batch size): drop the outputs
  past the real size."""
  size = tf.shape(tensor)[0]
  missing = tf.maximum(num_clones - size, 0)
  padding = tf.repeat(tensor[-1:], missing, axis=0)
  return tf.concat([tensor, padding], axis=0), size


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


class _DivertedCollection(list):
  """A collection list that reads as what it was built with and sends every
  addition to `sink` instead."""

  def __init__(self, visible, sink):
    super().__init__(visible)
    self._sink = sink

  def append(self, item):
    self._sink.append(item)

  def extend(self, items):
    self._sink.extend(items)

  def insert(self, index, item):
    self._sink.append(item)

  def __iadd__(self, items):
    self._sink.extend(items)
    return self


class CloneRecord(object):
  """What `clone_context` observed while a clone was built."""

  def __init__(self):
    self.scope = ''
    self.losses = []
    self.update_ops = []
    self.copies = None


@contextlib.contextmanager
def _name_scope(name):
  """Opens name scope `name` and yields its full name; '' stays where it is."""
  if not name:
    yield tf1.get_default_graph().get_name_scope()
    return
  with tf1.name_scope(name) as scope:
    yield scope.rstrip('/')


def _shared_variable_creator(tower_scope, clone_index, shared, copies=None):
  """Shares variables that are not made by `get_variable` across clones.

  `get_variable` (slim, tf.compat.v1.layers, optimizer slots, moving
  averages) names variables by variable scope and clones share them through
  `reuse`. Keras layers, metrics and `tf.Variable` name theirs by name scope
  and know no reuse: a clone would make its own copy ('clone_1/dense/
  kernel'). So the first clone makes them under the name one device would
  give them (the clone's name scope taken out) and the later clones get the
  first clone's, in creation order (the same model code creates them in the
  same order), or their `copies` when replicated.
  """
  position = [0]

  def creator(next_creator, **kwargs):
    graph = tf1.get_default_graph()
    scope = graph.get_name_scope()
    if not tower_scope or not (scope == tower_scope or
                               scope.startswith(tower_scope + '/')):
      return next_creator(**kwargs)  # get_variable: shared by reuse
    if clone_index == 0:
      outer = tower_scope.rpartition('/')[0]
      inner = scope[len(tower_scope):].lstrip('/')
      one_device = '/'.join(n for n in (outer, inner) if n)
      with graph.name_scope(one_device + '/' if one_device else ''):
        variable = next_creator(**kwargs)
      shared.append(variable)
      return variable
    if position[0] >= len(shared):
      raise ValueError(
          'clone %d creates more variables outside get_variable than clone 0 '
          "(at '%s/%s'); the model must build the same layers on every "
          'device' % (clone_index, scope, kwargs.get('name')))
    variable = shared[position[0]]
    position[0] += 1
    shape = kwargs.get('shape')
    if shape is not None and not variable.shape.is_compatible_with(shape):
      raise ValueError("clone %d's variable '%s/%s' has shape %s, clone 0's "
                       "'%s' has %s" % (clone_index, scope, kwargs.get('name'),
                                        shape, variable.op.name,
                                        variable.shape))
    return copies.of(variable) if copies is not None else variable

  return creator


def _tf1_reads(next_creator, **kwargs):
  """TF 1's reference variables, for which TF-Slim was written, are read
  through one snapshot on their own device (`v.value().device == v.device`,
  which TF-Slim's tests check); TF 2's resource variables read afresh
  wherever they are read. A caching device on the variable's own device
  gives resource variables TF 1's reads; a caching device given is kept."""
  if kwargs.get('caching_device') is None:
    kwargs['caching_device'] = _where_it_lives
  return next_creator(**kwargs)


@contextlib.contextmanager
def clone_context(config, clone_index, shared_variables=None):
  """Builds clone `clone_index`: device function, name scope, variable reuse
  and the clone's own view of the graph collections. Yields a CloneRecord
  that holds, after the block, the clone's full name scope, its losses and
  its update ops.

  Re-entering the root variable scope *object* (not its name) makes
  TensorFlow restore its default-name counters on exit, so every clone gets
  the same auto-named scopes ('BatchNorm', 'OptimizeLoss', ...) and reuses the
  first clone's variables instead of creating 'BatchNorm_1'.

  `shared_variables`: one list per set of clones, for the variables that
  Keras layers, metrics and `tf.Variable` create (see
  `_shared_variable_creator`).

  Collections: the clone sees an empty LOSSES collection (so a model_fn's
  `get_total_loss()` is its own slice's loss plus the regularization losses);
  its losses are appended after it. With `config.exact`, clones after the
  first see UPDATE_OPS as the first clone left it and their own update ops
  are kept out of it, so whatever wires UPDATE_OPS into a train op runs the
  first clone's updates only, and their summaries are dropped (the first
  clone's stand for all); TF-Slim's semantics keep both, as TF-Slim does.

  Replicated (`config.replicated`), clones after the first use their own
  copies of the trainable variables (`record.copies`, see
  `all_reduce.Copies`).
  """
  graph = tf1.get_default_graph()
  record = CloneRecord()
  losses = graph.get_collection_ref(tf1.GraphKeys.LOSSES)
  earlier_losses = list(losses)
  del losses[:]
  summaries = graph.get_collection_ref(tf1.GraphKeys.SUMMARIES)
  summaries_before = len(summaries)
  updates = graph.get_collection_ref(tf1.GraphKeys.UPDATE_OPS)
  updates_before = len(updates)
  first_only = config.exact and clone_index > 0  # UPDATE_OPS and summaries
  if first_only:
    # Layers add update ops with graph.add_to_collection / get_collection_ref
    # (...).append, which read the graph's collection dict directly; no
    # public API can intercept an addition, so the list object is swapped for
    # one that diverts additions, and the original is put back below.
    graph._collections[tf1.GraphKeys.UPDATE_OPS] = _DivertedCollection(  # pylint: disable=protected-access
        updates, record.update_ops)
  root = tf1.get_variable_scope()
  reuse = True if clone_index > 0 else root.reuse
  copies = None
  if config.replicated and clone_index > 0:
    copies = Copies(config, clone_index)
    record.copies = copies.by_original
  try:
    with tf1.variable_scope(root, reuse=reuse, auxiliary_name_scope=False,
                            custom_getter=copies and copies.getter):
      with _name_scope(config.clone_scope(clone_index)) as scope:
        record.scope = scope + '/' if scope else ''
        creator = _shared_variable_creator(
            scope if config.num_clones > 1 else '', clone_index,
            shared_variables if shared_variables is not None else [], copies)
        reads = (contextlib.nullcontext() if config.exact
                 else tf1.variable_creator_scope(_tf1_reads))
        with tf1.device(config.device_function(clone_index)), \
            tf1.variable_creator_scope(creator), reads:
          yield record
  finally:
    record.losses = list(losses)
    losses[:] = earlier_losses + record.losses
    if first_only:
      graph._collections[tf1.GraphKeys.UPDATE_OPS] = updates  # pylint: disable=protected-access
      del summaries[summaries_before:]
    else:
      record.update_ops.extend(updates[updates_before:])


def create_clones(config, model_fn, args=None, kwargs=None,
                  require_full_clones=True):
  """Calls `model_fn(*args, **kwargs)` once per clone; returns a list of Clone.

  TF-Slim's semantics: every clone gets args and kwargs as given (TF-Slim's
  `clone_fn(batch_queue)` dequeues a batch of its own) and weighs
  1/num_clones. `config.exact`: tensors in args/kwargs are split along axis
  0 (see `split_batch`; with `require_full_clones=False`, as in evaluation, a
  batch smaller than the clone count is allowed) and each clone weighs its
  share of the batch.
  """
  args, kwargs = list(args or []), dict(kwargs or {})
  if config.exact:
    with tf.device(config.inputs_device()):
      pieces, weights = split_batch((args, kwargs), config.num_clones,
                                    require_full_clones)
  else:
    pieces = [(args, kwargs)] * config.num_clones
    weights = [1.0 / config.num_clones] * config.num_clones
  clones, shared = [], []
  for i in range(config.num_clones):
    with clone_context(config, i, shared) as record:
      clone_args, clone_kwargs = pieces[i]
      outputs = model_fn(*clone_args, **clone_kwargs)
    clones.append(Clone(outputs, record.scope, config.clone_device(i),
                        weight=weights[i], losses=record.losses,
                        update_ops=record.update_ops, copies=record.copies))
  return clones


@contextlib.contextmanager
def _absolute_name_scope(scope):
  if not scope:
    yield
    return
  with tf1.get_default_graph().name_scope(scope):  # 'clone_0/': absolute
    yield


def _summary_op_name(tag):
  return re.sub(r'[^A-Za-z0-9_./-]', '_', tag).lstrip('_./-') or 'summary'


def scalar_summary(tag, tensor):
  """A scalar summary tagged exactly `tag`, whatever name scope is open.

  `tf.compat.v1.summary.*` tag a summary with its op's name, which TensorFlow
  makes unique (a histogram of variable 'a/w' becomes 'a/w_1'); the summary
  ops themselves take any tag, so the tag is the one asked for.
  """
  return _summary(tf.raw_ops.ScalarSummary, 'tags', tag, tensor)


def histogram_summary(tag, tensor):
  """A histogram summary tagged exactly `tag` (see `scalar_summary`)."""
  return _summary(tf.raw_ops.HistogramSummary, 'tag', tag, tensor)


def _summary(summary_op, tag_arg, tag, tensor):
  """summary_op(<tag_arg>=tag) on float32 values, outside any name scope,
  added to the SUMMARIES collection."""
  with tf1.get_default_graph().name_scope(''):
    summary = summary_op(**{tag_arg: tag}, values=tf.cast(tensor, tf.float32),
                         name=_summary_op_name(tag))
  tf1.add_to_collection(tf1.GraphKeys.SUMMARIES, summary)
  return summary


def _losses_of(clone):
  if clone.losses is not None:
    return list(clone.losses)
  return [l for l in tf1.losses.get_losses()
          if l.op.name.startswith(clone.scope)]


def _clone_loss(clone, index, regularization_losses):
  """Clone `index`'s share-weighted loss (plus regularization, given once)
  and its own loss (None when it has no loss)."""
  with _absolute_name_scope(clone.scope), tf.device(clone.device):
    losses = _losses_of(clone)
    clone_loss = tf.add_n(losses, name='clone_loss') if losses else None
    parts = []
    if clone_loss is not None:
      parts.append(clone_loss if _is_one(clone.weight) else tf.multiply(
          clone_loss, tf.cast(clone.weight, clone_loss.dtype),
          name='scaled_clone_loss'))
    if regularization_losses:
      parts.append(tf.add_n(regularization_losses, name='regularization_loss'))
    loss = tf.add_n(parts) if parts else None
  if clone_loss is not None:
    scalar_summary('losses/clone_%d' % index, clone_loss)
  return loss, clone_loss


def _is_one(weight):
  return not tf.is_tensor(weight) and weight == 1.0


def combine_gradients(clone_grads, on_variables_device=True):
  """Sums per-clone lists of (gradient, variable) into one list, on the
  variables' device (else where the caller is, as TF-Slim sums). Gradients
  must already carry their clone's weight."""
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
      with (tf.device(var.device) if on_variables_device
            else contextlib.nullcontext()):
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


def optimize_clones(clones, optimizer, regularization_losses=None,
                    config=None, **kwargs):
  """Computes each clone's gradients and combines them.

  Returns (total_loss, grads_and_vars): total_loss is the weighted sum of
  the clone losses (each clone's `weight`: 1/num_clones, TF-Slim's, or its
  share of the batch) plus the regularization losses (added once, to the
  first clone's), and each variable's summed gradients. kwargs go to
  `optimizer.compute_gradients` (e.g. var_list); `config` (the
  DeploymentConfig) says how they meet across workers. Replicated
  clones (built with copies) get all-reduced gradients instead: the pairs of
  every clone, clone 0's first, for one `apply_gradients` under
  `replica_slots(clones)` (as `build_train_op` does).
  """
  replicated = ((config is not None and config.replicated) or
                any(clone.copies is not None for clone in clones))
  if regularization_losses is None:
    regularization_losses = tf1.losses.get_regularization_losses()
    if replicated:
      # Each clone's copies add their own regularizers; the model's are clone
      # 0's (the others' copies are equal, and the gradients differentiate by
      # clone 0's only), so the reported loss counts the model once.
      others = tuple(c.scope for c in clones[1:] if c.scope)
      regularization_losses = [l for l in regularization_losses
                               if not l.op.name.startswith(others)]
  if replicated:
    originals = kwargs.pop('var_list', None)
    if originals is None:
      originals = (tf1.trainable_variables() + tf1.get_collection(
          tf1.GraphKeys.TRAINABLE_RESOURCE_VARIABLES))
  losses, clone_grads = [], []
  for i, clone in enumerate(clones):
    loss, _ = _clone_loss(clone, i, regularization_losses if i == 0 else None)
    if loss is None and not replicated:
      continue
    if replicated:
      # Every clone joins every all-reduce, with zeros if it has no loss.
      kwargs['var_list'] = [(clone.copies or {}).get(v.ref(), v)
                            for v in originals]
    with _absolute_name_scope(clone.scope), tf.device(clone.device):
      clone_grads.append(optimizer.compute_gradients(
          loss if loss is not None else tf.constant(0.0), **kwargs))
    if loss is not None:
      losses.append(loss)
  if not losses:
    raise ValueError('the model_fn added no loss (tf.compat.v1.losses.*) and '
                     'there are no regularization losses')
  total_loss = tf.add_n(losses, name='total_loss')
  if replicated:
    return total_loss, all_reduce_gradients(clones, clone_grads, config)
  return total_loss, combine_gradients(
      clone_grads, on_variables_device=config is not None and config.exact)


def build_train_op(config, clones, optimizer, global_step=None,
                   var_list=None, summarize_gradients=False,
                   moving_averages=None, moving_average_variables=None):
  """The train op of built clones: TF-Slim's steps after create_clones.

  One apply of the combined (or, replicated, all-reduced) gradients, the first
  clone's batch-norm updates (UPDATE_OPS), then, with `moving_averages` (an
  ExponentialMovingAverage), their update from the applied values, of
  `moving_average_variables` (default: the model variables, as TF-Slim).
  Returns (train_op, total_loss); the train op evaluates to the total loss.
  `var_list` may be a callable, called here (the clones exist by now).
  """
  if callable(var_list):
    var_list = var_list()
  with tf1.device(config.device_function()):
    if global_step is None:
      global_step = tf1.train.get_or_create_global_step()
    total_loss, grads_and_vars = optimize_clones(clones, optimizer,
                                                 config=config,
                                                 var_list=var_list)
    if summarize_gradients:
      copies = {c.ref() for clone in clones for c in
                (clone.copies or {}).values()}
      for grad, var in grads_and_vars:
        if var.ref() not in copies:
          tf1.summary.histogram(var.op.name + '/gradient',
                                tf.convert_to_tensor(grad))
    # One call for all clones' pairs when replicated: non-slot state (Adam's
    # beta powers, the global step) advances once per step.
    with replica_slots(clones):
      apply_op = optimizer.apply_gradients(grads_and_vars,
                                           global_step=global_step)
    # The first clone's batch-norm updates: exact, the only ones in the
    # collection; TF-Slim's, selected by its scope, as TF-Slim's deploy.
    update_ops = tf1.get_collection(
        tf1.GraphKeys.UPDATE_OPS, None if config.exact else clones[0].scope)
    with tf.control_dependencies(update_ops + [apply_op]):
      train_op = tf.identity(total_loss, name='train_op')
    if moving_averages is not None:
      if moving_average_variables is None:
        moving_average_variables = slim.get_model_variables()
      with tf.control_dependencies([train_op]):
        averaged = moving_averages.apply(moving_average_variables)
      with tf.control_dependencies([averaged]):
        train_op = tf.identity(total_loss, name='train_op_after_averages')
  return train_op, total_loss


def deploy(config, model_fn, args=None, kwargs=None, optimizer=None,
           summarize_gradients=False, var_list=None, moving_averages=None,
           moving_average_variables=None, rewrite_graph=None):
  """TF-Slim's model_deploy.deploy: clones, one apply, summaries.

  The train op ('train_op') is `build_train_op`'s (one apply of the combined
  gradients, the first clone's batch-norm updates, then the optional moving
  averages) and returns the total loss ('total_loss'). Without an
  optimizer, only the clones and the total loss are built (eval). The
  summary op ('summary_op') merges the summaries there were, the first
  clone's and the losses'; built, like the losses, on the optimizer's device
  (the CPU), never a clone's GPU. `rewrite_graph()`, when given, runs once
  the clones and their losses are built and before any gradient, under the
  variables' device function (where TF-Slim's train script rewrites the
  graph for quantization-aware training).
  """
  summaries_before = set(tf1.get_collection(tf1.GraphKeys.SUMMARIES))
  with tf1.device(config.device_function()):
    global_step = tf1.train.get_or_create_global_step()
  clones = create_clones(config, model_fn, args, kwargs,
                         require_full_clones=optimizer is not None)
  if rewrite_graph is not None:
    with tf1.device(config.device_function()):
      rewrite_graph()
  others = tuple(clone.scope for clone in clones[1:])
  with tf1.device(config.device_function()):
    regularization = tf1.losses.get_regularization_losses()
    if regularization:
      scalar_summary('losses/regularization', tf.add_n(regularization))
    train_op = None
    if optimizer is not None:
      train_op, total_loss = build_train_op(
          config, clones, optimizer, global_step, var_list=var_list,
          summarize_gradients=summarize_gradients,
          moving_averages=moving_averages,
          moving_average_variables=moving_average_variables)
    else:
      losses = [_clone_loss(clone, i, regularization if i == 0 else None)[0]
                for i, clone in enumerate(clones)]
      total_loss = tf.add_n([l for l in losses if l is not None],
                            name='total_loss')
    scalar_summary('losses/total', total_loss)
    summaries = [s for s in tf1.get_collection(tf1.GraphKeys.SUMMARIES)
                 if s in summaries_before or not s.op.name.startswith(others)]
    summary_op = tf1.summary.merge(summaries, name='summary_op')
  return DeployedModel(train_op, summary_op, total_loss, clones)
