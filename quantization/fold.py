"""Batch norm folded into the convolution or fully-connected layer before it,
as TF 1.15's tf.contrib.quantize folds it (the reference for what is
computed and what the new ops are called):

  multiplier = gamma / sqrt(variance + epsilon)     (<layer>/BatchNorm_Fold/)
  bias       = beta - mean * multiplier             (<layer>/BatchNorm_Fold/bias)
  output     = layer(input, weights * multiplier) + bias
                                  (<layer>/mul_fold, <Op>_Fold, <layer>/add_fold)

In an eval graph mean and variance are the moving statistics. In a
training graph they are the batch's (the variance without Bessel's
correction), and the folded weights are scaled by sigma_batch / sigma_moving
first (`correction_mult`) while the layer's output is scaled back by
sigma_moving / sigma_batch (`post_conv_mul`, plus a zero `correction_add`):
the weights that get fake-quantized are the ones evaluation will use
(gamma / sigma_moving), and training still normalises with the batch's
statistics. With `freeze_batch_norm_delay` steps passed, training switches to
the moving statistics (the correction becomes an offset) and stops updating
them.

Only fused batch norms are folded (tf_slim's `batch_norm`, which the zoo's
networks use, fuses on 4-D inputs and on fully-connected outputs through a
reshape); an unfused one is refused by the caller.
"""
import tensorflow as tf

import tf_compat  # noqa: F401
from quantization import graph_edits
from quantization import patterns

tf1 = tf.compat.v1
FUSED_BATCH_NORMS = ('FusedBatchNorm', 'FusedBatchNormV3')
LAYER_TYPES = 'Conv2D|DepthwiseConv2dNative|MatMul'
GRADIENT = 'ZooFoldedBatchNormGrad'


@tf.RegisterGradient(GRADIENT)
def _folded_batch_norm_grad(op, unused_grad_y, grad_mean, grad_variance,
                            *unused):
  """The gradient of a training batch norm whose output the fold replaced:
  only its batch mean and (Bessel-corrected) batch variance are used, and
  TensorFlow's own gradient ignores theirs."""
  x = op.inputs[0]
  n = tf.cast(tf.size(x) / tf.size(grad_mean), tf.float32)
  grad_x = grad_mean / n + 2.0 * grad_variance * (x - op.outputs[1]) / (n - 1)
  return [grad_x] + [None] * (len(op.inputs) - 1)


class _Patterns(object):
  """The shapes a fused batch norm after a layer takes (see
  patterns.py: whatever the reference matches is folded)."""

  def __init__(self):
    self.input = patterns.Op('*')
    self.weight = patterns.Op('*')
    self.gamma, self.beta = patterns.Op('*'), patterns.Op('*')
    self.mean, self.variance = patterns.Op('*'), patterns.Op('*')
    self.layer = patterns.Op(LAYER_TYPES, inputs=[self.input, self.weight])
    self.batch_to_space = patterns.Op('BatchToSpaceND', inputs=[
        self.layer, patterns.Op('*'), patterns.Op('*')])
    layer_identity = patterns.Op('Identity', inputs=[
        patterns.Oneof([self.batch_to_space, self.layer])])
    layer_output = patterns.Oneof([layer_identity, self.layer,
                                   self.batch_to_space])
    matmul_reshape = patterns.Op('Reshape', inputs=[layer_output,
                                                    patterns.Op('*')])
    self.batch_norm = patterns.Op('|'.join(FUSED_BATCH_NORMS), inputs=[
        patterns.Oneof([matmul_reshape, layer_output]), self.gamma,
        self.beta, self.mean, self.variance])
    self.output_reshape = patterns.Op('Reshape', inputs=[self.batch_norm,
                                                         patterns.Op('*')])
    self.with_identity = patterns.Op('Identity', inputs=[
        self.batch_norm, self.output_reshape])
    self.plain = patterns.Oneof([self.output_reshape, self.batch_norm])
    self.moving = patterns.Op('*')
    self.decay = patterns.Op('*')
    self.moving_sub = patterns.Op('Sub', inputs=[self.moving,
                                                 self.batch_norm])
    self.moving_mul = patterns.Op('Mul', inputs=[self.moving_sub,
                                                 self.decay])


class FoldedBatchNorm(object):
  """One layer + fused batch norm the graph holds."""

  def __init__(self, **fields):
    self.__dict__.update(fields)


def find(graph):
  """The fused batch norms after a layer, in the reference's order."""
  p = _Patterns()
  moving = [(m.op(p.moving_sub), m.tensor(p.decay))
            for m in patterns.matches(p.moving_mul, graph)]
  found, seen = [], set()
  for root in (p.with_identity, p.plain):
    for match in patterns.matches(root, graph):
      fold = _describe(graph, p, match, moving)
      if fold is not None and fold.layer_op not in seen:
        seen.add(fold.layer_op)
        found.append(fold)
  return found


def _describe(graph, p, match, moving):
  layer_op = match.op(p.layer)
  bn_op = match.op(p.batch_norm)
  output = bn_op.outputs[0]
  if layer_op.type == 'MatMul':
    reshape = match.op(p.output_reshape)
    if reshape is None:  # matched again with its reshape
      return None
    output = reshape.outputs[0]
  if not output.consumers():
    return None
  fold = FoldedBatchNorm(
      layer_op=layer_op, bn_op=bn_op, output=output,
      input=match.tensor(p.input), weight=match.tensor(p.weight),
      gamma=match.tensor(p.gamma), beta=match.tensor(p.beta),
      epsilon=bn_op.get_attr('epsilon'),
      batch_to_space=match.op(p.batch_to_space),
      moving_mean=None, moving_variance=None, decay_mean=None,
      decay_variance=None)
  if bn_op.get_attr('is_training'):
    # TensorFlow's gradient of the batch norm ignores its batch-statistics
    # outputs, which the folded graph computes with.
    bn_op._set_attr('_gradient_op_type',  # pylint: disable=protected-access
                    tf1.AttrValue(s=GRADIENT.encode()))
    fold.mean = bn_op.outputs[1]
    scope = bn_op.name.rpartition('/')[0]
    with graph.as_default(), graph.name_scope(scope + '/'):
      n = tf.cast(tf.size(match.tensor(p.layer)) / tf.size(fold.mean),
                  tf.float32)
      # The op's variance has Bessel's correction (for the moving
      # average); the batch was normalised without it.
      fold.variance = tf.multiply(bn_op.outputs[2], (n - 1) / n,
                                  name='Undo_Bessel_Correction')
    for sub_op, decay in moving:
      if sub_op.inputs[1].name == bn_op.outputs[1].name:
        fold.moving_mean, fold.decay_mean = sub_op.inputs[0], decay
      if sub_op.inputs[1].name == bn_op.outputs[2].name:
        fold.moving_variance, fold.decay_variance = sub_op.inputs[0], decay
  else:
    fold.mean = match.tensor(p.mean)
    fold.variance = match.tensor(p.variance)
  return fold


def fold_batch_norms(graph, is_training, freeze_batch_norm_delay=None):
  """Folds every fused batch norm that follows a conv, depthwise conv or
  fully-connected layer (module docstring)."""
  for fold in find(graph):
    scope = fold.layer_op.name.rpartition('/')[0] + '/'
    with graph.as_default(), graph.name_scope(scope):
      with graph.name_scope(scope + 'BatchNorm_Fold/'):
        multiplier = fold.gamma * tf1.rsqrt(fold.variance + fold.epsilon)
        bias = tf.subtract(fold.beta, fold.mean * multiplier, name='bias')
        scale = recip = offset = None
        if is_training:
          scale, recip, offset = _corrections(graph, fold,
                                              freeze_batch_norm_delay)
        if fold.layer_op.type == 'DepthwiseConv2dNative':
          shape = fold.weight.shape.as_list()[2:4]
          multiplier = tf.reshape(multiplier, shape, name='scale_reshape')
          if scale is not None:
            scale = tf.reshape(scale, shape, name='correction_reshape')
      weights = fold.weight
      if scale is not None:
        weights = tf.multiply(scale, weights, name='correction_mult')
      weights = tf.multiply(weights, multiplier, name='mul_fold')
      output = _clone_layer(fold.layer_op, fold.input, weights,
                            fold.batch_to_space)
      if recip is not None:
        output = tf.multiply(recip, output, name='post_conv_mul')
        output = tf.add(output, offset, 'correction_add')
      output = tf.add(output, bias, name='add_fold')
      if not graph_edits.reroute(output, fold.output):
        raise ValueError('folding the batch norm after %s failed: %s has no '
                         'consumers' % (fold.layer_op.name, fold.output.name))


def _corrections(graph, fold, freeze_delay):
  """(scale, reciprocal, offset) of the training fold (module docstring)."""
  if fold.moving_mean is None or fold.moving_variance is None:
    raise ValueError('the batch norm after %s updates no moving statistics '
                     'the fold can find' % fold.layer_op.name)
  with graph.name_scope('batch_norm_correction'):
    recip_sigma_mv = tf1.rsqrt(fold.moving_variance + fold.epsilon)
    recip_sigma = tf1.rsqrt(fold.variance + fold.epsilon)
    scale = tf.identity(tf.divide(recip_sigma_mv, recip_sigma,
                                  name='scale_compute'),
                        name='correction_scale')
    recip = tf1.reciprocal(scale, name='reciprocal_compute')
    offset = tf.multiply(fold.gamma, fold.mean * recip_sigma -
                         fold.moving_mean * recip_sigma_mv,
                         name='offset_compute')
    if freeze_delay is None:
      return scale, recip, tf.zeros(offset.shape, name='correction_offset')
    frozen = tf.greater_equal(graph_edits.quantization_step(graph),
                              freeze_delay,
                              name='use_moving_average')
    for decay, name in ((fold.decay_mean, 'freeze_moving_mean'),
                        (fold.decay_variance, 'freeze_moving_var')):
      consumers = list(decay.consumers())
      frozen_decay = tf1.cond(frozen, lambda: tf.constant(0.0),
                              lambda d=decay: tf.identity(d), name=name)
      graph_edits.reroute(frozen_decay, decay, consumers)
    recip = tf1.cond(frozen, lambda: tf.ones(scale.shape),
                     lambda: tf.identity(recip), name='correction_recip')
    offset = tf1.cond(frozen, lambda: tf.identity(offset),
                      lambda: tf.zeros(offset.shape),
                      name='correction_offset')
  return scale, recip, offset


def _clone_layer(op, inputs, weights, batch_to_space):
  """`op` again, on `inputs` and `weights`, named '<type name>_Fold'."""
  name = op.name.split('/')[-1] + '_Fold'
  if op.type == 'Conv2D':
    return tf1.nn.conv2d(inputs, weights, strides=op.get_attr('strides'),
                         padding=op.get_attr('padding'),
                         data_format=op.get_attr('data_format').decode(),
                         dilations=op.get_attr('dilations'), name=name)
  if op.type == 'MatMul':
    return tf.matmul(inputs, weights, transpose_a=op.get_attr('transpose_a'),
                     transpose_b=op.get_attr('transpose_b'), name=name)
  output = tf1.nn.depthwise_conv2d_native(
      inputs, weights, strides=op.get_attr('strides'),
      padding=op.get_attr('padding'), name=name)
  if batch_to_space is not None:  # atrous: the input's SpaceToBatch is kept
    output = tf1.batch_to_space_nd(
        output, batch_to_space.inputs[1], batch_to_space.inputs[2],
        name=batch_to_space.name.split('/')[-1] + '_Fold')
  return output
