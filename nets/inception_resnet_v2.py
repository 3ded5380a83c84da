"""Inception-ResNet-v2, the TF-Slim graph of the published checkpoint.

Szegedy, Ioffe, Vanhoucke, Alemi: "Inception-v4, Inception-ResNet and the Impact
of Residual Connections on Learning", http://arxiv.org/abs/1602.07261.

A stem to 35x35 (Mixed_5b), 10 residual Block35 (scale 0.17), Mixed_6a to
17x17, 20 Block17 (scale 0.10, end point PreAuxLogits), Mixed_7a to 8x8,
9 Block8 (scale 0.20) plus one final Block8 without activation, then
Conv2d_7b_1x1. Each residual block adds a scaled 1x1 projection of its
concatenated towers to its input.
"""
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets import inception_utils
from nets.registry import register_network

tf1 = tf.compat.v1
conv = inception_utils.conv
avg_pool = inception_utils.avg_pool
max_pool = inception_utils.max_pool
towers = inception_utils.towers


def _add_residual(net, mixed, scale, activation_fn):
  """net + scale * (linear 1x1 projection of `mixed` back to net's depth)."""
  up = slim.conv2d(mixed, net.get_shape()[3], 1, normalizer_fn=None,
                   activation_fn=None, scope='Conv2d_1x1')
  scaled_up = up * scale
  if activation_fn == tf.nn.relu6:
    # Keeps the sum inside relu6's band, as the published graph does.
    scaled_up = tf.clip_by_value(scaled_up, -6.0, 6.0)
  net += scaled_up
  if activation_fn:
    net = activation_fn(net)
  return net


def _residual_block(default_scope, branches, net, scale, activation_fn,
                    scope, reuse):
  """`branches` side by side (towers), added back to `net` by _add_residual,
  in `scope` (default `default_scope`)."""
  with tf1.variable_scope(scope, default_scope, [net], reuse=reuse):
    return _add_residual(net, towers(net, *branches), scale, activation_fn)


_BLOCK35 = (
    [conv(32, 1, 'Conv2d_1x1')],
    [conv(32, 1, 'Conv2d_0a_1x1'), conv(32, 3, 'Conv2d_0b_3x3')],
    [conv(32, 1, 'Conv2d_0a_1x1'), conv(48, 3, 'Conv2d_0b_3x3'),
     conv(64, 3, 'Conv2d_0c_3x3')])


# slim.repeat names the repeated blocks after these functions: block35_1, ...
def block35(net, scale=1.0, activation_fn=tf.nn.relu, scope=None, reuse=None):
  """Residual block at 35x35: 1x1, 1x1-3x3 and 1x1-3x3-3x3 towers."""
  return _residual_block('Block35', _BLOCK35, net, scale, activation_fn,
                         scope, reuse)


_BLOCK17 = (
    [conv(192, 1, 'Conv2d_1x1')],
    [conv(128, 1, 'Conv2d_0a_1x1'), conv(160, [1, 7], 'Conv2d_0b_1x7'),
     conv(192, [7, 1], 'Conv2d_0c_7x1')])


def block17(net, scale=1.0, activation_fn=tf.nn.relu, scope=None, reuse=None):
  """Residual block at 17x17: 1x1 and 1x1-1x7-7x1 towers."""
  return _residual_block('Block17', _BLOCK17, net, scale, activation_fn,
                         scope, reuse)


_BLOCK8 = (
    [conv(192, 1, 'Conv2d_1x1')],
    [conv(192, 1, 'Conv2d_0a_1x1'), conv(224, [1, 3], 'Conv2d_0b_1x3'),
     conv(256, [3, 1], 'Conv2d_0c_3x1')])


def block8(net, scale=1.0, activation_fn=tf.nn.relu, scope=None, reuse=None):
  """Residual block at 8x8: 1x1 and 1x1-1x3-3x1 towers."""
  return _residual_block('Block8', _BLOCK8, net, scale, activation_fn,
                         scope, reuse)


_END_POINTS = ('Conv2d_1a_3x3', 'Conv2d_2a_3x3', 'Conv2d_2b_3x3',
               'MaxPool_3a_3x3', 'Conv2d_3b_1x1', 'Conv2d_4a_3x3',
               'MaxPool_5a_3x3', 'Mixed_5b', 'Mixed_6a', 'PreAuxLogits',
               'Mixed_7a', 'Conv2d_7b_1x1')


def _mixed_5b(net):
  return towers(
      net,
      [conv(96, 1, 'Conv2d_1x1')],
      [conv(48, 1, 'Conv2d_0a_1x1'), conv(64, 5, 'Conv2d_0b_5x5')],
      [conv(64, 1, 'Conv2d_0a_1x1'), conv(96, 3, 'Conv2d_0b_3x3'),
       conv(96, 3, 'Conv2d_0c_3x3')],
      [avg_pool(3, 'AvgPool_0a_3x3', stride=1, padding='SAME'),
       conv(64, 1, 'Conv2d_0b_1x1')])


def _mixed_6a(net, stride, padding):
  return towers(
      net,
      [conv(384, 3, 'Conv2d_1a_3x3', stride=stride, padding=padding)],
      [conv(256, 1, 'Conv2d_0a_1x1'), conv(256, 3, 'Conv2d_0b_3x3'),
       conv(384, 3, 'Conv2d_1a_3x3', stride=stride, padding=padding)],
      [max_pool(3, 'MaxPool_1a_3x3', stride=stride, padding=padding)])


def _mixed_7a(net, padding):
  return towers(
      net,
      [conv(256, 1, 'Conv2d_0a_1x1'),
       conv(384, 3, 'Conv2d_1a_3x3', stride=2, padding=padding)],
      [conv(256, 1, 'Conv2d_0a_1x1'),
       conv(288, 3, 'Conv2d_1a_3x3', stride=2, padding=padding)],
      [conv(256, 1, 'Conv2d_0a_1x1'), conv(288, 3, 'Conv2d_0b_3x3'),
       conv(320, 3, 'Conv2d_1a_3x3', stride=2, padding=padding)],
      [max_pool(3, 'MaxPool_1a_3x3', stride=2, padding=padding)])


def inception_resnet_v2_base(inputs, final_endpoint='Conv2d_7b_1x1',
                             output_stride=16, align_feature_maps=False,
                             scope=None, activation_fn=tf.nn.relu):
  """Builds Inception-ResNet-v2 from `inputs` up to `final_endpoint`.

  Args:
    inputs: [batch, height, width, channels] float tensor.
    final_endpoint: one of 'Conv2d_1a_3x3', 'Conv2d_2a_3x3', 'Conv2d_2b_3x3',
      'MaxPool_3a_3x3', 'Conv2d_3b_1x1', 'Conv2d_4a_3x3', 'MaxPool_5a_3x3',
      'Mixed_5b', 'Mixed_6a', 'PreAuxLogits', 'Mixed_7a', 'Conv2d_7b_1x1'.
    output_stride: 16, or 8 to keep Mixed_6a at stride 1 and run the Block17
      stack atrous (rate 2); 8 is supported up to 'PreAuxLogits' only.
    align_feature_maps: use SAME instead of VALID padding in the stem and the
      reductions, so that feature maps align with the input pixels.
    scope: optional variable scope (default 'InceptionResnetV2').
    activation_fn: activation at the end of each residual block.

  Returns:
    (net, end_points): the tensor at `final_endpoint` and an ordered dict of
    the end points built.

  Raises:
    ValueError: for an unknown `final_endpoint`, an `output_stride` other than
      8 or 16, or output_stride 8 with an end point after 'PreAuxLogits'.
  """
  if output_stride not in (8, 16):
    raise ValueError('output_stride must be 8 or 16, got %r' % output_stride)
  if final_endpoint not in _END_POINTS:
    raise ValueError('unknown final_endpoint %r (known: %s)' % (
        final_endpoint, ', '.join(_END_POINTS)))
  if (output_stride == 8 and
      _END_POINTS.index(final_endpoint) > _END_POINTS.index('PreAuxLogits')):
    raise ValueError('output_stride 8 is supported up to the PreAuxLogits end '
                     'point only; got final_endpoint %r' % final_endpoint)
  padding = 'SAME' if align_feature_maps else 'VALID'
  use_atrous = output_stride == 8
  end_points = {}

  def done(name, net):
    end_points[name] = net
    return name == final_endpoint

  with tf1.variable_scope(scope, 'InceptionResnetV2', [inputs]):
    with slim.arg_scope([slim.conv2d, slim.max_pool2d, slim.avg_pool2d],
                        stride=1, padding='SAME'):
      net = slim.conv2d(inputs, 32, 3, stride=2, padding=padding,
                        scope='Conv2d_1a_3x3')
      if done('Conv2d_1a_3x3', net): return net, end_points
      net = slim.conv2d(net, 32, 3, padding=padding, scope='Conv2d_2a_3x3')
      if done('Conv2d_2a_3x3', net): return net, end_points
      net = slim.conv2d(net, 64, 3, scope='Conv2d_2b_3x3')
      if done('Conv2d_2b_3x3', net): return net, end_points
      net = slim.max_pool2d(net, 3, stride=2, padding=padding,
                            scope='MaxPool_3a_3x3')
      if done('MaxPool_3a_3x3', net): return net, end_points
      net = slim.conv2d(net, 80, 1, padding=padding, scope='Conv2d_3b_1x1')
      if done('Conv2d_3b_1x1', net): return net, end_points
      net = slim.conv2d(net, 192, 3, padding=padding, scope='Conv2d_4a_3x3')
      if done('Conv2d_4a_3x3', net): return net, end_points
      net = slim.max_pool2d(net, 3, stride=2, padding=padding,
                            scope='MaxPool_5a_3x3')
      if done('MaxPool_5a_3x3', net): return net, end_points

      with tf1.variable_scope('Mixed_5b'):
        net = _mixed_5b(net)
      if done('Mixed_5b', net): return net, end_points
      # slim.repeat names the blocks Repeat/block35_1..10, as in the checkpoint.
      net = slim.repeat(net, 10, block35, scale=0.17,
                        activation_fn=activation_fn)

      with tf1.variable_scope('Mixed_6a'):
        net = _mixed_6a(net, stride=1 if use_atrous else 2, padding=padding)
      if done('Mixed_6a', net): return net, end_points
      with slim.arg_scope([slim.conv2d], rate=2 if use_atrous else 1):
        net = slim.repeat(net, 20, block17, scale=0.10,
                          activation_fn=activation_fn)
      if done('PreAuxLogits', net): return net, end_points

      with tf1.variable_scope('Mixed_7a'):
        net = _mixed_7a(net, padding)
      if done('Mixed_7a', net): return net, end_points
      net = slim.repeat(net, 9, block8, scale=0.20, activation_fn=activation_fn)
      # The last block is linear (scale 1, no activation) and is named Block8.
      net = block8(net, activation_fn=None)
      net = slim.conv2d(net, 1536, 1, scope='Conv2d_7b_1x1')
      done('Conv2d_7b_1x1', net)
      return net, end_points


def inception_resnet_v2_arg_scope(
    weight_decay=0.00004,
    batch_norm_decay=0.9997,
    batch_norm_epsilon=0.001,
    activation_fn=tf.nn.relu,
    batch_norm_updates_collections=tf1.GraphKeys.UPDATE_OPS,
    batch_norm_scale=False):
  """The published training setup of Inception-ResNet-v2.

  Differs from `inception_utils.inception_arg_scope` in two ways, both kept
  from TF-Slim: biases are L2-regularised too, and the weights keep slim's
  default (Xavier) initializer instead of variance scaling.
  """
  regularizer = slim.l2_regularizer(weight_decay)
  batch_norm_params = {
      'decay': batch_norm_decay,
      'epsilon': batch_norm_epsilon,
      'updates_collections': batch_norm_updates_collections,
      'fused': None,  # fused kernel whenever the input allows it
      'scale': batch_norm_scale,
  }
  with slim.arg_scope([slim.conv2d, slim.fully_connected],
                      weights_regularizer=regularizer,
                      biases_regularizer=regularizer):
    with slim.arg_scope([slim.conv2d], activation_fn=activation_fn,
                        normalizer_fn=slim.batch_norm,
                        normalizer_params=batch_norm_params) as sc:
      return sc


def inception_resnet_v2(inputs, num_classes=1001, is_training=True,
                        dropout_keep_prob=0.8, reuse=None,
                        scope='InceptionResnetV2', create_aux_logits=True,
                        activation_fn=tf.nn.relu):
  """Inception-ResNet-v2 classifier.

  Arguments and results as inception_v4.inception_v4's, plus
  `activation_fn`, the activation at the end of each residual block; the
  height and width of `inputs` may be unknown when `create_aux_logits` is
  False.
  """
  with tf1.variable_scope(scope, 'InceptionResnetV2', [inputs],
                          reuse=reuse) as scope:
    with slim.arg_scope([slim.batch_norm, slim.dropout],
                        is_training=is_training):
      net, end_points = inception_resnet_v2_base(inputs, scope=scope,
                                                 activation_fn=activation_fn)
      if create_aux_logits and num_classes:
        # The pool's scope name is the checkpoint's, though it is a 5x5 pool.
        end_points['AuxLogits'] = inception_utils.aux_logits(
            end_points['PreAuxLogits'], num_classes, 'Conv2d_1a_3x3',
            'Conv2d_2a_5x5', 'Logits')
      # Unlike Inception-v4, dropout comes after the flatten here.
      return inception_utils.logits_head(
          net, end_points, num_classes, 'AvgPool_1a_8x8',
          lambda net: slim.dropout(slim.flatten(net), dropout_keep_prob,
                                   scope='Dropout'))


register_network('inception_resnet_v2', inception_resnet_v2,
                 inception_resnet_v2_arg_scope, default_image_size=299,
                 num_classes=1001, preprocessing_name='inception',
                 logits_scopes=('InceptionResnetV2/Logits',
                                'InceptionResnetV2/AuxLogits'),
                 published=(
                     'inception_resnet_v2_2016_08_30.tar.gz', 80.4, 95.3))
