"""DCGAN's generator and discriminator (Radford et al., arXiv:1511.06434), TF-Slim's layout.

A GAN, not a classifier, so not registered in nets_factory: a training
program calls `generator(noise)` and `discriminator(images)` itself, the
discriminator twice (real and generated images, the second with reuse=True).
docs/gans.md trains one.

Every layer but the first and last is a 4x4 stride-2 (transposed) convolution
that halves or doubles the side, so sizes must be powers of two: the
discriminator takes square images of side 2**n through n convolutions down to
1x1; the generator grows its noise, seen as a 1x1 image, to 4x4 and then
doubles it up to `final_size`. Scopes and variables are TF-Slim's
('Generator/deconv1' ... 'Generator/logits', 'Discriminator/conv1' ...
'Discriminator/Conv', the last keeping slim's default name as TF-Slim's does),
so checkpoints written with TF-Slim's module restore unchanged.

Batch norm is slim's with TF-Slim's settings: not fused by default (TF-Slim
found that some GAN losses that differentiate the discriminator twice, such
as gradient penalties, needed the second derivative of the unfused ops), and
zero-debiased moving means (the averages start at zero; debiasing, as in
Adam, makes them usable from the first steps).
"""
import tensorflow as tf

import tf_compat  # noqa: F401  (tf-slim on TF 2.21; before tf_slim is used)
import tf_slim as slim

tf1 = tf.compat.v1


def _log2(size):
  """n if `size` is 2**n for an integer n >= 0, else None."""
  n = int(size).bit_length() - 1
  return n if size > 0 and 2 ** n == size else None


def _batch_norm_scope(is_training, fused_batch_norm):
  return slim.arg_scope([slim.batch_norm], is_training=is_training,
                        zero_debias_moving_mean=True, fused=fused_batch_norm)


def _discriminator_depth(inputs):
  """The number of stride-2 layers that take `inputs` down to 1x1.

  Raises ValueError, as TF-Slim's discriminator does, unless `inputs` are
  [batch, side, side, channels] with a side that is a power of two known when
  the graph is built.
  """
  shape = inputs.get_shape()
  if shape.rank != 4:
    raise ValueError(
        'discriminator input has shape %s; expected rank 4, '
        '[batch, height, width, channels]' % shape)
  height, width = shape.as_list()[1:3]
  if height is None or width is None:
    raise ValueError(
        'discriminator input has shape %s: its height and width must be known '
        'when the graph is built (set them in the placeholder or reshape)'
        % shape)
  if height != width:
    raise ValueError(
        'Input tensor does not have equal width and height: %dx%d; the '
        'discriminator takes square images' % (height, width))
  num_layers = _log2(width)
  if num_layers is None:
    raise ValueError(
        'Input tensor `width` is not a power of 2: %d; pad or resize the '
        'images to 2**n pixels (e.g. %d)' % (width, 2 ** int(width).bit_length()))
  return num_layers


def discriminator(inputs, depth=64, is_training=True, reuse=None,
                  scope='Discriminator', fused_batch_norm=False):
  """Scores `inputs` [batch, 2**n, 2**n, channels] real (high) or generated (low).

  Layer i (conv1 ... convn) has depth * 2**(i-1) channels, leaky ReLU and,
  from conv2 on, batch norm; a 1x1 convolution on the final 1x1 map gives the
  logit.

  Args:
    inputs: float images; height and width equal, a power of two, static.
    depth: channels of conv1.
    is_training: batch norm uses the batch's statistics (and updates its
      moving averages through tf.GraphKeys.UPDATE_OPS) instead of the moving
      ones.
    reuse: True for the second call (on the other kind of images) in `scope`.
    scope: variable scope of the network.
    fused_batch_norm: use the fused batch-norm kernel (faster).

  Returns:
    (logits [batch, 1], end_points {'conv1', ..., 'convn', 'logits'}).

  Raises:
    ValueError: inputs not 4-D, of unknown or unequal height and width, or a
      side that is not a power of two.
  """
  num_layers = _discriminator_depth(inputs)
  end_points = {}
  with tf1.variable_scope(scope, values=[inputs], reuse=reuse), \
       _batch_norm_scope(is_training, fused_batch_norm), \
       slim.arg_scope([slim.conv2d], kernel_size=4, stride=2,
                      activation_fn=tf.nn.leaky_relu):
    net = inputs
    for i in range(num_layers):
      name = 'conv%d' % (i + 1)
      # The first layer sees the images themselves: no normalisation there.
      net = end_points[name] = slim.conv2d(
          net, depth * 2 ** i, scope=name,
          normalizer_fn=slim.batch_norm if i else None)
    logits = slim.conv2d(net, 1, kernel_size=1, stride=1, padding='VALID',
                         normalizer_fn=None, activation_fn=None)
    logits = end_points['logits'] = tf.reshape(logits, [-1, 1])
  return logits, end_points


def generator(inputs, depth=64, final_size=32, num_outputs=3, is_training=True,
              reuse=None, scope='Generator', fused_batch_norm=False):
  """Generates images [batch, final_size, final_size, num_outputs] from noise.

  deconv1 grows the noise, a 1x1 image, to 4x4 (4x4 kernel, 'VALID'); each
  further deconv doubles the side, halving the channels down to `depth` in
  the last one, deconv(log2(final_size) - 1), which has neither batch norm
  nor activation. A 1x1 convolution, 'logits', maps that to `num_outputs`
  channels, unbounded (apply tanh for images in [-1, 1]).

  Args:
    inputs: float noise [batch, noise_dims].
    depth: channels of the last deconvolution.
    final_size: side of the output, a power of two, at least 8.
    num_outputs: channels of the output (3 for RGB, 1 for grayscale).
    is_training: batch norm uses the batch's statistics (and updates its
      moving averages through tf.GraphKeys.UPDATE_OPS) instead of the moving
      ones.
    reuse: reuse the variables of `scope`.
    scope: variable scope of the network.
    fused_batch_norm: use the fused batch-norm kernel (faster).

  Returns:
    (logits [batch, final_size, final_size, num_outputs],
     end_points {'deconv1', ..., 'logits'}).

  Raises:
    ValueError: inputs not 2-D, or final_size not a power of two of at least 8.
  """
  inputs.get_shape().assert_has_rank(2)
  if _log2(final_size) is None:
    raise ValueError('`final_size` (%i) must be a power of 2.' % final_size)
  if final_size < 8:
    raise ValueError('`final_size` (%i) must be greater than 8 or equal to '
                     'it: the first layer alone makes a 4x4 image' % final_size)
  num_layers = _log2(final_size) - 1
  end_points = {}
  with tf1.variable_scope(scope, values=[inputs], reuse=reuse), \
       _batch_norm_scope(is_training, fused_batch_norm), \
       slim.arg_scope([slim.conv2d_transpose], kernel_size=4, stride=2,
                      normalizer_fn=slim.batch_norm):
    net = inputs[:, tf.newaxis, tf.newaxis, :]
    for i in range(1, num_layers + 1):
      name = 'deconv%d' % i
      layer_args = {}
      if i == 1:
        layer_args.update(stride=1, padding='VALID')  # 1x1 -> 4x4
      if i == num_layers:
        layer_args.update(normalizer_fn=None, activation_fn=None)
      net = end_points[name] = slim.conv2d_transpose(
          net, depth * 2 ** (num_layers - i), scope=name, **layer_args)
    logits = end_points['logits'] = slim.conv2d(
        net, num_outputs, kernel_size=1, stride=1, padding='VALID',
        normalizer_fn=None, activation_fn=None, scope='logits')
  logits.get_shape().assert_is_compatible_with(
      [None, final_size, final_size, num_outputs])
  return logits, end_points
