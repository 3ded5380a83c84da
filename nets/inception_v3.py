"""Inception v3, as in TF-Slim, with its auxiliary classifier.

Szegedy et al., "Rethinking the Inception Architecture for Computer Vision",
https://arxiv.org/abs/1512.00567.
Scope and end-point names equal those of TF-Slim's published checkpoint
(`inception_v3_2016_08_28`), including its irregular ones: Mixed_5c's
`Conv2d_0b_1x1` / `Conv_1_0c_5x5`, Mixed_6a's 3x3 convolutions named
`Conv2d_1a_1x1`, and Mixed_7c's `Conv2d_0c_3x1`.
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


# 35x35 modules: depth of the pool projection, and the scopes of the 5x5
# branch (its 1x1 reduction, its 5x5), which Mixed_5c names differently.
_MODULES_35 = {
    'Mixed_5b': (32, ('Conv2d_0a_1x1', 'Conv2d_0b_5x5')),
    'Mixed_5c': (64, ('Conv2d_0b_1x1', 'Conv_1_0c_5x5')),
    'Mixed_5d': (64, ('Conv2d_0a_1x1', 'Conv2d_0b_5x5')),
}

# 17x17 modules: depth inside the factorized 7x7 branches.
_MODULES_17 = {'Mixed_6b': 128, 'Mixed_6c': 160, 'Mixed_6d': 160,
               'Mixed_6e': 192}

# 8x8 modules: scope of the 3x1 convolution of Branch_1.
_MODULES_8 = {'Mixed_7b': 'Conv2d_0b_3x1', 'Mixed_7c': 'Conv2d_0c_3x1'}


avg_pool = inception_utils.avg_pool
max_pool = inception_utils.max_pool
split = inception_utils.split


def _thinned_conv(depth):
  """inception_utils.conv with its depth passed through `depth`."""
  return lambda d, kernel_size, scope, **kwargs: inception_utils.conv(
      depth(d), kernel_size, scope, **kwargs)


def _module_35(net, end_point, depth):
  pool_depth, (reduce_scope, conv_scope) = _MODULES_35[end_point]
  conv = _thinned_conv(depth)
  return inception_utils.mixed(
      end_point, net,
      [conv(64, [1, 1], 'Conv2d_0a_1x1')],
      [conv(48, [1, 1], reduce_scope), conv(64, [5, 5], conv_scope)],
      [conv(64, [1, 1], 'Conv2d_0a_1x1'), conv(96, [3, 3], 'Conv2d_0b_3x3'),
       conv(96, [3, 3], 'Conv2d_0c_3x3')],
      [avg_pool([3, 3], 'AvgPool_0a_3x3'),
       conv(pool_depth, [1, 1], 'Conv2d_0b_1x1')])


def _reduction_35_to_17(net, end_point, depth):
  conv = _thinned_conv(depth)
  return inception_utils.mixed(
      end_point, net,
      [conv(384, [3, 3], 'Conv2d_1a_1x1', stride=2, padding='VALID')],
      [conv(64, [1, 1], 'Conv2d_0a_1x1'), conv(96, [3, 3], 'Conv2d_0b_3x3'),
       conv(96, [3, 3], 'Conv2d_1a_1x1', stride=2, padding='VALID')],
      [max_pool([3, 3], 'MaxPool_1a_3x3', stride=2, padding='VALID')])


def _module_17(net, end_point, depth):
  inner = _MODULES_17[end_point]
  conv = _thinned_conv(depth)
  return inception_utils.mixed(
      end_point, net,
      [conv(192, [1, 1], 'Conv2d_0a_1x1')],
      [conv(inner, [1, 1], 'Conv2d_0a_1x1'),
       conv(inner, [1, 7], 'Conv2d_0b_1x7'),
       conv(192, [7, 1], 'Conv2d_0c_7x1')],
      [conv(inner, [1, 1], 'Conv2d_0a_1x1'),
       conv(inner, [7, 1], 'Conv2d_0b_7x1'),
       conv(inner, [1, 7], 'Conv2d_0c_1x7'),
       conv(inner, [7, 1], 'Conv2d_0d_7x1'),
       conv(192, [1, 7], 'Conv2d_0e_1x7')],
      [avg_pool([3, 3], 'AvgPool_0a_3x3'), conv(192, [1, 1], 'Conv2d_0b_1x1')])


def _reduction_17_to_8(net, end_point, depth):
  conv = _thinned_conv(depth)
  return inception_utils.mixed(
      end_point, net,
      [conv(192, [1, 1], 'Conv2d_0a_1x1'),
       conv(320, [3, 3], 'Conv2d_1a_3x3', stride=2, padding='VALID')],
      [conv(192, [1, 1], 'Conv2d_0a_1x1'),
       conv(192, [1, 7], 'Conv2d_0b_1x7'),
       conv(192, [7, 1], 'Conv2d_0c_7x1'),
       conv(192, [3, 3], 'Conv2d_1a_3x3', stride=2, padding='VALID')],
      [max_pool([3, 3], 'MaxPool_1a_3x3', stride=2, padding='VALID')])


def _module_8(net, end_point, depth):
  conv = _thinned_conv(depth)
  return inception_utils.mixed(
      end_point, net,
      [conv(320, [1, 1], 'Conv2d_0a_1x1')],
      [conv(384, [1, 1], 'Conv2d_0a_1x1'),
       split(conv(384, [1, 3], 'Conv2d_0b_1x3'),
             conv(384, [3, 1], _MODULES_8[end_point]))],
      [conv(448, [1, 1], 'Conv2d_0a_1x1'), conv(384, [3, 3], 'Conv2d_0b_3x3'),
       split(conv(384, [1, 3], 'Conv2d_0c_1x3'),
             conv(384, [3, 1], 'Conv2d_0d_3x1'))],
      [avg_pool([3, 3], 'AvgPool_0a_3x3'), conv(192, [1, 1], 'Conv2d_0b_1x1')])


# The classifier's names in the published checkpoint.
HEAD = inception_utils.Head([8, 8])


def inception_v3_base(inputs,
                      final_endpoint='Mixed_7c',
                      min_depth=16,
                      depth_multiplier=1.0,
                      scope=None):
  """Inception v3 from `inputs` up to `final_endpoint`.

  Args:
    inputs: a tensor of shape [batch_size, height, width, channels].
    final_endpoint: the end point to build up to, one of 'Conv2d_1a_3x3',
      'Conv2d_2a_3x3', 'Conv2d_2b_3x3', 'MaxPool_3a_3x3', 'Conv2d_3b_1x1',
      'Conv2d_4a_3x3', 'MaxPool_5a_3x3', 'Mixed_5b', 'Mixed_5c', 'Mixed_5d',
      'Mixed_6a', 'Mixed_6b', 'Mixed_6c', 'Mixed_6d', 'Mixed_6e', 'Mixed_7a',
      'Mixed_7b', 'Mixed_7c'.
    min_depth: minimum number of channels of every convolution; only binds
      when depth_multiplier < 1.
    depth_multiplier: multiplier (> 0) of the number of channels of every
      convolution; 1.0 gives the published network.
    scope: variable scope (default 'InceptionV3').

  Returns:
    (net, end_points): the output of `final_endpoint`, and a dict of the
    output of every stage built, in build order.

  Raises:
    ValueError: for an unknown final_endpoint or depth_multiplier <= 0.
  """
  depth = inception_utils.thinned_depth(depth_multiplier, min_depth)

  def conv(num_outputs, kernel_size, **kwargs):
    return lambda net, name: slim.conv2d(
        net, depth(num_outputs), kernel_size, scope=name, **kwargs)

  def max_pool(net, name):
    return slim.max_pool2d(net, [3, 3], stride=2, padding='VALID', scope=name)

  def block(module_fn):
    return lambda net, name: module_fn(net, name, depth)

  # The stem (299 -> 35) pads nothing but Conv2d_2b_3x3; the modules pad SAME
  # except in their stride-2 reductions.
  stages = [
      ('Conv2d_1a_3x3', conv(32, [3, 3], stride=2, padding='VALID')),
      ('Conv2d_2a_3x3', conv(32, [3, 3], padding='VALID')),
      ('Conv2d_2b_3x3', conv(64, [3, 3])),
      ('MaxPool_3a_3x3', max_pool),
      ('Conv2d_3b_1x1', conv(80, [1, 1], padding='VALID')),
      ('Conv2d_4a_3x3', conv(192, [3, 3], padding='VALID')),
      ('MaxPool_5a_3x3', max_pool),
      ('Mixed_5b', block(_module_35)),
      ('Mixed_5c', block(_module_35)),
      ('Mixed_5d', block(_module_35)),
      ('Mixed_6a', block(_reduction_35_to_17)),
      ('Mixed_6b', block(_module_17)),
      ('Mixed_6c', block(_module_17)),
      ('Mixed_6d', block(_module_17)),
      ('Mixed_6e', block(_module_17)),
      ('Mixed_7a', block(_reduction_17_to_8)),
      ('Mixed_7b', block(_module_8)),
      ('Mixed_7c', block(_module_8)),
  ]

  with tf1.variable_scope(scope, 'InceptionV3', [inputs]):
    with slim.arg_scope([slim.conv2d, slim.max_pool2d, slim.avg_pool2d],
                        stride=1, padding='SAME'):
      return inception_utils.build_up_to(inputs, stages, final_endpoint)


def _aux_logits(net, num_classes, depth, spatial_squeeze):
  """The auxiliary classifier on Mixed_6e (17x17x768 at 299x299)."""
  with tf1.variable_scope('AuxLogits'):
    net = slim.avg_pool2d(net, [5, 5], stride=3, padding='VALID',
                          scope='AvgPool_1a_5x5')
    net = slim.conv2d(net, depth(128), [1, 1], scope='Conv2d_1b_1x1')
    kernel_size = _reduced_kernel_size_for_small_input(net, [5, 5])
    net = slim.conv2d(net, depth(768), kernel_size,
                      weights_initializer=trunc_normal(0.01), padding='VALID',
                      scope='Conv2d_2a_{}x{}'.format(*kernel_size))
    aux_logits = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                             normalizer_fn=None,
                             weights_initializer=trunc_normal(0.001),
                             scope='Conv2d_2b_1x1')
    if spatial_squeeze:
      aux_logits = tf.squeeze(aux_logits, [1, 2], name='SpatialSqueeze')
    return aux_logits


inception_v3_arg_scope = inception_utils.inception_arg_scope


def inception_v3(inputs,
                 num_classes=1000,
                 is_training=True,
                 dropout_keep_prob=0.8,
                 min_depth=16,
                 depth_multiplier=1.0,
                 prediction_fn=slim.softmax,
                 spatial_squeeze=True,
                 reuse=None,
                 create_aux_logits=True,
                 scope='InceptionV3',
                 global_pool=False):
  """Inception v3 classifier; the published checkpoint was trained at 299x299.

  Args:
    inputs: a tensor of shape [batch_size, height, width, channels].
    num_classes: number of classes; 0 or None leaves out both classifiers and
      returns the pooled features (end point 'AvgPool_1a' or 'global_pool')
      instead of logits.
    is_training: whether batch norm and dropout run in training mode.
    dropout_keep_prob: fraction of activations kept by the dropout before the
      classifier.
    min_depth, depth_multiplier: see `inception_v3_base`.
    prediction_fn: maps logits to predictions (end point 'Predictions').
    spatial_squeeze: if True, logits (and aux logits) are
      [batch, num_classes], otherwise [batch, 1, 1, num_classes].
    reuse: whether the variables are reused; `scope` must then be given.
    create_aux_logits: whether to build the auxiliary classifier (end point
      'AuxLogits', scope 'AuxLogits').
    scope: variable scope.
    global_pool: if True, the features are averaged over all positions;
      otherwise an 8x8 VALID average pool, shrunk for inputs smaller than
      299x299 (see `_reduced_kernel_size_for_small_input`).

  Returns:
    (logits, end_points); `logits` is the pre-logits features when
    num_classes is 0 or None.

  Raises:
    ValueError: if depth_multiplier <= 0.
  """
  depth = inception_utils.thinned_depth(depth_multiplier, min_depth)

  with tf1.variable_scope(scope, 'InceptionV3', [inputs], reuse=reuse) as scope:
    with slim.arg_scope([slim.batch_norm, slim.dropout],
                        is_training=is_training):
      net, end_points = inception_v3_base(
          inputs, scope=scope, min_depth=min_depth,
          depth_multiplier=depth_multiplier)

      if create_aux_logits and num_classes:
        with slim.arg_scope([slim.conv2d, slim.max_pool2d, slim.avg_pool2d],
                            stride=1, padding='SAME'):
          end_points['AuxLogits'] = _aux_logits(
              end_points['Mixed_6e'], num_classes, depth, spatial_squeeze)

      return inception_utils.classifier_head(
          net, end_points, num_classes, HEAD, dropout_keep_prob,
          prediction_fn, spatial_squeeze, global_pool)


register_network('inception_v3', inception_v3, inception_v3_arg_scope,
                 default_image_size=299, num_classes=1001,
                 preprocessing_name='inception',
                 logits_scopes=('InceptionV3/Logits', 'InceptionV3/AuxLogits'),
                 published=('inception_v3_2016_08_28.tar.gz', 78.0, 93.9))
