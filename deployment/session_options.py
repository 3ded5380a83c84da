"""Numeric precision and thread pools of a training or evaluation session.

    config = session_options.configure(tf1.ConfigProto(), precision='bfloat16',
                                       intra_op_threads=2, inter_op_threads=1)

Precision is a whole-graph rewrite, not a change of the nets: grappler's
auto-mixed-precision pass casts the compute (convolutions, matmuls and the
element-wise ops between them) to a 16-bit type when the session runs the
graph, while the graph as built keeps float32 everywhere. So variables,
optimizer slots, the loss and batch-norm statistics stay float32, checkpoints
are the same as fp32 training's, and a bf16-trained checkpoint evaluates in
fp32 (and the other way round).
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
import tf_compat  # noqa: F401  (first: tf-slim on TF 2.21)
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
