"""pix2pix: the U-Net generator and PatchGAN discriminator of image-to-image
translation (Isola et al., arXiv:1611.07004), TF-Slim's layout.

Image-to-image nets, not classifiers, so not registered in nets_factory.
The generator is an encoder of stride-2 4x4 convolutions, one per `Block`,
and a decoder that mirrors it, each decoder stage seeing the matching encoder
output too (the U-Net skips), so fine detail of the input reaches the output.
The discriminator judges overlapping patches rather than the whole image
(PatchGAN): its output is a map of logits, one per patch. CycleGAN uses the
same discriminator (nets.cyclegan has only the generator).

Build both inside `pix2pix_arg_scope()` to get the paper's instance norm and
initialiser. Scopes are TF-Slim's ('encoder/Conv', 'encoder/Conv_<i>',
'decoder/Conv_<i>' or 'decoder/Conv2d_transpose_<i>', 'output/Conv';
'conv0' ... 'conv<n>' in the discriminator), so its checkpoints restore
unchanged; like TF-Slim's, neither net opens a scope of its own.
Following the authors' Lua model (phillipi/pix2pix, models.lua).
"""
import collections
import functools
import numbers

import tensorflow as tf

import tf_compat  # noqa: F401  (tf-slim on TF 2.21; before tf_slim is used)
import tf_slim as slim

tf1 = tf.compat.v1

UPSAMPLE_METHODS = ('nn_upsample_conv', 'conv2d_transpose')


def pix2pix_arg_scope():
  """(Transposed) convolutions with instance norm and N(0, 0.02) weights.

  The values of the authors' online port, which the paper does not state.
  """
  with slim.arg_scope(
      [slim.conv2d, slim.conv2d_transpose],
      normalizer_fn=slim.instance_norm,
      normalizer_params={'center': True, 'scale': True, 'epsilon': 0.00001},
      weights_initializer=tf1.random_normal_initializer(0, 0.02)) as sc:
    return sc


def upsample(net, num_outputs, kernel_size, method='nn_upsample_conv'):
  """Scales `net` [batch, height, width, channels] up by `kernel_size` [sh, sw].

  'nn_upsample_conv': nearest-neighbour resize, then a 4x4 'SAME'
  convolution (no checkerboard artefacts); 'conv2d_transpose': a 4x4
  transposed convolution of that stride. Both without activation (the
  generator applies its ReLU before upsampling), normalised by the
  enclosing arg_scope.

  Raises:
    ValueError: an unknown `method`.
  """
  if method == 'nn_upsample_conv':
    size = tf.shape(net)[1:3] * kernel_size
    net = tf1.image.resize(net, size,
                           method=tf1.image.ResizeMethod.NEAREST_NEIGHBOR)
    return slim.conv2d(net, num_outputs, [4, 4], activation_fn=None)
  if method == 'conv2d_transpose':
    return slim.conv2d_transpose(net, num_outputs, [4, 4], stride=kernel_size,
                                 activation_fn=None)
  raise ValueError('Unknown method: [%s]; upsample knows %s'
                   % (method, ', '.join(UPSAMPLE_METHODS)))


class Block(collections.namedtuple('Block',
                                   ['num_filters', 'decoder_keep_prob'])):
  """One encoder layer of `num_filters` and its mirror in the decoder.

  Unlike the original U-Net, a block is a single convolution: the decoder
  concatenates its input with the matching encoder output, upsamples, and
  then applies dropout that keeps `decoder_keep_prob` of the activations
  (0: no dropout).
  """


def _default_generator_blocks():
  """The paper's generator for 256x256 images: 64 ... 512 filters, 7 halvings.

  Dropout (keep 0.5) in the three decoder stages nearest the output only.
  """
  return [Block(64, 0.5), Block(128, 0.5), Block(256, 0.5),
          Block(512, 0), Block(512, 0), Block(512, 0), Block(512, 0)]


def pix2pix_generator(net, num_outputs, blocks=None,
                      upsample_method='nn_upsample_conv', is_training=False):
  """Translates images `net` [batch, height, width, channels] into
  [batch, height, width, num_outputs] logits.

  Args:
    net: float images of fully known shape; height and width divisible by
      2**len(blocks) (256x256 for the default blocks).
    num_outputs: channels of the output.
    blocks: a list of `Block`s, or None for `_default_generator_blocks()`.
    upsample_method: 'nn_upsample_conv' or 'conv2d_transpose' (`upsample`).
    is_training: unused: the decoder's dropout is on at test time too, as in
      the paper (its only source of noise).

  Returns:
    (logits, end_points {'encoder<i>', 'decoder<i>', 'logits',
     'predictions' (tanh of the logits)}).
  """
  del is_training
  blocks = blocks or _default_generator_blocks()
  output_shape = net.get_shape().as_list()
  output_shape[3] = num_outputs
  upsample_fn = functools.partial(upsample, method=upsample_method)
  end_points = {}

  encoder_outputs = []
  with tf1.variable_scope('encoder'), slim.arg_scope(
      [slim.conv2d], kernel_size=[4, 4], stride=2,
      activation_fn=tf.nn.leaky_relu):
    last = len(blocks) - 1
    for i, block in enumerate(blocks):
      layer_args = {}
      if i == 0:  # the images themselves: no normalisation (paper, 5.1.1)
        layer_args.update(normalizer_fn=None)
      elif i == last:  # the bottleneck: linear
        layer_args.update(normalizer_fn=None, activation_fn=None)
      net = end_points['encoder%d' % i] = slim.conv2d(
          net, block.num_filters, **layer_args)
      encoder_outputs.append(net)

  with tf1.variable_scope('decoder'):
    for i, block in enumerate(reversed(blocks)):
      if i:  # the U-Net skip from the encoder layer of the same size
        net = tf.concat([net, encoder_outputs[-1 - i]], axis=3)
      net = upsample_fn(tf.nn.relu(net), block.num_filters, [2, 2])
      if block.decoder_keep_prob > 0:
        net = slim.dropout(net, keep_prob=block.decoder_keep_prob,
                           is_training=True)
      end_points['decoder%d' % i] = net

  with tf1.variable_scope('output'):
    # normalizer_fn=None overrides pix2pix_arg_scope's instance norm.
    logits = slim.conv2d(net, num_outputs, [4, 4], activation_fn=None,
                         normalizer_fn=None)
    logits = end_points['logits'] = tf.reshape(logits, output_shape)
    end_points['predictions'] = tf.tanh(logits)
  return logits, end_points


def pix2pix_discriminator(net, num_filters, padding=2, pad_mode='REFLECT',
                          activation_fn=tf.nn.leaky_relu, is_training=False):
  """The PatchGAN discriminator: a map of real/fake logits, one per patch.

  conv0 ... conv<n-1> are 4x4 convolutions of `num_filters[i]` channels,
  stride 2 except the last (stride 1), normalised by the arg_scope except
  conv0; conv<n> makes the one-channel logits (stride 1, no activation or
  normaliser). Each convolution is 'VALID' after `padding` pixels of
  `pad_mode` padding on every side.

  Args:
    net: float images [batch, height, width, channels].
    num_filters: channels of each layer but the logits; at least two.
    padding: a non-negative int; 0 pads nothing.
    pad_mode: 'REFLECT', 'SYMMETRIC' or 'CONSTANT' (tf.pad's modes).
    activation_fn: of every layer but the logits.
    is_training: unused (no dropout or batch norm).

  Returns:
    (logits [batch, patches_high, patches_wide, 1],
     end_points {'conv0', ..., 'conv<n-1>', 'logits', 'predictions'
     (sigmoid of the logits)}).

  Raises:
    TypeError: `padding` not an int.
    ValueError: `padding` negative, or fewer than two `num_filters`.
  """
  del is_training
  if not isinstance(padding, numbers.Integral):
    raise TypeError('padding must be an int, the pixels added on each side; '
                    'got %r' % (padding,))
  if padding < 0:
    raise ValueError('padding must be 0 or more pixels; got %d' % padding)
  if len(num_filters) < 2:
    raise ValueError('pix2pix_discriminator needs at least two num_filters '
                     '(a stride-2 layer and the stride-1 one); got %r'
                     % (num_filters,))

  def padded(net, scope):
    if not padding:
      return net
    with tf1.name_scope(scope):
      return tf.pad(net, [[0, 0], [padding, padding], [padding, padding],
                          [0, 0]], mode=pad_mode)

  end_points = {}
  last = len(num_filters) - 1
  with slim.arg_scope([slim.conv2d], kernel_size=[4, 4], stride=2,
                      padding='valid', activation_fn=activation_fn):
    for i, depth in enumerate(num_filters):
      name = 'conv%d' % i
      layer_args = {}
      if i == 0:  # the images themselves: no normalisation
        layer_args.update(normalizer_fn=None)
      if i == last:
        layer_args.update(stride=1)
      net = end_points[name] = slim.conv2d(padded(net, name), depth,
                                           scope=name, **layer_args)
    name = 'conv%d' % len(num_filters)
    logits = end_points['logits'] = slim.conv2d(
        padded(net, name), 1, stride=1, activation_fn=None,
        normalizer_fn=None, scope=name)
    end_points['predictions'] = tf.sigmoid(logits)
  return logits, end_points
