"""ResNet v2 (full pre-activation: batch norm before every convolution).

The bottleneck unit of [2]: batch norm + ReLU ('preact') precede the weight
layers and the sum is left un-normalized, so the network ends with one more
batch norm + ReLU ('postnorm'), and conv1 has neither. TF-Slim's published
resnet_v2_* checkpoints have 1001 classes (0 = background) and were trained
with VGG preprocessing in TF-Slim's preprocessing_factory.

  with slim.arg_scope(resnet_v2.resnet_arg_scope()):
    logits, end_points = resnet_v2.resnet_v2_101(images, 1001,
                                                 is_training=False)

[1] He et al., Deep Residual Learning for Image Recognition. arXiv:1512.03385
[2] He et al., Identity Mappings in Deep Residual Networks. arXiv:1603.05027
"""
import functools

import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets import registry
from nets import resnet_utils

tf1 = tf.compat.v1
resnet_arg_scope = resnet_utils.resnet_arg_scope


@slim.add_arg_scope
def bottleneck(inputs, depth, depth_bottleneck, stride, rate=1,
               outputs_collections=None, scope=None):
  """Pre-activation bottleneck: BN-ReLU, 1x1, 3x3 (strided, atrous), 1x1.

  A projection shortcut reads the pre-activated input; an identity shortcut
  the raw input. The sum is returned without normalization or activation.
  """
  with tf1.variable_scope(scope, 'bottleneck_v2', [inputs]) as sc:
    depth_in = slim.utils.last_dimension(inputs.get_shape(), min_rank=4)
    preact = slim.batch_norm(inputs, activation_fn=tf.nn.relu, scope='preact')
    if depth == depth_in:
      shortcut = resnet_utils.subsample(inputs, stride, 'shortcut')
    else:
      shortcut = slim.conv2d(preact, depth, [1, 1], stride=stride,
                             normalizer_fn=None, activation_fn=None,
                             scope='shortcut')
    residual = slim.conv2d(preact, depth_bottleneck, [1, 1], stride=1,
                           scope='conv1')
    residual = resnet_utils.conv2d_same(residual, depth_bottleneck, 3, stride,
                                        rate=rate, scope='conv2')
    # The next unit's preact (or postnorm) normalizes the sum.
    residual = slim.conv2d(residual, depth, [1, 1], stride=1,
                           normalizer_fn=None, activation_fn=None,
                           scope='conv3')
    return slim.utils.collect_named_outputs(outputs_collections, sc.name,
                                            shortcut + residual)


def resnet_v2(inputs, blocks, num_classes=None, is_training=True,
              global_pool=True, output_stride=None, include_root_block=True,
              spatial_squeeze=True, store_non_strided_activations=False,
              reuse=None, scope=None):
  """Builds a v2 ResNet from `blocks`; returns (net, end_points).

  Arguments and results as resnet_v1.resnet_v1. Without the root block,
  `inputs` should come from a convolution without normalization/activation,
  as conv1's output does. 'postnorm' has no end point (as in TF-Slim).
  """
  return resnet_utils.resnet(
      inputs, blocks, bottleneck, True, num_classes, is_training,
      global_pool, output_stride, include_root_block, spatial_squeeze,
      store_non_strided_activations, reuse, scope, 'resnet_v2')


resnet_v2.default_image_size = 224


# resnet_v2_block(scope, base_depth, num_units, stride): a block of
# `num_units` v2 bottlenecks; the last one strides.
resnet_v2_block = functools.partial(resnet_utils.bottleneck_block, bottleneck)


# TF-Slim's depths, one function each (UNITS_PER_BLOCK: 50, 101, 152, 200).
resnet_v2_50, resnet_v2_101, resnet_v2_152, resnet_v2_200 = (
    resnet_utils.standard_resnet(resnet_v2, resnet_v2_block, depth)
    for depth in resnet_utils.UNITS_PER_BLOCK)

for _network in (resnet_v2_50, resnet_v2_101, resnet_v2_152, resnet_v2_200):
  registry.register_network(
      _network.__name__, _network, resnet_arg_scope,
      _network.default_image_size, num_classes=1001,
      preprocessing_name='vgg', logits_scopes=(_network.__name__ + '/logits',),
      published={
          'resnet_v2_50': ('resnet_v2_50_2017_04_14.tar.gz', 75.6, 92.8),
          'resnet_v2_101': ('resnet_v2_101_2017_04_14.tar.gz', 77.0, 93.7),
          'resnet_v2_152': ('resnet_v2_152_2017_04_14.tar.gz', 77.8, 94.1),
      }.get(_network.__name__))
del _network
