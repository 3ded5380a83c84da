"""Quantization-aware training on TensorFlow 2 graphs: TF 1.15's
`tf.contrib.quantize` API (gone with tf.contrib), computing what it computes
and naming its variables as it does, so TF-Slim's quantized checkpoints
restore here and ours restore there.

    from quantization import create_training_graph, create_eval_graph
    create_training_graph(quant_delay=2000)  # after the loss, before the optimizer
    create_eval_graph()                      # after the network, eval or export

Batch norm is folded into the layer before it (quantization/fold.py), then
weights and activations are fake-quantized (quantization/rewrite.py). A
network with a layer the rewrite cannot quantize is refused with one line
naming the layer (`UnsupportedLayer`), before anything runs.
"""
import tensorflow as tf

import tf_compat  # noqa: F401
from quantization import fold
from quantization import rewrite

tf1 = tf.compat.v1
__all__ = ['create_training_graph', 'create_eval_graph',
           'experimental_create_training_graph',
           'experimental_create_eval_graph', 'UnsupportedLayer',
           'holds_ranges', 'check_checkpoint', 'quantized_output']


class UnsupportedLayer(ValueError):
  """A layer of the graph that the rewrite cannot quantize."""


def create_training_graph(input_graph=None, quant_delay=0):
  """Rewrites the training graph (default: the default graph) for
  quantization-aware training: batch norm folded with its training
  correction, weights and activations fake-quantized from the
  `quant_delay`-th run on (0: from the first)."""
  experimental_create_training_graph(input_graph, quant_delay=quant_delay)


def create_eval_graph(input_graph=None):
  """Rewrites an evaluation or export graph: batch norm folded with the
  moving statistics, fake quantization with the learned ranges."""
  experimental_create_eval_graph(input_graph)


def experimental_create_training_graph(input_graph=None, weight_bits=8,
                                       activation_bits=8, symmetric=False,
                                       quant_delay=0, freeze_bn_delay=None):
  """create_training_graph with the reference's other settings."""
  _rewrite(input_graph, True, weight_bits, activation_bits, symmetric,
           quant_delay, freeze_bn_delay)


def experimental_create_eval_graph(input_graph=None, weight_bits=8,
                                   activation_bits=8, symmetric=False,
                                   quant_delay=None):
  """create_eval_graph with the reference's other settings."""
  _rewrite(input_graph, False, weight_bits, activation_bits, symmetric,
           quant_delay, None)


def _rewrite(graph, is_training, weight_bits, activation_bits, symmetric,
             quant_delay, freeze_bn_delay):
  graph = graph or tf1.get_default_graph()
  done = [op.name for op in graph.get_operations()
          if op.type in rewrite.FAKE_QUANT_TYPES]
  if done:
    raise ValueError('the graph is already quantized (%s): rewrite it once'
                     % done[0])
  refuse_unsupported(graph)
  fold.fold_batch_norms(graph, is_training, freeze_bn_delay)
  rewrite.quantize(graph, is_training, weight_bits=weight_bits,
                   activation_bits=activation_bits, quant_delay=quant_delay,
                   symmetric=symmetric)
  unquantized = unquantized_layers(graph)
  if unquantized:
    raise UnsupportedLayer(
        'layer %s cannot be quantized: no fake quant reaches its weights, '
        'its shape is none tf.contrib.quantize rewrites (%d layer(s) in '
        'all)' % (unquantized[0], len(unquantized)))


# Layers that tf.contrib.quantize's patterns never quantize (it failed on
# them, or left them in float without a word): refused before any change.
_REFUSED = {
    'Conv2DBackpropInput': 'a transposed convolution (conv2d_transpose) '
                           'is not rewritten by the quantization',
    'Conv3D': 'a 3-D convolution is not rewritten by the quantization',
}


def refuse_unsupported(graph):
  """Raises UnsupportedLayer naming the first layer the rewrite cannot
  take: a transposed or 3-D convolution, or an unfused batch norm."""
  for op in graph.get_operations():
    if op.type in _REFUSED and not _is_gradient(op):
      raise UnsupportedLayer('layer %s cannot be quantized: %s' % (
          _layer_name(op), _REFUSED[op.type]))
    if op.name.endswith('/batchnorm/Rsqrt') or op.name.endswith(
        '/batchnorm_1/Rsqrt'):
      raise UnsupportedLayer('layer %s cannot be quantized: its batch norm '
                             'is not fused (use fused=True)' %
                             _layer_name(op))


def unquantized_layers(graph):
  """Names of the conv / depthwise / fully-connected ops of the forward
  graph whose output is used (not only for a folded batch norm's
  statistics) and whose weights reach them without a fake quant."""
  names = []
  for op in graph.get_operations():
    if op.type not in rewrite.LAYER_TYPES or _is_gradient(op):
      continue
    # A Size reads the shape alone (the fold's batch count n, an op of its
    # own when the batch size is not known when the graph is built).
    consumers = [c for c in op.outputs[0].consumers() if c.type != 'Size']
    if all(c.type in fold.FUSED_BATCH_NORMS or (
        c.type == 'Identity' and all(
            cc.type in fold.FUSED_BATCH_NORMS
            for cc in c.outputs[0].consumers())) for c in consumers):
      continue  # replaced by its fold; in training, the batch statistics
    if not _fake_quantized(op.inputs[1]):
      names.append(op.name)
  return names


def _fake_quantized(tensor):
  """Whether `tensor` is a fake quant's output, through identities and the
  quant_delay's cond."""
  pending, seen = [tensor.op], set()
  while pending:
    op = pending.pop()
    if op in seen:
      continue
    seen.add(op)
    if op.type in rewrite.FAKE_QUANT_TYPES:
      return True
    if op.type in ('Identity', 'Merge', 'Switch', 'If', 'StatelessIf'):
      pending.extend(t.op for t in op.inputs)
  return False


def quantized_output(tensor):
  """What stands for `tensor` in a rewritten graph: the fake quant that
  reads it (through the quant_delay's cond), else `tensor`. For an output
  fetched by name, which no op reads when the graph is rewritten."""
  for consumer in tensor.consumers():
    if consumer.type in rewrite.FAKE_QUANT_TYPES:
      for reader in consumer.outputs[0].consumers():
        if reader.name.endswith('/delayed_quant'):
          return reader.outputs[0]
      return consumer.outputs[0]
  return tensor


def holds_ranges(checkpoint):
  """Whether `checkpoint` (a file prefix) holds quantization ranges: it was
  trained with quantization (here with --quantize_delay, or by TF-Slim)."""
  return any(name.endswith('/weights_quant/min')
             for name, _ in tf.train.list_variables(checkpoint))


def check_checkpoint(checkpoint, flag='--quantize'):
  """Raises ValueError in one line when `checkpoint` has no ranges for a
  quantized graph to restore."""
  if not holds_ranges(checkpoint):
    raise ValueError("%s: checkpoint '%s' holds no quantization ranges "
                     '(weights_quant, act_quant): it was trained without '
                     '--quantize_delay; drop %s, or train it quantized' % (
                         flag, checkpoint, flag))


def _is_gradient(op):
  return op.name.startswith('gradients') or '/gradients' in op.name


def _layer_name(op):
  scope = op.name.rpartition('/')[0]
  for suffix in ('/BatchNorm/batchnorm', '/BatchNorm/batchnorm_1'):
    if scope.endswith(suffix):
      return scope[:-len(suffix)]
  return scope or op.name
