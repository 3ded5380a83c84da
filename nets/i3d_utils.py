"""Building blocks of the video networks I3D and S3D-G (TF-Slim's `i3d_utils`).

Inputs are clips [batch, frames, height, width, channels] ('NDHWC'; S3D-G
also takes 'NCDHW'). Scope names keep Inception v1's 2-D names
(`Conv2d_0b_3x3`, ...) so that an image checkpoint of Inception v1 can be
inflated into these networks, as in TF-Slim.
"""
import numpy as np
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401

tf1 = tf.compat.v1

DATA_FORMATS = ('NDHWC', 'NCDHW')


def check_data_format(data_format):
  if data_format not in DATA_FORMATS:
    raise ValueError("unknown data_format '%s' (known: %s)"
                     % (data_format, ', '.join(DATA_FORMATS)))
  return data_format


def check_clips(inputs, network):
  """Raises ValueError unless `inputs` is a 5-D tensor of clips."""
  rank = inputs.get_shape().ndims
  if rank is not None and rank != 5:
    raise ValueError('%s takes clips [batch, frames, height, width, channels] '
                     '(5-D); got a %d-D tensor of shape %s'
                     % (network, rank, inputs.get_shape().as_list()))


def center_initializer():
  """Initializes a temporal [k, 1, 1, c, c] kernel to the identity in time.

  The output at time t then starts as the input at time t, which separable
  (spatial then temporal) convolutions need to train well from scratch.
  """

  def initializer(shape, dtype=tf.float32, partition_info=None):
    del partition_info  # unused
    shape = [int(d) for d in shape]
    if dtype not in (tf.float32, tf.bfloat16):
      raise ValueError('center_initializer makes float32 or bfloat16 kernels, '
                       'not %s' % dtype)
    if len(shape) != 5:
      raise ValueError('center_initializer needs a 5-D kernel, got shape %s'
                       % shape)
    duration, height, width, channels_in, channels_out = shape
    if (height, width) != (1, 1):
      raise ValueError('center_initializer needs a pointwise (1x1) spatial '
                       'kernel, got shape %s' % shape)
    if channels_in != channels_out:
      raise ValueError('center_initializer needs as many input as output '
                       'channels, got shape %s' % shape)
    if duration % 2 == 0:
      raise ValueError('center_initializer needs an odd temporal kernel size, '
                       'got shape %s' % shape)
    kernel = np.zeros(shape, np.float32)
    kernel[duration // 2, 0, 0] = np.eye(channels_in, dtype=np.float32)
    return tf.constant(kernel, dtype=dtype)

  return initializer


def _triple(value):
  return list(value) if isinstance(value, (list, tuple)) else [value] * 3


@slim.add_arg_scope
def conv3d_spatiotemporal(inputs,
                          num_outputs,
                          kernel_size,
                          stride=1,
                          padding='SAME',
                          activation_fn=None,
                          normalizer_fn=None,
                          normalizer_params=None,
                          weights_regularizer=None,
                          separable=False,
                          data_format='NDHWC',
                          scope=''):
  """A 3-D convolution, or with `separable` a spatial then a temporal one.

  kernel_size: [time, height, width]. The separable form (S3D) convolves
  [1, height, width] under `scope` (with the normalizer), then
  [time, 1, 1] under `scope`/temporal (same activation, biases instead of the
  normalizer, identity-in-time initialization). A temporal size of 1 is
  always a single convolution.
  """
  kernel_size = _triple(kernel_size)
  stride = _triple(stride)
  common = dict(padding=padding, activation_fn=activation_fn,
                weights_regularizer=weights_regularizer,
                data_format=data_format)
  if not separable or kernel_size[0] == 1:
    return slim.conv3d(inputs, num_outputs, kernel_size, stride=stride,
                       normalizer_fn=normalizer_fn,
                       normalizer_params=normalizer_params, scope=scope,
                       **common)
  net = slim.conv3d(inputs, num_outputs, [1] + kernel_size[1:],
                    stride=[1] + stride[1:], normalizer_fn=normalizer_fn,
                    normalizer_params=normalizer_params, scope=scope, **common)
  return slim.conv3d(net, num_outputs, [kernel_size[0], 1, 1],
                     stride=[stride[0], 1, 1], normalizer_fn=None,
                     weights_initializer=center_initializer(),
                     scope=scope + '/temporal', **common)


@slim.add_arg_scope
def inception_block_v1_3d(inputs,
                          num_outputs_0_0a,
                          num_outputs_1_0a,
                          num_outputs_1_0b,
                          num_outputs_2_0a,
                          num_outputs_2_0b,
                          num_outputs_3_0b,
                          temporal_kernel_size=3,
                          self_gating_fn=None,
                          data_format='NDHWC',
                          scope=''):
  """Inception v1's module in 3-D: four branches concatenated on channels.

  Branch_0: 1x1x1 (Conv2d_0a_1x1). Branch_1 and Branch_2: 1x1x1 reduction
  (Conv2d_0a_1x1) then a [temporal_kernel_size, 3, 3] `conv3d_spatiotemporal`
  (Conv2d_0b_3x3). Branch_3: 3x3x3 max pool (MaxPool_0a_3x3) then 1x1x1
  (Conv2d_0b_1x1). `self_gating_fn(net, scope=...)`, if given, gates each
  branch's output under the scope of its last convolution.
  """

  def gate(net, conv_scope):
    return self_gating_fn(net, scope=conv_scope) if self_gating_fn else net

  def reduce_then_conv(reduce_depth, depth):
    net = slim.conv3d(inputs, reduce_depth, [1, 1, 1], scope='Conv2d_0a_1x1')
    net = conv3d_spatiotemporal(net, depth, [temporal_kernel_size, 3, 3],
                                scope='Conv2d_0b_3x3')
    return gate(net, 'Conv2d_0b_3x3')

  with tf1.variable_scope(scope):
    with tf1.variable_scope('Branch_0'):
      branch_0 = gate(slim.conv3d(inputs, num_outputs_0_0a, [1, 1, 1],
                                  scope='Conv2d_0a_1x1'), 'Conv2d_0a_1x1')
    with tf1.variable_scope('Branch_1'):
      branch_1 = reduce_then_conv(num_outputs_1_0a, num_outputs_1_0b)
    with tf1.variable_scope('Branch_2'):
      branch_2 = reduce_then_conv(num_outputs_2_0a, num_outputs_2_0b)
    with tf1.variable_scope('Branch_3'):
      branch_3 = slim.max_pool3d(inputs, [3, 3, 3], scope='MaxPool_0a_3x3')
      branch_3 = gate(slim.conv3d(branch_3, num_outputs_3_0b, [1, 1, 1],
                                  scope='Conv2d_0b_1x1'), 'Conv2d_0b_1x1')
    return tf.concat([branch_0, branch_1, branch_2, branch_3],
                     axis=data_format.index('C'))


def reduced_kernel_size_3d(input_tensor, kernel_size):
  """`kernel_size` [time, height, width] clipped to the static sizes of
  `input_tensor` (NDHWC), so the final pool works on short or small clips; an
  unknown size is assumed large enough."""
  shape = input_tensor.get_shape().as_list()
  if None in shape[1:4]:
    return list(kernel_size)
  return [min(size, k) for size, k in zip(shape[1:4], kernel_size)]
