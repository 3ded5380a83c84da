"""Fake quantization inserted into a graph, as TF 1.15's tf.contrib.quantize
inserts it, so that TF-Slim's quantization-aware checkpoints restore here by
name and the same graph trains and evaluates (the facts below are the
reference's; tests/test_quantization.py holds us to its names and values):

  * weights of every Conv2D, DepthwiseConv2dNative and MatMul (after batch
    norm folding: quantization/fold.py): `<layer scope>/weights_quant/min|max`,
    8 bits, narrow range, the range the weights' own min/max (with 0 in
    it), written each training step;
  * the layer's activation (Relu, Relu6, Identity, or its bias add when
    nothing follows): `act_quant`, a moving average of each batch's min/max
    (decay 0.999, zero-debiased, initial range [0, 6]);
  * residual adds: the bias add before the add (`conv_quant`), the add
    itself when no activation follows (`add_quant`), an add after the
    activation (`post_activation_bypass_quant`), and any other Add or Mul
    fed by a quantized tensor (`activation_<type>_quant`), initial range
    [-6, 6];
  * `quant_delay`: before that many runs of the graph (counted by the
    `fake_quantization_step` variable) the fake quant is bypassed.
"""
import contextlib
import re

import tensorflow as tf
# TF 1's assign_moving_average (zero-debiased, as the reference's EMA): not
# in the public API of TF 2.21, where tf_slim's batch_norm takes it too.
from tensorflow.python.training import moving_averages

import tf_compat  # noqa: F401
from quantization import fold
from quantization import graph_edits
from quantization import patterns

tf1 = tf.compat.v1

LAYER_TYPES = ('Conv2D', 'MatMul', 'DepthwiseConv2dNative')
ACTIVATION_TYPES = ('Relu', 'Relu6', 'Identity')
RELU_TYPES = ('Relu', 'Relu6')
FAKE_QUANT_TYPES = ('FakeQuantWithMinMaxVars', 'FakeQuantWithMinMaxArgs',
                    'FakeQuantWithMinMaxVarsPerChannel')
# The ops an Add or Mul is looked through to (quantize: the other adds).
PASS_THROUGH_TYPES = ('Reshape', 'Identity', 'BatchToSpaceND',
                      'SpaceToBatchND', 'MaxPool', 'Max')
ARITHMETIC_TYPES = ('Add', 'AddV2', 'Mul')


# The name scopes of a model's clones (deployment/model_deploy's 'clone_0',
# 'clone_1', ...) while `shared_by_clones` is open.
_CLONE_SCOPES = []


@contextlib.contextmanager
def shared_by_clones(scopes):
  """Within it, the rewrite gives the layers built once per clone, under
  name scopes `scopes` (the first clone's first), ONE set of ranges named
  as one device's graph names them (`LeNet/conv1/act_quant/min`, not
  `clone_1/LeNet/...`), which an eval graph restores. The first clone's
  quantizers write them and every clone's fake quant reads what the first
  wrote this step: as batch norm's moving statistics in model_deploy, one
  deterministic update per step at the decay one device has (clones that
  each updated them would race and decay N times a step); the weights'
  range is the same on every clone (the folded weights use the moving
  statistics)."""
  _CLONE_SCOPES[:] = [s.rstrip('/') for s in scopes if s]
  try:
    yield
  finally:
    del _CLONE_SCOPES[:]


def _clone_of(prefix):
  """(prefix without its clone scope, the clone's index); (prefix, 0)
  outside clones."""
  for i, scope in enumerate(_CLONE_SCOPES):
    if prefix.startswith(scope + '/'):
      return prefix[len(scope) + 1:], i
  return prefix, 0


class _Layer(object):
  def __init__(self, layer, weight, activation, bypass=None,
               post_bypass=None, bias_add=None):
    self.layer, self.weight, self.activation = layer, weight, activation
    self.bypass, self.post_bypass, self.bias_add = bypass, post_bypass, bias_add


class _Patterns(object):
  """The layer shapes the reference quantizes (its _FindLayersToQuantize):

      weights | folded weights (Mul)
              -> conv | fc -> [BatchToSpaceND] -> [post_conv_mul, correction]
              -> [bias add | folded bias add] -> [bypass add] -> activation
              -> [post-activation bypass add]"""

  def __init__(self):
    op = patterns.Op
    variable = op('Variable|VariableV2')
    partition = op('Identity', inputs=[variable])
    concat = op('ConcatV2', inputs=[partition, '*', '*'])
    self.weight_identity = op('Identity', inputs=[
        patterns.Oneof([partition, concat, variable])])
    self.weight_resource = op('ReadVariableOp')
    self.weight_folded = op('Mul')
    self.layer = op('|'.join(LAYER_TYPES), inputs=[
        op('*'), patterns.Oneof([self.weight_identity, self.weight_resource,
                                 self.weight_folded])], ordered=False)
    batch_to_space = op('BatchToSpaceND', inputs=[self.layer, op('*'),
                                                  op('*')])
    layer_output = patterns.Oneof([batch_to_space, self.layer])
    self.separable = op('|'.join(LAYER_TYPES), inputs=[
        patterns.Oneof([layer_output]), op('*')], ordered=False)
    folded_mul = op('Mul', inputs=[op('*'), layer_output], ordered=False)
    correction = op('Add|AddV2', inputs=[folded_mul, op('*')],
                    ordered=False)
    self.folded_bias_add = op('Add|AddV2', inputs=[correction, op('*')],
                              ordered=False)
    bn_identity = op('Identity', inputs=[self.folded_bias_add])
    self.bias_add = op('Add|AddV2|BiasAdd', inputs=[layer_output, '*'],
                       ordered=False)
    self.bypass = op('Add|AddV2', inputs=[
        patterns.Oneof([self.bias_add, self.folded_bias_add, bn_identity]),
        '*'], ordered=False)
    self.activation = op('|'.join(ACTIVATION_TYPES) + '|Identity', inputs=[
        patterns.Oneof([self.bias_add, self.folded_bias_add, bn_identity,
                        self.bypass, self.layer])])
    self.post_bypass = op('Add|AddV2', inputs=['*', self.activation],
                          ordered=False)
    self.final = patterns.Oneof([self.bias_add, self.folded_bias_add])

  def weight(self, match, folded=True):
    return _first(match.tensor(self.weight_identity),
                  match.tensor(self.weight_resource),
                  match.tensor(self.weight_folded) if folded else None)

  def bias_add_op(self, match):
    return _first(match.op(self.bias_add), match.op(self.folded_bias_add))


def _first(*found):
  """The first of `found` that is not None."""
  return next((f for f in found if f is not None), None)


def find_layers(graph):
  """The layers to quantize, largest match first (see _Patterns)."""
  p = _Patterns()
  layers, seen = [], set()

  def add(layer):
    if layer.layer not in seen:
      seen.add(layer.layer)
      layers.append(layer)

  for m in patterns.matches(p.post_bypass, graph):
    add(_Layer(m.op(p.layer), p.weight(m), m.op(p.activation),
               m.op(p.bypass), m.op(p.post_bypass), p.bias_add_op(m)))
  for m in patterns.matches(p.activation, graph):
    activation = m.op(p.activation)
    if m.op(p.layer) not in seen and not _feeds_a_batch_norm(activation):
      add(_Layer(m.op(p.layer), p.weight(m), activation, m.op(p.bypass),
                 None, p.bias_add_op(m)))
  for m in patterns.matches(p.final, graph):
    add(_Layer(m.op(p.layer), p.weight(m), p.bias_add_op(m)))
  for m in patterns.matches(p.separable, graph):
    add(_Layer(m.op(p.layer), p.weight(m, folded=False), m.op(p.layer)))
  return layers


def _feeds_a_batch_norm(activation):
  """conv -> Identity -> fused batch norm: the batch norm's statistics, not
  an activation (the reference skips it)."""
  if activation.type != 'Identity' or len(activation.outputs) != 1:
    return False
  consumers = activation.outputs[0].consumers()
  return len(consumers) == 1 and consumers[0].type in fold.FUSED_BATCH_NORMS


def quantize(graph, is_training, weight_bits=8, activation_bits=8,
             ema_decay=0.999, quant_delay=None, symmetric=False):
  """Inserts the fake quantization (module docstring) into `graph`."""
  consumers_of = _consumers_map(graph)  # as the graph was before
  quantized = set()
  ranges = {}  # the first clone's (min, max) by name (shared_by_clones)

  def insert(context, name, producer, consumers=None, **kwargs):
    _insert(graph, context, name, producer,
            consumers_of(producer) if consumers is None else consumers,
            is_training, quant_delay=quant_delay, ema_decay=ema_decay,
            symmetric=symmetric, ranges=ranges, **kwargs)

  for layer in find_layers(graph):
    context = _scope_of(layer.layer.name)
    if layer.weight is not None:
      insert(context, 'weights_quant', layer.weight.op, moving_avg=False,
             narrow_range=True, bits=weight_bits)
    add_context = context
    if layer.bypass is not None:
      add_context = _scope_of(context)
    if layer.activation is not None:
      insert(add_context, 'act_quant', layer.activation, bits=activation_bits,
             init_min=0.0)
      quantized.add(layer.activation)
    if layer.bypass is not None:
      insert(context, 'conv_quant', layer.bias_add, bits=activation_bits)
      quantized.add(layer.bias_add)
      if not any(c.type in ACTIVATION_TYPES
                 for c in consumers_of(layer.bypass)):
        insert(add_context, 'add_quant', layer.bypass, bits=activation_bits)
        quantized.add(layer.bypass)
    if layer.post_bypass is not None:
      consumers = consumers_of(layer.post_bypass)
      if not any(c.type in RELU_TYPES for c in consumers):
        insert(_scope_of(layer.post_bypass.name),
               'post_activation_bypass_quant', layer.post_bypass,
               bits=activation_bits)
        quantized.add(layer.post_bypass)
  # Any other Add or Mul fed (through pass-through ops) by a quantized
  # tensor, and not followed by its own Relu, is quantized too.
  consumers_now = _consumers_map(graph)
  for op in graph.get_operations():
    if _needs_quant(op, quantized):
      name, op_type = _tf115_dropout_name(op) or (op.name, op.type)
      insert(name, 'activation_%s_quant' % op_type, op,
             consumers=consumers_now(op), bits=activation_bits)


def _needs_quant(op, quantized):
  if op in quantized or not _arithmetic(op):
    return False
  if len(op.outputs) == 1 and len(op.outputs[0].consumers()) == 1:
    if op.outputs[0].consumers()[0].type in RELU_TYPES:
      return False
  for tensor in op.inputs:
    source = tensor.op
    while source.type in PASS_THROUGH_TYPES:
      source = source.inputs[0].op
    # The quant_delay's cond: a Merge in TF 1's control flow, an If in TF 2's.
    if (source.type == 'FakeQuantWithMinMaxVars' or
        source.name.find('delayed_quant/Merge') > 0 or
        source.name.endswith('/delayed_quant')):
      return True
    if _arithmetic(source):
      if any(_needs_quant(t.op, quantized) for t in source.inputs):
        return True
  return False


# Dropout (training graphs only): TF 1.15 computed x * (1 / keep_prob) *
# cast(keep_mask), ops `dropout/mul` and `dropout/mul_1`, and the reference
# quantized both, naming their ranges after them; TF 2 computes the same
# values as Mul(x, 1 / keep_prob) then SelectV2(keep_mask, that, 0). That
# SelectV2 is TF 1.15's second Mul, and both take TF 1.15's names, so that a
# TF-Slim QAT training checkpoint resumes here with every range.
def _tf115_dropout_name(op):
  """(TF 1.15's op name, its type) for an op of TF 2's dropout, else None."""
  if _is_dropout_mask(op):
    return _scope_of(op.name) + '/mul_1', 'Mul'
  consumers = op.outputs[0].consumers()
  if (op.type == 'Mul' and len(consumers) == 1 and
      _is_dropout_mask(consumers[0]) and consumers[0].inputs[1].op is op):
    return _scope_of(op.name) + '/mul', 'Mul'
  return None


def _is_dropout_mask(op):
  return (op.type == 'SelectV2' and op.inputs[0].op.type == 'GreaterEqual'
          and _scope_of(op.name).split('/')[-1].startswith('dropout'))


def _arithmetic(op):
  """An Add or Mul, as the reference saw them (with TF 1.15's dropout)."""
  return op.type in ARITHMETIC_TYPES or _is_dropout_mask(op)


def _consumers_map(graph):
  """op -> the ops that read any of its outputs, as the graph is now."""
  consumers = {}
  for op in graph.get_operations():
    for tensor in op.inputs:
      consumers.setdefault(tensor.op, set()).add(op)
  return lambda op: consumers.get(op, set())


def _scope_of(name):
  match = re.search(r'^(.*)/([^/]+)', name)
  return match.group(1) if match else ''


def _followed_by_fake_quant(tensor):
  consumers = list(tensor.consumers())
  while consumers:
    consumer = consumers.pop()
    if consumer.type in FAKE_QUANT_TYPES:
      return True
    if consumer.type in ('Reshape', 'Identity'):
      for output in consumer.outputs:
        consumers.extend(output.consumers())
  return False


def _insert(graph, context, name, producer, consumers, is_training,
            moving_avg=True, init_min=-6.0, init_max=6.0, bits=8,
            symmetric=False, ema_decay=0.999, quant_delay=None,
            narrow_range=False, ranges=None):
  """A fake quant of `producer`'s first output, named `context/name`, read
  by `consumers` instead of it."""
  prefix = name if not context else context + '/' + name
  scope = graph.get_name_scope()
  if scope and prefix.startswith(scope + '/'):
    prefix = prefix[len(scope) + 1:]
  inputs = producer.outputs[0]
  if _followed_by_fake_quant(inputs):
    return
  shared, clone = _clone_of(prefix)
  with graph.as_default():
    if clone == 0:  # the ranges' owner: one device's names
      quant = _fake_quant(inputs, shared, is_training, moving_avg, init_min,
                          init_max, ema_decay, bits, narrow_range, symmetric,
                          ranges)
      prefix = shared
    elif ranges is not None and shared in ranges:
      low, high = ranges[shared]
      with graph.name_scope(prefix + '/'):
        quant = tf.quantization.fake_quant_with_min_max_vars(
            inputs, low, high, num_bits=bits, narrow_range=narrow_range)
    else:
      raise ValueError('clone %d quantizes %s, which the first clone does '
                       'not' % (clone, shared))
    if quant_delay and quant_delay > 0:
      active = tf.greater_equal(graph_edits.quantization_step(graph),
                                quant_delay,
                                name=prefix + '/activate_quant')
      quant = tf1.cond(active, lambda: quant, lambda: inputs,
                       name=prefix + '/delayed_quant')
  if consumers:
    if graph_edits.reroute(quant, inputs, consumers) < len(consumers):
      raise ValueError('no input of %s was quantized' % ', '.join(
          sorted(c.name for c in consumers)))


def _fake_quant(inputs, prefix, is_training, moving_avg, init_min, init_max,
                ema_decay, bits, narrow_range, symmetric, ranges=None):
  """FakeQuantWithMinMaxVars of `inputs` in variable scope `prefix` (its
  `min` and `max`): in training, the batch's range (with 0 in it) is
  written to them (weights) or averaged into them (activations)."""
  with tf1.variable_scope(None, default_name=prefix, values=[inputs]) as vs:
    vs.set_partitioner(None)
    ends = []
    for end, value in (('min', init_min), ('max', init_max)):
      ends.append(tf1.get_variable(
          end, shape=[], initializer=tf1.constant_initializer(value),
          collections=[tf1.GraphKeys.GLOBAL_VARIABLES], trainable=False,
          aggregation=tf.VariableAggregation.MEAN))
    low, high = ends
    if is_training:
      batch_min = tf.reduce_min(inputs, name='BatchMin')
      batch_max = tf.reduce_max(inputs, name='BatchMax')
      if symmetric:
        ratio = -1.0 if narrow_range else -((1 << bits) - 2) / (1 << bits)
        range_min = tf.minimum(batch_min, batch_max / ratio)
        range_max = tf.maximum(batch_max, batch_min * ratio)
      else:  # TFLite needs 0 in the range
        range_min = tf.minimum(batch_min, 0.0)
        range_max = tf.maximum(batch_max, 0.0)
      if moving_avg:
        low = moving_averages.assign_moving_average(low, range_min, ema_decay,
                                              name='AssignMinEma')
        high = moving_averages.assign_moving_average(high, range_max, ema_decay,
                                               name='AssignMaxEma')
      else:
        low = tf1.assign(low, range_min, name='AssignMinLast')
        high = tf1.assign(high, range_max, name='AssignMaxLast')
    if ranges is not None:
      ranges[prefix] = (low, high)
    return tf.quantization.fake_quant_with_min_max_vars(
        inputs, low, high, num_bits=bits, narrow_range=narrow_range)
