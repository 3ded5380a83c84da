"""Inception v1 (GoogLeNet), as in TF-Slim, with batch norm from the arg scope.

Szegedy et al., "Going Deeper with Convolutions", https://arxiv.org/abs/1409.4842.
Scope and end-point names equal those of TF-Slim's published checkpoint
(`inception_v1_2016_08_28`), including its quirk: Mixed_5b's third branch
names its 3x3 convolution `Conv2d_0a_3x3`.
"""
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets import inception_utils
from nets.registry import register_network

tf1 = tf.compat.v1


trunc_normal = inception_utils.trunc_normal  # TF-Slim exposes it here


# Depths of each Inception module, in the paper's column order:
# (1x1, 3x3 reduce, 3x3, "5x5" reduce, "5x5", pool projection). TF-Slim's v1,
# like its checkpoint, uses a 3x3 convolution where the paper has the 5x5.
MODULE_DEPTHS = {
    'Mixed_3b': (64, 96, 128, 16, 32, 32),
    'Mixed_3c': (128, 128, 192, 32, 96, 64),
    'Mixed_4b': (192, 96, 208, 16, 48, 64),
    'Mixed_4c': (160, 112, 224, 24, 64, 64),
    'Mixed_4d': (128, 128, 256, 24, 64, 64),
    'Mixed_4e': (112, 144, 288, 32, 64, 64),
    'Mixed_4f': (256, 160, 320, 32, 128, 128),
    'Mixed_5b': (256, 160, 320, 32, 128, 128),
    'Mixed_5c': (384, 192, 384, 48, 128, 128),
}

# The published checkpoint names this one convolution differently.
_BRANCH_2_3X3_SCOPE = {'Mixed_5b': 'Conv2d_0a_3x3'}


conv = inception_utils.conv
max_pool = inception_utils.max_pool


def _inception_module(net, end_point, depth):
  d1x1, d3x3_reduce, d3x3, d5x5_reduce, d5x5, dpool = (
      depth(d) for d in MODULE_DEPTHS[end_point])
  return inception_utils.mixed(
      end_point, net,
      [conv(d1x1, [1, 1], 'Conv2d_0a_1x1')],
      [conv(d3x3_reduce, [1, 1], 'Conv2d_0a_1x1'),
       conv(d3x3, [3, 3], 'Conv2d_0b_3x3')],
      [conv(d5x5_reduce, [1, 1], 'Conv2d_0a_1x1'),
       conv(d5x5, [3, 3],
            _BRANCH_2_3X3_SCOPE.get(end_point, 'Conv2d_0b_3x3'))],
      [max_pool([3, 3], 'MaxPool_0a_3x3'), conv(dpool, [1, 1], 'Conv2d_0b_1x1')])


# The classifier's names in the published checkpoint (I3D and S3D-G, inflated
# from it, keep them); its 7x7 pool fits the 224x224 input only.
HEAD = inception_utils.Head(
    [7, 7], pool_scope='AvgPool_0a_7x7', pool_end_point='AvgPool_0a_7x7',
    shrink_pool=False, pool_args={'stride': 1}, dropout_scope='Dropout_0b',
    logits_scope='Conv2d_0c_1x1', pre_logits=False, predictions_in_logits=True)


def inception_v1_base(inputs,
                      final_endpoint='Mixed_5c',
                      min_depth=16,
                      depth_multiplier=1.0,
                      include_root_block=True,
                      scope='InceptionV1'):
  """Inception v1 from `inputs` up to `final_endpoint`.

  Args:
    inputs: a tensor of shape [batch_size, height, width, channels].
    final_endpoint: the end point to build up to, one of 'Conv2d_1a_7x7',
      'MaxPool_2a_3x3', 'Conv2d_2b_1x1', 'Conv2d_2c_3x3', 'MaxPool_3a_3x3',
      'Mixed_3b', 'Mixed_3c', 'MaxPool_4a_3x3', 'Mixed_4b', 'Mixed_4c',
      'Mixed_4d', 'Mixed_4e', 'Mixed_4f', 'MaxPool_5a_2x2', 'Mixed_5b',
      'Mixed_5c'.
    min_depth: minimum number of channels of every convolution; only binds
      when depth_multiplier < 1.
    depth_multiplier: multiplier (> 0) of the number of channels of every
      convolution; 1.0 gives the published network.
    include_root_block: if False, the stem (Conv2d_1a_7x7 to MaxPool_3a_3x3)
      is left out and `inputs` feed Mixed_3b directly.
    scope: variable scope.

  Returns:
    (net, end_points): the output of `final_endpoint`, and a dict of the
    output of every stage built, in build order.

  Raises:
    ValueError: for an unknown final_endpoint or depth_multiplier <= 0.
  """
  depth = inception_utils.thinned_depth(depth_multiplier, min_depth)

  stages = []
  if include_root_block:
    stages += [
        ('Conv2d_1a_7x7', lambda net, name: slim.conv2d(
            net, depth(64), [7, 7], stride=2, scope=name)),
        ('MaxPool_2a_3x3', lambda net, name: slim.max_pool2d(
            net, [3, 3], stride=2, scope=name)),
        ('Conv2d_2b_1x1', lambda net, name: slim.conv2d(
            net, depth(64), [1, 1], scope=name)),
        ('Conv2d_2c_3x3', lambda net, name: slim.conv2d(
            net, depth(192), [3, 3], scope=name)),
        ('MaxPool_3a_3x3', lambda net, name: slim.max_pool2d(
            net, [3, 3], stride=2, scope=name)),
    ]

  def module(net, name):
    return _inception_module(net, name, depth)

  stages += [
      ('Mixed_3b', module),
      ('Mixed_3c', module),
      ('MaxPool_4a_3x3', lambda net, name: slim.max_pool2d(
          net, [3, 3], stride=2, scope=name)),
      ('Mixed_4b', module),
      ('Mixed_4c', module),
      ('Mixed_4d', module),
      ('Mixed_4e', module),
      ('Mixed_4f', module),
      ('MaxPool_5a_2x2', lambda net, name: slim.max_pool2d(
          net, [2, 2], stride=2, scope=name)),
      ('Mixed_5b', module),
      ('Mixed_5c', module),
  ]

  with tf1.variable_scope(scope, 'InceptionV1', [inputs]):
    with slim.arg_scope([slim.conv2d, slim.fully_connected],
                        weights_initializer=trunc_normal(0.01)):
      with slim.arg_scope([slim.conv2d, slim.max_pool2d],
                          stride=1, padding='SAME'):
        return inception_utils.build_up_to(inputs, stages, final_endpoint)


inception_v1_arg_scope = inception_utils.inception_arg_scope


def inception_v1(inputs,
                 num_classes=1000,
                 is_training=True,
                 dropout_keep_prob=0.8,
                 prediction_fn=slim.softmax,
                 spatial_squeeze=True,
                 reuse=None,
                 scope='InceptionV1',
                 global_pool=False):
  """Inception v1 classifier; the published checkpoint was trained at 224x224.

  Args:
    inputs: a tensor of shape [batch_size, height, width, channels].
    num_classes: number of classes; 0 or None leaves out the classifier and
      returns the pooled features (end point 'AvgPool_0a_7x7' or
      'global_pool') instead of logits.
    is_training: whether batch norm and dropout run in training mode.
    dropout_keep_prob: fraction of activations kept by the dropout before the
      classifier.
    prediction_fn: maps logits to predictions (end point 'Predictions').
    spatial_squeeze: if True, logits are [batch, num_classes], otherwise
      [batch, 1, 1, num_classes].
    reuse: whether the variables are reused; `scope` must then be given.
    scope: variable scope.
    global_pool: if True, the features are averaged over all positions, so any
      input size works; otherwise a 7x7 average pool (224x224 inputs).

  Returns:
    (logits, end_points); `logits` is the pre-logits features when
    num_classes is 0 or None.
  """
  with tf1.variable_scope(scope, 'InceptionV1', [inputs], reuse=reuse) as scope:
    with slim.arg_scope([slim.batch_norm, slim.dropout],
                        is_training=is_training):
      net, end_points = inception_v1_base(inputs, scope=scope)
      return inception_utils.classifier_head(
          net, end_points, num_classes, HEAD, dropout_keep_prob,
          prediction_fn, spatial_squeeze, global_pool)


register_network('inception_v1', inception_v1, inception_v1_arg_scope,
                 default_image_size=224, num_classes=1001,
                 preprocessing_name='inception',
                 logits_scopes=('InceptionV1/Logits',),
                 published=('inception_v1_2016_08_28.tar.gz', 69.8, 89.6))
