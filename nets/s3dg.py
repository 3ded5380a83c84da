"""S3D-G: separable 3-D Inception v1 with self-gating, as in TF-Slim.

Xie et al., "Rethinking Spatiotemporal Feature Learning For Video
Understanding", https://arxiv.org/abs/1712.04851. Inception v1 inflated to
clips [batch, frames, height, width, 3]: from `temporal_conv_startat` on, each
3x3 convolution becomes a [3, 3, 3] one, separable here (spatial [1, 3, 3],
then temporal [3, 1, 1] under `<scope>/temporal`); from `gating_startat` on,
each branch's output is multiplied by sigmoid(W . its mean over time and
space) (`<scope>/self_gating/transformer_W`). I3D (nets/i3d.py) is this
network with full 3-D convolutions, a 7-frame first kernel and no gating.

Scopes and end points equal TF-Slim's (which keep Inception v1's 2-D names so
that an image checkpoint can be inflated): InceptionV1/Conv2d_1a_7x7 ...
InceptionV1/Mixed_5c, and InceptionV1/Logits/Conv2d_0c_1x1. At 64 frames of
224x224, Mixed_5c is [batch, 8, 7, 7, 1024].

One deliberate difference: with data_format='NCDHW' batch norm normalises the
channel axis (TF-Slim's normalised the last one, the width), so both data
formats create the same variables.
"""
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets import i3d_utils
from nets import inception_utils
from nets import inception_v1
from nets.registry import register_network

tf1 = tf.compat.v1

conv3d_spatiotemporal = i3d_utils.conv3d_spatiotemporal
inception_block_v1_3d = i3d_utils.inception_block_v1_3d

# The stages that `temporal_conv_startat` and `gating_startat` may name: the
# first 3x3 convolution and the Inception modules.
SWITCHABLE_STAGES = ('Conv2d_2c_3x3', 'Mixed_3b', 'Mixed_3c', 'Mixed_4b',
                     'Mixed_4c', 'Mixed_4d', 'Mixed_4e', 'Mixed_4f',
                     'Mixed_5b', 'Mixed_5c')
FIRST_TEMPORAL_KERNEL_SIZES = (1, 3, 5, 7)


trunc_normal = inception_utils.trunc_normal  # TF-Slim exposes it here


def video_arg_scope(weight_decay=1e-7,
                    batch_norm_decay=0.999,
                    batch_norm_epsilon=0.001,
                    use_renorm=False,
                    separable_conv3d=False):
  """3-D convolutions: L2 weight decay, unfused batch norm (no gamma; moving
  statistics also in the 'moving_vars' collection) then ReLU."""
  batch_norm_params = {
      'decay': batch_norm_decay,
      'epsilon': batch_norm_epsilon,
      'fused': False,  # the fused kernel takes 4-D inputs only
      'renorm': use_renorm,
      'variables_collections': {
          'beta': None,
          'gamma': None,
          'moving_mean': ['moving_vars'],
          'moving_variance': ['moving_vars'],
      },
  }
  with slim.arg_scope([slim.conv3d, conv3d_spatiotemporal],
                      weights_regularizer=slim.l2_regularizer(weight_decay),
                      activation_fn=tf.nn.relu,
                      normalizer_fn=slim.batch_norm,
                      normalizer_params=batch_norm_params):
    with slim.arg_scope([conv3d_spatiotemporal],
                        separable=separable_conv3d) as sc:
      return sc


def s3dg_arg_scope(weight_decay=1e-7, batch_norm_decay=0.999,
                   batch_norm_epsilon=0.001):
  """`video_arg_scope` with separable spatiotemporal convolutions."""
  return video_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon,
                         separable_conv3d=True)


def self_gating(input_tensor, scope, data_format='NDHWC'):
  """input * sigmoid(W . mean of input over time and space), per channel.

  W is a [1, 1, 1, c, c] kernel without biases, under
  `scope`/self_gating/transformer_W.
  """
  channel_axis = data_format.index('C')
  num_channels = input_tensor.get_shape().as_list()[channel_axis]
  context = tf.reduce_mean(input_tensor,
                           [data_format.index(a) for a in 'DHW'],
                           keepdims=True, name=scope + '/self_gating/avg_pool3d')
  gates = slim.conv3d(context, num_channels, [1, 1, 1], activation_fn=None,
                      normalizer_fn=None, biases_initializer=None,
                      weights_initializer=trunc_normal(0.01),
                      data_format=data_format,
                      scope=scope + '/self_gating/transformer_W')
  return tf.multiply(input_tensor, tf.sigmoid(gates),
                     name=scope + '/self_gating/gated')


def _stage_index(option, value):
  """Position of `value` in SWITCHABLE_STAGES; None (never) stays None."""
  if value is None:
    return None
  if value not in SWITCHABLE_STAGES:
    raise ValueError("unknown %s '%s' (known: None, %s)"
                     % (option, value, ', '.join(SWITCHABLE_STAGES)))
  return SWITCHABLE_STAGES.index(value)


def s3dg_base(inputs,
              first_temporal_kernel_size=3,
              temporal_conv_startat='Conv2d_2c_3x3',
              gating_startat='Conv2d_2c_3x3',
              final_endpoint='Mixed_5c',
              min_depth=16,
              depth_multiplier=1.0,
              data_format='NDHWC',
              scope='InceptionV1'):
  """The S3D-G / I3D trunk from `inputs` up to `final_endpoint`.

  Args:
    inputs: clips, [batch, frames, height, width, channels] ('NDHWC') or
      [batch, channels, frames, height, width] ('NCDHW').
    first_temporal_kernel_size: temporal size of Conv2d_1a_7x7's kernel, one
      of 1, 3, 5, 7 (never separable).
    temporal_conv_startat: the first stage (of SWITCHABLE_STAGES) whose 3x3
      convolutions are 3x3x3; earlier ones are [1, 3, 3]. None: none.
    gating_startat: the first stage (of SWITCHABLE_STAGES) gated by
      `self_gating`; None: no gating.
    final_endpoint, min_depth, depth_multiplier: as in
      `inception_v1.inception_v1_base` (the same stages, in 3-D).
    data_format: 'NDHWC' or 'NCDHW'.
    scope: variable scope.

  Returns:
    (net, end_points): the output of `final_endpoint`, and a dict of the
    output of every stage built, in build order.

  Raises:
    ValueError: for an unknown final_endpoint, data_format or start stage, a
      first_temporal_kernel_size not in 1, 3, 5, 7, or depth_multiplier <= 0.
  """
  i3d_utils.check_data_format(data_format)
  depth = inception_utils.thinned_depth(depth_multiplier, min_depth)
  if first_temporal_kernel_size not in FIRST_TEMPORAL_KERNEL_SIZES:
    raise ValueError('first_temporal_kernel_size can only be 1, 3, 5 or 7, '
                     'got %r' % (first_temporal_kernel_size,))
  temporal_from = _stage_index('temporal_conv_startat', temporal_conv_startat)
  gating_from = _stage_index('gating_startat', gating_startat)

  def switches(name):
    """(temporal kernel size, gating fn or None) of a switchable stage."""
    index = SWITCHABLE_STAGES.index(name)
    temporal = temporal_from is not None and index >= temporal_from
    gated = gating_from is not None and index >= gating_from
    gating_fn = (lambda net, scope: self_gating(net, scope, data_format)
                 ) if gated else None
    return (3 if temporal else 1), gating_fn

  def first_3x3(net, name):
    t, gating_fn = switches(name)
    net = conv3d_spatiotemporal(net, depth(192), [t, 3, 3], scope=name)
    return gating_fn(net, name) if gating_fn else net

  def module(net, name):
    t, gating_fn = switches(name)
    return inception_block_v1_3d(
        net, *(depth(d) for d in inception_v1.MODULE_DEPTHS[name]),
        temporal_kernel_size=t, self_gating_fn=gating_fn,
        data_format=data_format, scope=name)

  def max_pool(kernel_size, stride):
    return lambda net, name: slim.max_pool3d(net, kernel_size, stride=stride,
                                             scope=name)

  stages = [
      ('Conv2d_1a_7x7', lambda net, name: conv3d_spatiotemporal(
          net, depth(64), [first_temporal_kernel_size, 7, 7], stride=2,
          separable=False, scope=name)),
      ('MaxPool_2a_3x3', max_pool([1, 3, 3], [1, 2, 2])),
      ('Conv2d_2b_1x1', lambda net, name: slim.conv3d(
          net, depth(64), [1, 1, 1], scope=name)),
      ('Conv2d_2c_3x3', first_3x3),
      ('MaxPool_3a_3x3', max_pool([1, 3, 3], [1, 2, 2])),
      ('Mixed_3b', module),
      ('Mixed_3c', module),
      ('MaxPool_4a_3x3', max_pool([3, 3, 3], [2, 2, 2])),
      ('Mixed_4b', module),
      ('Mixed_4c', module),
      ('Mixed_4d', module),
      ('Mixed_4e', module),
      ('Mixed_4f', module),
      ('MaxPool_5a_2x2', max_pool([2, 2, 2], [2, 2, 2])),
      ('Mixed_5b', module),
      ('Mixed_5c', module),
  ]

  i3d_utils.check_clips(inputs, 's3dg_base')
  # With NCDHW, batch norm must normalise axis 1 (slim calls that 'NCHW').
  batch_norm_format = 'NCHW' if data_format == 'NCDHW' else 'NHWC'
  with tf1.variable_scope(scope, 'InceptionV1', [inputs]):
    with slim.arg_scope([slim.conv3d], weights_initializer=trunc_normal(0.01)), \
        slim.arg_scope([slim.batch_norm], data_format=batch_norm_format), \
        slim.arg_scope([slim.conv3d, slim.max_pool3d, conv3d_spatiotemporal],
                       stride=1, data_format=data_format, padding='SAME'):
      return inception_utils.build_up_to(inputs, stages, final_endpoint)


def video_classifier(net, end_points, num_classes, dropout_keep_prob,
                     prediction_fn, spatial_squeeze, data_format):
  """The I3D / S3D-G head on the trunk's output, under the current scope.

  Logits/AvgPool_0a_7x7 ([2, 7, 7] average, clipped to small clips), then
  Inception v1's dropout and linear 1x1(x1) convolution Logits/Conv2d_0c_1x1,
  whose logits are averaged over time. With num_classes 0 or None, the pooled
  features averaged over time (before dropout) are returned instead of
  logits.
  """
  with tf1.variable_scope('Logits'):
    if data_format == 'NCDHW':
      net = tf.transpose(net, [0, 2, 3, 4, 1])
    kernel_size = i3d_utils.reduced_kernel_size_3d(net, [2, 7, 7])
    net = slim.avg_pool3d(net, kernel_size, stride=1, scope='AvgPool_0a_7x7')
    if not num_classes:
      features = tf.reduce_mean(net, axis=1)
      if spatial_squeeze:
        features = tf.squeeze(features, [1, 2], name='SpatialSqueeze')
      return features, end_points
    logits = inception_utils.dropout_logits(
        net, end_points, num_classes, dropout_keep_prob, spatial_squeeze,
        inception_v1.HEAD)
    end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
  return logits, end_points


def s3dg(inputs,
         num_classes=1000,
         first_temporal_kernel_size=3,
         temporal_conv_startat='Conv2d_2c_3x3',
         gating_startat='Conv2d_2c_3x3',
         final_endpoint='Mixed_5c',
         min_depth=16,
         depth_multiplier=1.0,
         dropout_keep_prob=0.8,
         is_training=True,
         prediction_fn=slim.softmax,
         spatial_squeeze=True,
         reuse=None,
         data_format='NDHWC',
         scope='InceptionV1'):
  """S3D-G classifier; TF-Slim's default input is 64 frames of 224x224.

  Args:
    inputs: clips, [batch, frames, height, width, 3] (or NCDHW, see
      data_format).
    num_classes: number of classes; 0 or None returns the pooled features
      [batch, 1024] instead of logits.
    first_temporal_kernel_size, temporal_conv_startat, gating_startat,
      final_endpoint, min_depth, depth_multiplier, data_format: see
      `s3dg_base`.
    dropout_keep_prob: fraction of activations kept before the classifier.
    is_training: whether batch norm and dropout run in training mode.
    prediction_fn: maps logits to predictions (end point 'Predictions').
    spatial_squeeze: if True, logits are [batch, num_classes], otherwise
      [batch, 1, 1, num_classes].
    reuse: whether the variables are reused; `scope` must then be given.
    scope: variable scope.

  Returns:
    (logits, end_points).
  """
  i3d_utils.check_data_format(data_format)
  i3d_utils.check_clips(inputs, 's3dg')
  with tf1.variable_scope(scope, 'InceptionV1', [inputs], reuse=reuse) as scope:
    with slim.arg_scope([slim.batch_norm, slim.dropout],
                        is_training=is_training):
      net, end_points = s3dg_base(
          inputs, first_temporal_kernel_size, temporal_conv_startat,
          gating_startat, final_endpoint, min_depth, depth_multiplier,
          data_format, scope)
      return video_classifier(net, end_points, num_classes, dropout_keep_prob,
                              prediction_fn, spatial_squeeze, data_format)


# Clips of 64 frames of 224x224; TF-Slim's default of 1000 classes (it
# publishes no checkpoint of S3D-G).
register_network('s3dg', s3dg, s3dg_arg_scope, default_image_size=224,
                 num_frames=64, num_classes=1000,
                 preprocessing_name='inception',
                 logits_scopes=('InceptionV1/Logits',))
