"""CycleGAN's ResNet generator (Zhu et al., arXiv:1703.10593), TF-Slim's layout.

An image-to-image net, not a classifier, so not registered in nets_factory.
The output has the input's shape: a 7x7 convolution, two stride-2 encoder
convolutions (so height and width must be multiples of 4), residual blocks at
a quarter of the resolution, two 2x upsampling decoder stages, and a 7x7
convolution back to the input's channels with a tanh. It follows the
authors' Torch model (junyanz/CycleGAN, models/architectures.lua), whose
convolutions pad by reflection rather than with zeros, so borders carry
image content instead of a dark frame.

The generator opens no scope of its own: callers put it in theirs (TF-GAN
uses 'Generator'). Inside, the scopes are TF-Slim's ('input/Conv',
'encoder/Conv', 'encoder/Conv_1', 'residual_blocks/block_<i>/Conv[_1]',
'decoder/decoder<1|2>/upconv/...', 'output/Conv'), so its checkpoints
restore unchanged. CycleGAN's discriminator is pix2pix's PatchGAN
(nets.pix2pix.pix2pix_discriminator), as in TF-Slim.
"""
import numpy as np
import tensorflow as tf

import tf_compat  # noqa: F401  (tf-slim on TF 2.21; before tf_slim is used)
import tf_slim as slim

tf1 = tf.compat.v1

UPSAMPLE_METHODS = ('conv2d_transpose', 'nn_upsample_conv',
                    'bilinear_upsample_conv')


def cyclegan_arg_scope(instance_norm_center=True, instance_norm_scale=True,
                       instance_norm_epsilon=0.001, weights_init_stddev=0.02,
                       weight_decay=0.0):
  """Convolutions with instance norm and N(0, weights_init_stddev) weights.

  Instance norm (statistics per image and channel) rather than batch norm,
  as in the paper: CycleGAN trains on batches of one image, and an image's
  output then does not depend on the others in its batch, in training or
  inference. `weight_decay` > 0 adds an L2 penalty on the kernels.
  """
  with slim.arg_scope(
      [slim.conv2d],
      normalizer_fn=slim.instance_norm,
      normalizer_params={'center': instance_norm_center,
                         'scale': instance_norm_scale,
                         'epsilon': instance_norm_epsilon},
      weights_initializer=tf1.random_normal_initializer(
          0, weights_init_stddev),
      weights_regularizer=(slim.l2_regularizer(weight_decay)
                           if weight_decay and weight_decay > 0.0 else None)
  ) as sc:
    return sc


def _same_padding(kernel_height, kernel_width):
  """tf.pad paddings after which a 'VALID' convolution keeps the size.

  The split of TF's 'SAME' (an odd remainder goes to the bottom and right),
  done explicitly so the border can be a reflection instead of zeros.
  """
  return np.array([[0, 0],
                   [(kernel_height - 1) // 2, kernel_height // 2],
                   [(kernel_width - 1) // 2, kernel_width // 2],
                   [0, 0]], dtype=np.int32)


def cyclegan_upsample(net, num_outputs, stride, method='conv2d_transpose',
                      pad_mode='REFLECT', align_corners=False):
  """Scales `net` [batch, height, width, channels] up by `stride` [sh, sw].

  Methods, all in variable scope 'upconv':
    'conv2d_transpose': a 3x3 transposed convolution of that stride (slim's
      defaults: ReLU, no normalizer, biases), its first row and column
      dropped (a 'valid' transposed convolution gives stride*size + 1).
    'nn_upsample_conv': nearest-neighbour resize, then a 3x3 convolution
      after padding by 1 with `pad_mode` ('REFLECT', 'SYMMETRIC' or
      'CONSTANT'), which avoids the checkerboard artefacts of transposed
      convolutions.
    'bilinear_upsample_conv': the same with a bilinear resize
      (`align_corners` as in tf.compat.v1.image.resize_bilinear).
  The convolutions take the enclosing arg_scope (normalizer, activation).

  Raises:
    ValueError: an unknown `method`.
  """
  if method not in UPSAMPLE_METHODS:
    raise ValueError('Unknown method: [%s]; cyclegan_upsample knows %s'
                     % (method, ', '.join(UPSAMPLE_METHODS)))
  with tf1.variable_scope('upconv'):
    if method == 'conv2d_transpose':
      net = slim.conv2d_transpose(net, num_outputs, kernel_size=[3, 3],
                                  stride=stride, padding='valid')
      # A 'valid' transposed convolution is aligned to the right where a
      # 'SAME' convolution is aligned to the left: the extra row and column
      # are at the start. (TF-Slim's own correction, not the paper's model.)
      return net[:, 1:, 1:, :]
    size = tf.shape(net)[1:3] * stride
    if method == 'nn_upsample_conv':
      net = tf1.image.resize(net, size,
                             method=tf1.image.ResizeMethod.NEAREST_NEIGHBOR)
    else:
      net = tf1.image.resize_bilinear(net, size, align_corners=align_corners)
    net = tf.pad(net, _same_padding(3, 3), mode=pad_mode)
    return slim.conv2d(net, num_outputs, kernel_size=[3, 3], padding='valid')


def cyclegan_generator_resnet(images, arg_scope_fn=cyclegan_arg_scope,
                              num_resnet_blocks=6, num_filters=64,
                              upsample_fn=cyclegan_upsample, kernel_size=3,
                              tanh_linear_slope=0.0, is_training=False):
  """Translates `images` [batch, height, width, channels] into images of that shape.

  Args:
    images: float images; height and width multiples of 4 where known
      (unknown ones, and the batch, may stay None).
    arg_scope_fn: returns the arg_scope the whole generator is built in.
    num_resnet_blocks: residual blocks in the middle (6 for 128x128 images
      in the paper, 9 for 256x256).
    num_filters: channels of the first layer; the encoder doubles them twice.
    upsample_fn: `fn(net, num_outputs, stride)` of each decoder stage, e.g.
      functools.partial(cyclegan_upsample, method='nn_upsample_conv').
    kernel_size: an int or [height, width] of the encoder, residual and
      decoder convolutions.
    tanh_linear_slope: the output is tanh(logits) + slope * logits; a small
      slope keeps a gradient where tanh saturates.
    is_training: unused (no dropout or batch norm); accepted so every
      generator takes the same arguments.

  Returns:
    (predictions, end_points {'encoder_0', 'encoder_1', 'encoder_2',
     'resnet_block_<i>', 'decoder1', 'decoder2', 'logits', 'predictions'}).

  Raises:
    ValueError: a known height or width that is not a multiple of 4.
  """
  del is_training
  height, width, channels = images.shape.as_list()[1:4]
  if height and height % 4 != 0:
    raise ValueError('The input height must be a multiple of 4. (It is %d: '
                     'the encoder halves it twice.)' % height)
  if width and width % 4 != 0:
    raise ValueError('The input width must be a multiple of 4. (It is %d: '
                     'the encoder halves it twice.)' % width)
  if not isinstance(kernel_size, (list, tuple)):
    kernel_size = [kernel_size, kernel_size]
  keep_size = _same_padding(*kernel_size)
  pad_3 = _same_padding(7, 7)

  end_points = {}
  with slim.arg_scope(arg_scope_fn()):
    with tf1.variable_scope('input'):
      net = tf.pad(images, pad_3, mode='REFLECT')
      net = end_points['encoder_0'] = slim.conv2d(
          net, num_filters, kernel_size=[7, 7], padding='VALID')

    with tf1.variable_scope('encoder'), slim.arg_scope(
        [slim.conv2d], kernel_size=kernel_size, stride=2,
        activation_fn=tf.nn.relu, padding='VALID'):
      for i in (1, 2):
        net = tf.pad(net, keep_size, mode='REFLECT')
        net = end_points['encoder_%d' % i] = slim.conv2d(
            net, num_filters * 2 ** i)

    with tf1.variable_scope('residual_blocks'), slim.arg_scope(
        [slim.conv2d], kernel_size=kernel_size, stride=1,
        activation_fn=tf.nn.relu, padding='VALID'):
      for i in range(num_resnet_blocks):
        with tf1.variable_scope('block_%d' % i):
          residual = tf.pad(net, keep_size, mode='REFLECT')
          residual = slim.conv2d(residual, num_filters * 4)
          residual = tf.pad(residual, keep_size, mode='REFLECT')
          residual = slim.conv2d(residual, num_filters * 4, activation_fn=None)
          net = end_points['resnet_block_%d' % i] = net + residual

    with tf1.variable_scope('decoder'), slim.arg_scope(
        [slim.conv2d], kernel_size=kernel_size, stride=1,
        activation_fn=tf.nn.relu):
      for i, depth in ((1, num_filters * 2), (2, num_filters)):
        with tf1.variable_scope('decoder%d' % i):
          net = end_points['decoder%d' % i] = upsample_fn(
              net, num_outputs=depth, stride=[2, 2])

    with tf1.variable_scope('output'):
      net = tf.pad(net, pad_3, mode='REFLECT')
      logits = slim.conv2d(net, channels, [7, 7], activation_fn=None,
                           normalizer_fn=None, padding='valid')
      # The upsampling sizes are computed in the graph, which loses the
      # static shape; the input's (known dimensions, None elsewhere) is the
      # output's.
      logits = end_points['logits'] = tf.reshape(logits, tf.shape(images))
      end_points['predictions'] = (tf.tanh(logits) +
                                   logits * tanh_linear_slope)
  return end_points['predictions'], end_points
