"""Numeric precision and thread pools of a training or evaluation session.

    config = session_options.configure(tf1.ConfigProto(), precision='bfloat16',
                                       intra_op_threads=2, inter_op_threads=1)

Precision leaves the variables alone: variables, optimizer slots, the loss
and batch-norm statistics stay float32, checkpoints are the same as fp32
training's, and a bf16-trained checkpoint evaluates in fp32 (and the other
way round). Two mechanisms, combined for bfloat16 training:
  * grappler's auto-mixed-precision pass (the session config) casts the
    compute (convolutions, matmuls and the element-wise ops between them) of
    a float32 graph to a 16-bit type when the session runs it: what
    evaluation and export get, and what catches the float32 ops a network
    builds beyond its layers;
  * `network_in_precision` builds a training network in bfloat16 itself:
    images cast once, every weight cast once per step from its float32
    variable (a custom getter, names unchanged), batch norm fused on
    bfloat16 activations with float32 scale, offset and statistics, logits
    back to float32 for the loss (and the end points). The graph as built then holds no casts
    around batch norm for the rewrite to insert, and oneDNN's fusions
    (convolution + bias/batch norm + relu) see one type.
  * bfloat16: `auto_mixed_precision_onednn_bfloat16` (CPUs with AVX512-BF16 /
    AMX; grappler skips it, with a warning, on CPUs without). bfloat16 has
    float32's exponent range, so gradients need no loss scaling.
  * float16: `auto_mixed_precision` (NVIDIA GPUs, compute capability >= 7.0)
    plus dynamic loss scaling of the optimizer (`loss_scale_optimizer`):
    float16 gradients underflow without it. Untested here: no GPU.

Threads (0 = TensorFlow's default: both pools as large as the cores). In one
process TensorFlow 2.21 keeps ONE intra-op pool (the Eigen/oneDNN pool inside
an op) and ONE inter-op pool (ops run side by side), both created by the
first session (or eager context) with that session's settings; later
sessions' settings are silently ignored. With TF_OVERRIDE_GLOBAL_THREADPOOL=1
in the environment (read once per process) every CPU device of every session
gets its own intra-op pool of intra_op_threads: then N logical CPU devices
(--clone_on_cpu) mean N pools, N x intra_op_threads threads on the same cores.
The scripts make their session first, so their flags hold.
"""
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

tf1 = tf.compat.v1

PRECISIONS = ('float32', 'bfloat16', 'float16')
_ON = rewriter_config_pb2.RewriterConfig.ON
_OFF = rewriter_config_pb2.RewriterConfig.OFF


def check_precision(precision):
  """Raises ValueError naming the flag unless `precision` can run here."""
  if precision not in PRECISIONS:
    raise ValueError("--precision=%s is not one of %s" % (
        precision, ', '.join(PRECISIONS)))
  if precision == 'float16' and not tf.config.list_physical_devices('GPU'):
    raise ValueError('--precision=float16 needs a GPU and none is visible; '
                     'on a CPU use --precision=bfloat16')


def check_threads(intra_op_threads, inter_op_threads):
  for name, value in (('intra_op_threads', intra_op_threads),
                      ('inter_op_threads', inter_op_threads)):
    if value < 0:
      raise ValueError('--%s must be 0 (TensorFlow\'s default) or more, got %d'
                       % (name, value))


def configure(config=None, precision='float32', intra_op_threads=0,
              inter_op_threads=0):
  """Sets precision and threads on `config` (a ConfigProto, edited in place;
  a new one with soft placement when None) and returns it."""
  check_precision(precision)
  check_threads(intra_op_threads, inter_op_threads)
  if config is None:
    config = tf1.ConfigProto(allow_soft_placement=True)
  rewrites = config.graph_options.rewrite_options
  rewrites.auto_mixed_precision_onednn_bfloat16 = (
      _ON if precision == 'bfloat16' else _OFF)
  rewrites.auto_mixed_precision = _ON if precision == 'float16' else _OFF
  if intra_op_threads:
    config.intra_op_parallelism_threads = intra_op_threads
  if inter_op_threads:
    config.inter_op_parallelism_threads = inter_op_threads
  return config


def precision_of(config):
  """The precision `configure` set on `config`."""
  rewrites = config.graph_options.rewrite_options
  if rewrites.auto_mixed_precision_onednn_bfloat16 == _ON:
    return 'bfloat16'
  if rewrites.auto_mixed_precision == _ON:
    return 'float16'
  return 'float32'


def loss_scale_optimizer(optimizer, precision):
  """`optimizer` with dynamic loss scaling for float16 (steps whose gradients
  overflow are skipped and the scale halved); unchanged otherwise. The
  wrapper keeps compute_gradients / apply_gradients, so model_deploy's
  per-clone gradients and single apply work unchanged."""
  if precision != 'float16':
    return optimizer
  return tf1.mixed_precision.MixedPrecisionLossScaleOptimizer(
      optimizer, loss_scale='dynamic')


def network_in_precision(network_fn, precision):
  """`network_fn` (images -> (logits, end_points)) computing in bfloat16 with
  float32 variables when `precision` is bfloat16; `network_fn` itself
  otherwise (float32 builds the same graph as ever, float16 is the rewrite's).

  The network is built under a custom getter: a layer asking for a bfloat16
  weight gets the float32 variable of the same name, cast -- once for all
  the calls of the returned function, so N clones share one cast per weight
  and step. Batch norm asks for float32 parameters and statistics on
  bfloat16 inputs and gets them as they are. A layer regularizes the weight
  it was given, the cast: those losses are made float32, and a call that
  only reuses variables (a clone after the first) adds none, as float32's
  layers add none for a weight they did not create.
  """
  if precision != 'bfloat16':
    return network_fn
  casts = {}

  def cast_getter(getter, name, *args, **kwargs):
    dtype = kwargs.get('dtype')
    if dtype is None or tf.as_dtype(dtype) != tf.bfloat16:
      return getter(name, *args, **kwargs)
    variable = getter(name, *args, **dict(kwargs, dtype=tf.float32))
    key = variable.ref()
    if key not in casts:
      casts[key] = tf.cast(variable, tf.bfloat16)
    return casts[key]

  def network_in_bfloat16(images, **kwargs):
    losses = tf1.get_collection_ref(tf1.GraphKeys.REGULARIZATION_LOSSES)
    known_losses, known_variables = len(losses), len(tf1.global_variables())
    with tf1.variable_scope(tf1.get_variable_scope(), custom_getter=cast_getter,
                            auxiliary_name_scope=False):
      logits, end_points = network_fn(tf.cast(images, tf.bfloat16), **kwargs)
    added = losses[known_losses:]
    del losses[known_losses:]
    if len(tf1.global_variables()) > known_variables:
      losses.extend(tf.cast(loss, tf.float32) for loss in added)
    # What leaves the network is float32, as the float32 network's (casts
    # nothing reads are pruned when the graph runs).
    return tf.cast(logits, tf.float32), {
        name: tf.cast(value, tf.float32) if value.dtype == tf.bfloat16
        else value for name, value in end_points.items()}

  return network_in_bfloat16
