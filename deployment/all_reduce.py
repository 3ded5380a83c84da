"""The all-reduce layouts: a copy of the trainable variables per clone,
gradients summed by collective all-reduces instead of on one variables
device.

`variable_update='replicated'` (tf_cnn_benchmarks' name) changes only where
the weights live and how gradients meet: every clone trains its own copy of
each trainable variable on its device, the clones' gradients are summed by a
collective all-reduce (NCCL on GPUs, a ring on CPUs) and each clone applies
the sum to its copy, so no weight crosses devices. Clone 0's variables keep
the one-device names and are the ones saved; the copies ('clone_<k>/<name>')
and their optimizer slots are local variables initialized from clone 0's, so
checkpoints, moving averages and fine-tuning see one model.

`variable_update='collective_all_reduce'` is the same layout across the
workers of a cluster without parameter servers (tf_cnn_benchmarks' and
MultiWorkerMirrored's synchronous data parallelism): each worker keeps the
variables on its own clone 0 device (the copies on its other clones), and
each step one collective all-reduce per variable over the cluster's gRPC
runtime sums the gradients of every clone of every worker (group size =
clones x workers, each gradient divided by the worker count, so the step is
the one one device takes on all the workers' batches together). Every
replica applies the same sum, so all stay equal. The chief alone
initialises or restores the variables; `broadcast_from_chief` then sends its
values to every worker (runner/estimator.py runs it when the session
starts), and the chief alone writes checkpoints and summaries, with one
model's names. Batch norm keeps the one-machine rule: the statistics saved
are those of the chief's first clone. A step (or the broadcast) that waits
longer than `collective_timeout_secs` for a worker (killed, hung, not
started) fails (`step_options`: the deadline is the session run's, not each
op's), so no task waits forever.

model_deploy's clone mechanism calls this module at three points, and only
when `DeploymentConfig.replicated`: `Copies`, a clone's copies of clone 0's
variables while the clone is built (`clone_context`); `all_reduce_gradients`,
where the clones' gradients meet (`optimize_clones`); and `replica_slots`,
around the one apply (`build_train_op`). The runner needs the two names that
concern a cluster, `collective_deployment` and `broadcast_from_chief`.
Nothing here imports model_deploy: a deployment is any object with
DeploymentConfig's attributes.
"""
import contextlib
import itertools
import weakref

import tensorflow as tf

import tf_compat  # noqa: F401

tf1 = tf.compat.v1


def _read_where_it_lives(variable):
  """A read of `variable` placed by the variable alone: no device function or
  colocation of the caller (a copy's device, a slot's colocation with its
  copy) pins it elsewhere, which TensorFlow's placer would refuse for a
  resource read."""
  # Graph.colocate_with: tf1.colocate_with is the same, with a deprecation
  # notice on the terminal.
  with tf1.get_default_graph().colocate_with(None, ignore_existing=True):
    return tf.identity(variable.read_value())


class Copies(object):
  """Clone `clone_index`'s copies of clone 0's trainable variables (the
  replicated layout): 'clone_<k>/<name>' on the clone's device, local
  variables (out of checkpoints, TRAINABLE_ and MODEL_VARIABLES) whose
  initial value is clone 0's current value."""

  def __init__(self, config, clone_index):
    self.device = config.clone_device(clone_index)
    self.prefix = 'clone_%d/' % clone_index
    self.by_original = {}

  def of(self, variable):
    """The copy of `variable` if it is trainable, else `variable` (shared)."""
    if not isinstance(variable, tf.Variable):
      return variable  # partitioned: shared, as in the parameter-server layout
    key = variable.ref()
    if key in self.by_original:
      return self.by_original[key]
    graph = tf1.get_default_graph()
    if key not in {v.ref() for v in graph.get_collection(
        tf1.GraphKeys.TRAINABLE_VARIABLES)}:
      return variable  # batch-norm statistics: clone 0's updates only
    initial = _read_where_it_lives(variable)
    # device(None) drops the deployment's device function, which would send
    # the copy to the variables device.
    with graph.colocate_with(None, ignore_existing=True), tf1.device(None), \
        tf1.device(self.device), graph.name_scope(''):
      copy = tf1.Variable(initial, name=self.prefix + variable.op.name,
                          trainable=False, dtype=variable.dtype.base_dtype,
                          collections=[tf1.GraphKeys.LOCAL_VARIABLES],
                          use_resource=True)
    self.by_original[key] = copy
    return copy

  def getter(self, getter, *args, **kwargs):
    """A variable-scope custom getter (called with getter= as a keyword):
    `get_variable` reuses clone 0's variable, the clone gets its copy."""
    return self.of(getter(*args, **kwargs))


_collective_keys = itertools.count(1)  # process-wide: no two groups collide
# Keys of collectives across workers. Every worker builds the same graphs in
# the same order, so one count per process gives every worker the same keys
# for the same tensors; it is never reset because a server caches a key's
# shape for its lifetime (a second graph reusing keys fails with "Shape
# mismatch in the collective instance"). Offset from the in-machine keys.
_cluster_key_count = itertools.count(1 << 24)
# Per graph: its collective_all_reduce deployment (kept out of the graph's
# collections, which a MetaGraph export serialises).
_graph_deployment = weakref.WeakKeyDictionary()


def _cluster_keys():
  return _cluster_key_count


def collective_deployment(graph=None):
  """The collective_all_reduce DeploymentConfig whose all-reduce `graph`
  holds (None: none): the runner then broadcasts the chief's variables."""
  return _graph_deployment.get(graph or tf1.get_default_graph())


def all_reduce_gradients(clones, clone_grads, config=None):
  """Sums the clones' gradients of each variable with a collective
  all-reduce; every clone receives the sum for its own variable.

  `clone_grads[i]` is clone i's (gradient, variable) list, in one order for
  all clones. Returns every clone's (summed gradient, variable) pairs,
  clone 0's first, without repeating a variable two clones share. Sparse
  gradients are made dense (collectives take dense tensors). Each device
  launches its all-reduces in one order, each after the previous one (last
  variable first, roughly the order backprop yields them), so the clones
  never wait on each other in different orders (NCCL needs it).

  With a collective_all_reduce `config` the group is every clone of every
  worker (`config.all_reduce_group_size`) and each gradient is divided by
  the worker count first: the sum is the gradient of all workers' batches.
  """
  num_clones = len(clones)
  cross_worker = config is not None and config.collective
  group_size, scale = num_clones, None
  keys = _collective_keys
  if cross_worker:
    group_size = config.all_reduce_group_size
    keys = _cluster_keys()
    if config.num_replicas > 1:
      scale = 1.0 / config.num_replicas
    _graph_deployment[tf1.get_default_graph()] = config
  group_key = next(keys)
  reduced = [[None] * len(grads) for grads in clone_grads]
  previous = [[] for _ in clones]
  for j in reversed(range(len(clone_grads[0]))):
    column = [grads[j] for grads in clone_grads]
    if all(grad is None for grad, _ in column):
      continue
    instance_key = next(keys)
    for i, (grad, var) in enumerate(column):
      device = tf.DeviceSpec.from_string(clones[i].device or '')
      with tf1.name_scope('%sall_reduce/%s' % (clones[i].scope, var.op.name)), \
          tf.device(clones[i].device), tf.control_dependencies(previous[i]):
        grad = (tf.zeros_like(var) if grad is None
                else tf.convert_to_tensor(grad))
        if scale is not None:
          grad = grad * tf.cast(scale, grad.dtype)
        total = tf.raw_ops.CollectiveReduceV2(
            input=grad, group_size=group_size, group_key=group_key,
            instance_key=instance_key, ordering_token=[], merge_op='Add',
            final_op='Id', timeout_seconds=0.0,  # step_options: why
            communication_hint='nccl' if device.device_type == 'GPU'
            else 'auto')
      reduced[i][j] = (total, var)
      previous[i] = [total]
  pairs, seen = [], set()
  for clone_pairs in reduced:
    for pair in clone_pairs:
      if pair is not None and pair[1].ref() not in seen:
        seen.add(pair[1].ref())
        pairs.append(pair)
  return pairs


def step_options(config):
  """The RunOptions of every session run that holds a cross-worker
  collective of a collective_all_reduce `config` (a training step, the
  broadcast from the chief): the run fails with DeadlineExceededError once
  it has waited `config.collective_timeout_secs`, and the cancellation ends
  the collectives it holds.

  The deadline is the step's, not each op's: in TensorFlow 2.21 a
  collective op built with timeout_seconds > 0 starts a watchdog on a thread
  of the process's unbounded 'collective_ops' work queue that sleeps out the
  whole timeout even when the op completes in a millisecond
  (BaseCollectiveExecutor::CompleteParamsAsync and ::ExecuteAsync, "TODO:
  Share the timeout watchdog thread among collectives"), so each op held two
  threads for the timeout and a worker grew by two threads per variable per
  step until thread creation failed (docs/cluster.md, "Threads").
  Cancelling the step instead (gRPC deadline -> master -> every RunGraph
  -> the ops' cancellation manager) needs no thread per op."""
  return tf1.RunOptions(
      timeout_in_ms=int(round(config.collective_timeout_secs * 1000)))


_BROADCAST_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64,
                     tf.int32, tf.int64)


def broadcast_from_chief(config, variables):
  """One op that gives every worker of a collective_all_reduce cluster the
  chief's values of `variables` (this worker's, in graph order): an
  all-reduce to which the chief gives its values and every other worker
  zeros, assigned on every worker. Run it once all workers' sessions are up
  (it waits for them, at most `config.collective_timeout_secs`), after the
  chief initialised or restored, before the local initialisers (the clones'
  copies read clone 0's variables)."""
  keys = _cluster_keys()
  groups = {}  # a worker's device ('/device:CPU:0') -> group key
  assigns = []
  for variable in variables:
    dtype = variable.dtype.base_dtype
    if dtype not in _BROADCAST_DTYPES:
      raise ValueError("variable '%s' (%s) cannot be broadcast from the chief "
                       'by a collective op (numbers only)' % (
                           variable.op.name, dtype.name))
    spec = tf.DeviceSpec.from_string(variable.device or '')
    local = spec.replace(job=None, replica=None, task=None).to_string()
    if local not in groups:
      groups[local] = next(keys)
    with tf1.get_default_graph().colocate_with(None, ignore_existing=True), \
        tf1.device(None), \
        tf1.device(variable.device), tf1.name_scope(
            'broadcast_from_chief/' + variable.op.name):
      if config.is_chief:
        value = variable.read_value()
      else:  # not initialised here: nothing may read it
        value = tf.zeros(variable.shape, dtype)
      total = tf.raw_ops.CollectiveReduceV2(
          input=value, group_size=config.num_replicas,
          group_key=groups[local], instance_key=next(keys), ordering_token=[],
          merge_op='Add', final_op='Id',
          timeout_seconds=0.0)  # step_options: why
      assigns.append(variable.assign(total, read_value=False))
  return tf.group(*assigns, name='broadcast_from_chief')


@contextlib.contextmanager
def replica_slots(clones):
  """Optimizer slots made in this block for the clones' copies (named after
  them: 'clone_1/w/Momentum') are local variables initialized from clone
  0's slot ('w/Momentum', created first by the same apply_gradients), so a
  checkpoint holds one model's slots and a restore re-syncs the copies'."""
  renames = [(copy.op.name + '/', original.op.name + '/')
             for clone in clones if clone.copies
             for original, copy in ((ref.deref(), c)
                                    for ref, c in clone.copies.items())]
  graph = tf1.get_default_graph()

  def creator(next_creator, **kwargs):
    name = (kwargs.get('name') or '').rstrip('/')
    for prefix, original_prefix in renames:
      if name.startswith(prefix):
        original_name = original_prefix + name[len(prefix):]
        originals = [v for v in graph.get_collection(
            tf1.GraphKeys.GLOBAL_VARIABLES) if v.op.name == original_name]
        if not originals:
          raise ValueError("slot '%s' of a replicated copy has no "
                           "counterpart '%s'" % (name, original_name))
        kwargs['initial_value'] = _read_where_it_lives(originals[0])
        kwargs['collections'] = [tf1.GraphKeys.LOCAL_VARIABLES]
        break
    return next_creator(**kwargs)

  with tf1.variable_creator_scope(creator):
    yield
