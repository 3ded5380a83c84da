"""Building blocks of the MobileNet v2/v3/EdgeTPU family.

The inverted residual block `expanded_conv` (1x1 expansion -> depthwise ->
linear 1x1 projection, with a skip connection when shapes allow), the
squeeze-and-excite gate of v3, hard-swish, and the channel rounding shared by
the family. Scope and tensor names ('expand', 'depthwise', 'project',
'squeeze_excite', '*_output') follow TF-Slim's published checkpoints; the
builder in nets/mobilenet/mobilenet.py turns the '*output' tensors into end points.
"""
import functools

import numpy as np
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401

tf1 = tf.compat.v1


def fixed_padding(inputs, kernel_size, rate=1):
  """Pads H and W as a stride-1 'SAME' convolution would, whatever the size.

  A 'VALID' convolution of the result then has the 'SAME' output size, with
  padding that does not depend on whether the input size is even.
  """
  padding = []
  for size in kernel_size[:2]:
    total = size + (size - 1) * (rate - 1) - 1  # effective (dilated) kernel - 1
    padding.append([total // 2, total - total // 2])
  return tf.pad(inputs, [[0, 0]] + padding + [[0, 0]])


def make_divisible(value, divisor, min_value=None):
  """`value` rounded to the nearest multiple of `divisor`, at least `min_value`.

  Rounding never loses more than 10% of `value`: hardware runs channel counts
  that are multiples of 8 fastest, and thinning should not starve a layer.
  """
  if min_value is None:
    min_value = divisor
  rounded = max(min_value, int(value + divisor / 2) // divisor * divisor)
  if rounded < 0.9 * value:
    rounded += divisor
  return int(rounded)


def split_divisible(num, num_ways, divisible_by=8):
  """Splits `num` into `num_ways` near-equal multiples of `divisible_by`."""
  if num % divisible_by or num / num_ways < divisible_by:
    raise ValueError('cannot split %d channels %d ways in multiples of %d'
                     % (num, num_ways, divisible_by))
  base = num // num_ways // divisible_by * divisible_by
  parts, total = [], 0
  for i in range(num_ways):
    part = base
    while total + part < num * (i + 1) / num_ways:
      part += divisible_by
    parts.append(part)
    total += part
  return parts


def expand_input_by_factor(factor, divisible_by=8):
  """An expanded_conv `expansion_size`: the input depth times `factor`."""
  return lambda num_inputs, **_: make_divisible(num_inputs * factor,
                                                divisible_by)


def hard_sigmoid(x):
  """relu6(x + 3) / 6, with the constant of the published v3 graphs."""
  return tf.nn.relu6(x + 3) * 0.16667


def hard_swish(x):
  """x * relu6(x + 3) / 6: a piecewise-linear swish (MobileNet v3)."""
  with tf1.name_scope('hard_swish'):
    return x * tf.nn.relu6(x + np.float32(3)) * np.float32(1. / 6.)


def split_conv(input_tensor, num_outputs, num_ways, scope, divisible_by=8,
               **kwargs):
  """A 1x1 convolution split into `num_ways` groups (group i sees input part i).

  Falls back to one plain convolution under `scope` when a group would get
  fewer than `divisible_by` channels on either side.
  """
  depth = input_tensor.get_shape().as_list()[3]
  if num_ways == 1 or min(depth // num_ways,
                          num_outputs // num_ways) < divisible_by:
    return slim.conv2d(input_tensor, num_outputs, [1, 1], scope=scope, **kwargs)
  inputs = tf.split(input_tensor,
                    split_divisible(depth, num_ways, divisible_by),
                    axis=3, name='split_' + scope)
  outputs = []
  sizes = split_divisible(num_outputs, num_ways, divisible_by)
  for i, (part, size) in enumerate(zip(inputs, sizes)):
    part_scope = '%s_part_%d' % (scope, i)
    net = slim.conv2d(part, size, [1, 1], scope=part_scope, **kwargs)
    outputs.append(tf.identity(net, part_scope + '_output'))
  return tf.concat(outputs, 3, name=part_scope + '_concat')


@slim.add_arg_scope
def expanded_conv(input_tensor,
                  num_outputs,
                  expansion_size=expand_input_by_factor(6),
                  stride=1,
                  rate=1,
                  kernel_size=(3, 3),
                  residual=True,
                  normalizer_fn=None,
                  split_projection=1,
                  split_expansion=1,
                  split_divisible_by=8,
                  expansion_transform=None,
                  depthwise_location='expansion',
                  depthwise_channel_multiplier=1,
                  endpoints=None,
                  use_explicit_padding=False,
                  padding='SAME',
                  inner_activation_fn=None,
                  depthwise_activation_fn=None,
                  project_activation_fn=tf.identity,
                  depthwise_fn=slim.separable_conv2d,
                  expansion_fn=split_conv,
                  projection_fn=split_conv,
                  scope=None):
  """Inverted residual block: expand (1x1) -> depthwise -> project (1x1).

  Args:
    input_tensor: [batch, height, width, depth] tensor.
    num_outputs: depth of the block's output.
    expansion_size: inner depth, or a callable `f(num_inputs=depth)` giving
      it. No expansion layer is built unless it exceeds the input depth.
    stride, rate, kernel_size: of the depthwise convolution.
    residual: add the input to the output when stride is 1 and depths match;
      or a callable `f(input_tensor=, output_tensor=)` returning the output.
    normalizer_fn: normalizer of every convolution in the block.
    split_projection, split_expansion, split_divisible_by: group the 1x1
      convolutions (see split_conv).
    expansion_transform: callable `f(expansion_tensor=, input_tensor=)` applied
      after the depthwise convolution, e.g. squeeze-and-excite.
    depthwise_location: 'expansion' (between expansion and projection),
      'input', 'output' or None (no depthwise convolution).
    depthwise_channel_multiplier: depthwise output channels per input channel.
    endpoints: optional dict receiving 'expansion_output', 'depthwise_output'
      and 'projection_output'.
    use_explicit_padding: pad explicitly and use 'VALID' convolutions.
    padding: padding when `use_explicit_padding` is False.
    inner_activation_fn: activation of expansion and depthwise convolutions;
      None keeps the arg_scope default.
    depthwise_activation_fn: activation of the depthwise convolution only;
      takes precedence over `inner_activation_fn`.
    project_activation_fn: activation of the projection (linear by default:
      the bottleneck must not lose information to a non-linearity).
    depthwise_fn, expansion_fn, projection_fn: layer functions; a custom
      expansion or projection function ignores the split_* arguments.
    scope: variable scope; 'expanded_conv', uniquified, by default.

  Returns:
    The block's output, named '<scope>/output'.
  """
  if depthwise_location not in (None, 'input', 'output', 'expansion'):
    raise TypeError('%r is unknown value for depthwise_location'
                    % (depthwise_location,))
  if use_explicit_padding:
    if padding != 'SAME':
      raise TypeError('use_explicit_padding requires padding="SAME", got %r'
                      % (padding,))
    padding = 'VALID'
  conv_defaults, dw_defaults = {}, {}
  if inner_activation_fn is not None:
    conv_defaults['activation_fn'] = inner_activation_fn
    dw_defaults['activation_fn'] = inner_activation_fn
  if depthwise_activation_fn is not None:
    dw_defaults['activation_fn'] = depthwise_activation_fn

  with tf1.variable_scope(scope, default_name='expanded_conv') as s, \
      tf1.name_scope(s.original_name_scope), \
      slim.arg_scope([slim.conv2d], **conv_defaults), \
      slim.arg_scope([slim.separable_conv2d], **dw_defaults):
    depthwise = functools.partial(
        depthwise_fn, num_outputs=None, kernel_size=kernel_size,
        depth_multiplier=depthwise_channel_multiplier, stride=stride,
        rate=rate, normalizer_fn=normalizer_fn, padding=padding,
        scope='depthwise')

    def apply_depthwise(net, **kwargs):
      if use_explicit_padding:
        net = fixed_padding(net, kernel_size, rate)
      net = tf.identity(depthwise(net, **kwargs), name='depthwise_output')
      if endpoints is not None:
        endpoints['depthwise_output'] = net
      return net

    input_tensor = tf.identity(input_tensor, 'input')
    input_depth = input_tensor.get_shape().as_list()[3]
    net = input_tensor
    if depthwise_location == 'input':
      net = apply_depthwise(net, activation_fn=None)

    inner_size = (expansion_size(num_inputs=input_depth)
                  if callable(expansion_size) else expansion_size)
    if inner_size > net.get_shape().as_list()[3]:
      if expansion_fn is split_conv:
        expansion_fn = functools.partial(
            split_conv, num_ways=split_expansion,
            divisible_by=split_divisible_by, stride=1)
      net = expansion_fn(net, inner_size, scope='expand',
                         normalizer_fn=normalizer_fn)
      net = tf.identity(net, 'expansion_output')
      if endpoints is not None:
        endpoints['expansion_output'] = net

    if depthwise_location == 'expansion':
      net = apply_depthwise(net)
    if expansion_transform:
      net = expansion_transform(expansion_tensor=net, input_tensor=input_tensor)

    if projection_fn is split_conv:
      projection_fn = functools.partial(
          split_conv, num_ways=split_projection,
          divisible_by=split_divisible_by, stride=1)
    net = projection_fn(net, num_outputs, scope='project',
                        normalizer_fn=normalizer_fn,
                        activation_fn=project_activation_fn)
    if endpoints is not None:
      endpoints['projection_output'] = net
    if depthwise_location == 'output':
      net = apply_depthwise(net, activation_fn=None)

    if callable(residual):
      net = residual(input_tensor=input_tensor, output_tensor=net)
    elif (residual and stride == 1 and
          net.get_shape().as_list()[3] == input_depth):
      net += input_tensor
    return tf.identity(net, name='output')


@slim.add_arg_scope
def squeeze_excite(input_tensor,
                   divisible_by=8,
                   squeeze_factor=3,
                   inner_activation_fn=tf.nn.relu,
                   gating_fn=tf.sigmoid,
                   squeeze_input_tensor=None,
                   pool=None):
  """Gates the channels of `input_tensor` by a function of its global context.

  Average pool -> 1x1 conv to depth/squeeze_factor (inner_activation_fn) ->
  1x1 conv back to the depth (gating_fn) -> multiply. Both convolutions have
  biases and no normalizer (scopes squeeze_excite/Conv and Conv_1).

  Args:
    input_tensor: the tensor to gate.
    divisible_by: the squeezed depth is rounded to a multiple of this.
    squeeze_factor: depth reduction of the inner layer.
    inner_activation_fn, gating_fn: activations of the two convolutions.
    squeeze_input_tensor: compute the gate from this tensor instead.
    pool: if set, average over pool x pool windows (stride pool) instead of
      globally, and resize the gate bilinearly back to the input size.

  Returns:
    input_tensor * gate.
  """
  with tf1.variable_scope('squeeze_excite'):
    if squeeze_input_tensor is None:
      squeeze_input_tensor = input_tensor
    input_size = input_tensor.shape.as_list()[1:3]
    height, width = squeeze_input_tensor.shape.as_list()[1:3]
    input_channels = squeeze_input_tensor.shape.as_list()[3]
    squeeze_channels = make_divisible(input_channels / squeeze_factor,
                                      divisor=divisible_by)
    if pool is not None and height is not None and height >= pool:
      pooled = tf.nn.avg_pool2d(squeeze_input_tensor, [pool, pool],
                                strides=[pool, pool], padding='VALID')
    elif height is None or width is None:
      # Same value as the full-window average pool, for unknown sizes.
      pooled = tf.reduce_mean(squeeze_input_tensor, [1, 2], keepdims=True)
    else:
      pooled = tf.nn.avg_pool2d(squeeze_input_tensor, [height, width],
                                strides=[1, 1], padding='VALID')
    squeeze = slim.conv2d(pooled, squeeze_channels, [1, 1],
                          normalizer_fn=None, activation_fn=inner_activation_fn)
    excite = slim.conv2d(squeeze, input_tensor.shape.as_list()[3], [1, 1],
                         normalizer_fn=None, activation_fn=gating_fn)
    if pool is not None:
      excite = tf1.image.resize_images(excite, input_size, align_corners=True)
    return input_tensor * excite
