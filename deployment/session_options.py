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
    AMX). bfloat16 has float32's exponent range, so gradients need no loss
    scaling. On a CPU with neither AVX-512 nor AVX-NE-CONVERT TensorFlow
    leaves the graph in float32, without a word; on one with AVX-512 but no
    bfloat16 units it computes in bfloat16 by conversions. `configure` says
    either, once per process, in one line on stderr (`bfloat16_note`).
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
import os
import sys

import tf_compat  # noqa: F401  (first: tf-slim on TF 2.21)
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

tf1 = tf.compat.v1

PRECISIONS = ('float32', 'bfloat16', 'float16')
_ON = rewriter_config_pb2.RewriterConfig.ON
_OFF = rewriter_config_pb2.RewriterConfig.OFF
# Where cpu_description reads the CPU (a test points it at a file of its own).
CPUINFO = '/proc/cpuinfo'
_bfloat16_noted = False  # configure's note is said once per process


def cpu_description(path=None):
  """The CPU's model name, core count and what it has for bfloat16, from
  `path` (CPUINFO): 'amx' (AMX-BF16 tiles) and 'avx512_bf16' are bfloat16
  units; 'avx512f' and 'avx_ne_convert' only convert bfloat16, and are what
  TensorFlow's oneDNN requires to compute in bfloat16 at all; 'x86': a
  flags line (x86's) was there to tell."""
  model, flags, x86 = 'unknown CPU', set(), False
  try:
    with open(path or CPUINFO) as f:
      for line in f:
        name, _, value = line.partition(':')
        if name.strip() == 'model name':
          model = value.strip()
        elif name.strip() == 'flags':
          flags, x86 = set(value.split()), True
  except OSError:
    pass
  return {'model': model, 'cores': os.cpu_count(), 'x86': x86,
          'amx': 'amx_bf16' in flags, 'avx512_bf16': 'avx512_bf16' in flags,
          'avx512f': 'avx512f' in flags,
          'avx_ne_convert': 'avx_ne_convert' in flags}


def bfloat16_compute(cpu=None):
  """How --precision=bfloat16 computes on `cpu` (cpu_description()):
  'units' on AMX or AVX512-BF16; 'converted' on AVX-512 or AVX-NE-CONVERT
  without them (TensorFlow's rewrite runs, oneDNN converts to and from
  float32 around float32 arithmetic); 'float32' on any other x86 CPU,
  where TensorFlow skips the rewrite (its IsDataTypeSupportedByOneDNNOnThisCPU);
  'unknown' without x86 flags to tell."""
  cpu = cpu or cpu_description()
  if not cpu.get('x86', True):
    return 'unknown'
  if cpu['amx'] or cpu['avx512_bf16']:
    return 'units'
  if cpu['avx512f'] or cpu['avx_ne_convert']:
    return 'converted'
  return 'float32'


def bfloat16_note(cpu=None):
  """One line on what --precision=bfloat16 does on `cpu` if not what it
  says, or None on a CPU with bfloat16 units (or none known)."""
  cpu = cpu or cpu_description()
  compute = bfloat16_compute(cpu)
  if compute == 'float32':
    return ('--precision=bfloat16: this CPU (%s) has no bfloat16 units '
            '(neither AMX nor AVX512-BF16) and TensorFlow does not rewrite '
            'the graph on it: this run computes in float32' % cpu['model'])
  if compute == 'converted':
    return ('--precision=bfloat16: this CPU (%s) has no bfloat16 units '
            '(neither AMX nor AVX512-BF16): this run computes in bfloat16 by '
            'conversions on %s, with no bfloat16 arithmetic to gain from' % (
                cpu['model'], 'AVX-512' if cpu['avx512f'] else
                'AVX-NE-CONVERT'))
  return None


def _note_bfloat16_once():
  """bfloat16_note() on stderr, the first time only: a run's sessions
  (training, precise batch norm, ...) share the one line."""
  global _bfloat16_noted  # pylint: disable=global-statement
  if _bfloat16_noted:
    return
  _bfloat16_noted = True
  note = bfloat16_note()
  if note:
    program = os.path.splitext(os.path.basename(sys.argv[0] or 'python'))[0]
    print('%s: warning: %s' % (program, note), file=sys.stderr, flush=True)


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
  if precision == 'bfloat16':
    _note_bfloat16_once()
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
