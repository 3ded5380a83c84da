"""Inception v2 (BN-Inception), as in TF-Slim.

Ioffe and Szegedy, "Batch Normalization: Accelerating Deep Network Training by
Reducing Internal Covariate Shift", https://arxiv.org/abs/1502.03167.
Scope and end-point names equal those of TF-Slim's published checkpoint
(`inception_v2_2016_08_28`), whose first layer is a separable 7x7 convolution
(`use_separable_conv=True`; it has biases and no batch norm, because the
Inception arg scope only configures `slim.conv2d`).
"""
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets import inception_utils
from nets.registry import register_network

tf1 = tf.compat.v1

_reduced_kernel_size_for_small_input = (
    inception_utils.reduced_kernel_size_for_small_input)


trunc_normal = inception_utils.trunc_normal  # TF-Slim exposes it here


# Inception modules that keep the spatial size: depths of
# (1x1, 3x3 reduce, 3x3, double-3x3 reduce, double-3x3, pool projection) and
# the pooling of the projection branch.
_MODULES = {
    'Mixed_3b': ((64, 64, 64, 64, 96, 32), 'avg'),
    'Mixed_3c': ((64, 64, 96, 64, 96, 64), 'avg'),
    'Mixed_4b': ((224, 64, 96, 96, 128, 128), 'avg'),
    'Mixed_4c': ((192, 96, 128, 96, 128, 128), 'avg'),
    'Mixed_4d': ((160, 128, 160, 128, 160, 96), 'avg'),
    'Mixed_4e': ((96, 128, 192, 160, 192, 96), 'avg'),
    'Mixed_5b': ((352, 192, 320, 160, 224, 128), 'avg'),
    'Mixed_5c': ((352, 192, 320, 192, 224, 128), 'max'),
}

# Grid-reduction modules (stride 2, no 1x1 branch, max pool passed through):
# depths of (3x3 reduce, 3x3, double-3x3 reduce, double-3x3).
_REDUCTIONS = {
    'Mixed_4a': (128, 160, 64, 96),
    'Mixed_5a': (128, 192, 192, 256),
}


conv = inception_utils.conv
avg_pool = inception_utils.avg_pool
max_pool = inception_utils.max_pool


def _inception_module(net, end_point, depth, concat_axis):
  depths, pool = _MODULES[end_point]
  d1x1, d3x3_reduce, d3x3, dbl_reduce, dbl, dpool = (depth(d) for d in depths)
  pooling = (max_pool([3, 3], 'MaxPool_0a_3x3') if pool == 'max'
             else avg_pool([3, 3], 'AvgPool_0a_3x3'))
  return inception_utils.mixed(
      end_point, net,
      [conv(d1x1, [1, 1], 'Conv2d_0a_1x1')],
      [conv(d3x3_reduce, [1, 1], 'Conv2d_0a_1x1',
            weights_initializer=trunc_normal(0.09)),
       conv(d3x3, [3, 3], 'Conv2d_0b_3x3')],
      [conv(dbl_reduce, [1, 1], 'Conv2d_0a_1x1',
            weights_initializer=trunc_normal(0.09)),
       conv(dbl, [3, 3], 'Conv2d_0b_3x3'),
       conv(dbl, [3, 3], 'Conv2d_0c_3x3')],
      [pooling, conv(dpool, [1, 1], 'Conv2d_0b_1x1',
                     weights_initializer=trunc_normal(0.1))],
      axis=concat_axis)


def _reduction_module(net, end_point, depth, concat_axis):
  d3x3_reduce, d3x3, dbl_reduce, dbl = (
      depth(d) for d in _REDUCTIONS[end_point])
  return inception_utils.mixed(
      end_point, net,
      [conv(d3x3_reduce, [1, 1], 'Conv2d_0a_1x1',
            weights_initializer=trunc_normal(0.09)),
       conv(d3x3, [3, 3], 'Conv2d_1a_3x3', stride=2)],
      [conv(dbl_reduce, [1, 1], 'Conv2d_0a_1x1',
            weights_initializer=trunc_normal(0.09)),
       conv(dbl, [3, 3], 'Conv2d_0b_3x3'),
       conv(dbl, [3, 3], 'Conv2d_1a_3x3', stride=2)],
      [max_pool([3, 3], 'MaxPool_1a_3x3', stride=2)],
      axis=concat_axis)


# The classifier's names in the published checkpoint.
HEAD = inception_utils.Head([7, 7])


def inception_v2_base(inputs,
                      final_endpoint='Mixed_5c',
                      min_depth=16,
                      depth_multiplier=1.0,
                      use_separable_conv=True,
                      data_format='NHWC',
                      include_root_block=True,
                      scope=None):
  """Inception v2 from `inputs` up to `final_endpoint`.

  Args:
    inputs: a tensor of shape [batch_size, height, width, channels] (or
      [batch_size, channels, height, width] with data_format 'NCHW').
    final_endpoint: the end point to build up to, one of 'Conv2d_1a_7x7',
      'MaxPool_2a_3x3', 'Conv2d_2b_1x1', 'Conv2d_2c_3x3', 'MaxPool_3a_3x3',
      'Mixed_3b', 'Mixed_3c', 'Mixed_4a', 'Mixed_4b', 'Mixed_4c', 'Mixed_4d',
      'Mixed_4e', 'Mixed_5a', 'Mixed_5b', 'Mixed_5c'.
    min_depth: minimum number of channels of every convolution; only binds
      when depth_multiplier < 1.
    depth_multiplier: multiplier (> 0) of the number of channels of every
      convolution; 1.0 gives the published network.
    use_separable_conv: if True (as in the published checkpoint), the first
      7x7 convolution is depthwise-separable; otherwise it is a plain
      convolution.
    data_format: 'NHWC' or 'NCHW'; NCHW needs use_separable_conv=False.
    include_root_block: if False, the stem (Conv2d_1a_7x7 to MaxPool_3a_3x3)
      is left out and `inputs` feed Mixed_3b directly.
    scope: variable scope (default 'InceptionV2').

  Returns:
    (net, end_points): the output of `final_endpoint`, and a dict of the
    output of every stage built, in build order.

  Raises:
    ValueError: for an unknown final_endpoint or data_format, a
      depth_multiplier <= 0, or NCHW with a separable first convolution.
  """
  depth = inception_utils.thinned_depth(depth_multiplier, min_depth)
  if data_format not in ('NHWC', 'NCHW'):
    raise ValueError("data_format must be 'NHWC' or 'NCHW', not %r"
                     % (data_format,))
  if data_format == 'NCHW' and use_separable_conv:
    raise ValueError(
        'separable convolution only supports NHWC layout. NCHW data format '
        'can only be used when use_separable_conv is False.')
  concat_axis = 3 if data_format == 'NHWC' else 1

  def first_conv(net, name):
    if use_separable_conv:
      # depthwise_multiplier sets the channels of the depthwise step; keeping
      # in_channels * depthwise_multiplier <= out_channels avoids an
      # over-parameterized separable convolution.
      depthwise_multiplier = min(int(depth(64) / 3), 8)
      return slim.separable_conv2d(
          net, depth(64), [7, 7], depth_multiplier=depthwise_multiplier,
          stride=2, padding='SAME', weights_initializer=trunc_normal(1.0),
          scope=name)
    return slim.conv2d(net, depth(64), [7, 7], stride=2,
                       weights_initializer=trunc_normal(1.0), scope=name)

  def module(net, name):
    return _inception_module(net, name, depth, concat_axis)

  def reduction(net, name):
    return _reduction_module(net, name, depth, concat_axis)

  stages = []
  if include_root_block:
    stages += [
        ('Conv2d_1a_7x7', first_conv),
        ('MaxPool_2a_3x3', lambda net, name: slim.max_pool2d(
            net, [3, 3], stride=2, scope=name)),
        ('Conv2d_2b_1x1', lambda net, name: slim.conv2d(
            net, depth(64), [1, 1], weights_initializer=trunc_normal(0.1),
            scope=name)),
        ('Conv2d_2c_3x3', lambda net, name: slim.conv2d(
            net, depth(192), [3, 3], scope=name)),
        ('MaxPool_3a_3x3', lambda net, name: slim.max_pool2d(
            net, [3, 3], stride=2, scope=name)),
    ]
  stages += [
      ('Mixed_3b', module),
      ('Mixed_3c', module),
      ('Mixed_4a', reduction),
      ('Mixed_4b', module),
      ('Mixed_4c', module),
      ('Mixed_4d', module),
      ('Mixed_4e', module),
      ('Mixed_5a', reduction),
      ('Mixed_5b', module),
      ('Mixed_5c', module),
  ]

  with tf1.variable_scope(scope, 'InceptionV2', [inputs]):
    with slim.arg_scope(
        [slim.conv2d, slim.max_pool2d, slim.avg_pool2d],
        stride=1, padding='SAME', data_format=data_format):
      return inception_utils.build_up_to(inputs, stages, final_endpoint)


inception_v2_arg_scope = inception_utils.inception_arg_scope


def inception_v2(inputs,
                 num_classes=1000,
                 is_training=True,
                 dropout_keep_prob=0.8,
                 min_depth=16,
                 depth_multiplier=1.0,
                 prediction_fn=slim.softmax,
                 spatial_squeeze=True,
                 reuse=None,
                 scope='InceptionV2',
                 global_pool=False,
                 use_separable_conv=True,
                 data_format='NHWC'):
  """Inception v2 classifier; the published checkpoint was trained at 224x224.

  Args:
    inputs: a tensor of shape [batch_size, height, width, channels] (or
      [batch_size, channels, height, width] with data_format 'NCHW').
    num_classes: number of classes; 0 or None leaves out the classifier and
      returns the pooled features (end point 'AvgPool_1a' or 'global_pool')
      instead of logits.
    is_training: whether batch norm and dropout run in training mode.
    dropout_keep_prob: fraction of activations kept by the dropout before the
      classifier.
    min_depth, depth_multiplier: see `inception_v2_base`.
    prediction_fn: maps logits to predictions (end point 'Predictions').
    spatial_squeeze: if True, logits are [batch, num_classes], otherwise
      [batch, 1, 1, num_classes] (channels-last for either data_format).
    reuse: whether the variables are reused; `scope` must then be given.
    scope: variable scope.
    global_pool: if True, the features are averaged over all positions;
      otherwise a 7x7 VALID average pool, shrunk for inputs smaller than
      224x224 (see `_reduced_kernel_size_for_small_input`).
    use_separable_conv: see `inception_v2_base`.
    data_format: see `inception_v2_base`.

  Returns:
    (logits, end_points); `logits` is the pre-logits features when
    num_classes is 0 or None.

  Raises:
    ValueError: if depth_multiplier <= 0, or for an invalid data_format.
  """
  if depth_multiplier <= 0:
    raise ValueError('depth_multiplier is not greater than zero.')
  with tf1.variable_scope(scope, 'InceptionV2', [inputs], reuse=reuse) as scope:
    with slim.arg_scope([slim.batch_norm, slim.dropout],
                        is_training=is_training):
      net, end_points = inception_v2_base(
          inputs, scope=scope, min_depth=min_depth,
          depth_multiplier=depth_multiplier,
          use_separable_conv=use_separable_conv, data_format=data_format)
      with slim.arg_scope([slim.conv2d, slim.avg_pool2d],
                          data_format=data_format):
        return inception_utils.classifier_head(
            net, end_points, num_classes, HEAD, dropout_keep_prob,
            prediction_fn, spatial_squeeze, global_pool, data_format)


register_network('inception_v2', inception_v2, inception_v2_arg_scope,
                 default_image_size=224, num_classes=1001,
                 preprocessing_name='inception',
                 logits_scopes=('InceptionV2/Logits',),
                 published=('inception_v2_2016_08_28.tar.gz', 73.9, 91.8))
