"""ResNet v2 (full pre-activation: batch norm before every convolution).

The bottleneck unit of [2]: batch norm + ReLU ('preact') precede the weight
layers and the sum is left un-normalized, so the network ends with one more
batch norm + ReLU ('postnorm'), and conv1 has neither. TF-Slim's published
resnet_v2_* checkpoints have 1001 classes (0 = background) and were trained
with VGG preprocessing in TF-Slim's preprocessing_factory.

  with slim.arg_scope(resnet_v2.resnet_arg_scope()):
    logits, end_points = resnet_v2.resnet_v2_101(images, 1001,
                                                 is_training=False)

[2] He et al., Identity Mappings in Deep Residual Networks. arXiv:1603.05027
"""
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets import resnet_utils
from nets.registry import register_network

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
    preact = slim.batch_norm(inputs, activation_fn=tf.nn.relu, scope='preact')
    # The next unit's preact (or postnorm) normalizes the sum.
    shortcut, residual = resnet_utils.bottleneck_branches(
        inputs, preact, depth, depth_bottleneck, stride, rate, normalized=False)
    return slim.utils.collect_named_outputs(outputs_collections, sc.name,
                                            shortcut + residual)


def resnet_v2(inputs, blocks, num_classes=None, is_training=True,
              global_pool=True, output_stride=None, include_root_block=True,
              spatial_squeeze=True, reuse=None, scope=None):
  """A v2 ResNet of `blocks` (see resnet_v2_block); returns (net,
  end_points). Arguments and results as resnet_utils.resnet."""
  return resnet_utils.resnet(
      inputs, blocks, bottleneck, True, num_classes, is_training, global_pool,
      output_stride, include_root_block, spatial_squeeze, False, reuse, scope,
      'resnet_v2')


resnet_v2.default_image_size = 224


def resnet_v2_block(scope, base_depth, num_units, stride):
  """A block of `num_units` v2 bottlenecks of width `base_depth` (output 4x
  wider); the last one strides by `stride`."""
  return resnet_utils.bottleneck_block(bottleneck, scope, base_depth,
                                       num_units, stride)


def _standard_resnet_v2(units_per_block, inputs, num_classes, is_training,
                        global_pool, output_stride, spatial_squeeze, reuse,
                        scope):
  """resnet_v2 over the four ImageNet blocks, `units_per_block` units each."""
  blocks = resnet_utils.standard_blocks(resnet_v2_block, units_per_block)
  return resnet_v2(inputs, blocks, num_classes, is_training,
                   global_pool=global_pool, output_stride=output_stride,
                   include_root_block=True, spatial_squeeze=spatial_squeeze,
                   reuse=reuse, scope=scope)


# The published v2 checkpoints: 1001 classes (0 = background). Each depth
# below takes resnet_v2's arguments.
def resnet_v2_50(inputs, num_classes=None, is_training=True, global_pool=True,
                 output_stride=None, spatial_squeeze=True, reuse=None,
                 scope='resnet_v2_50'):
  """ResNet-50 v2: 3, 4, 6 and 3 bottlenecks per block."""
  return _standard_resnet_v2((3, 4, 6, 3), inputs, num_classes, is_training,
                             global_pool, output_stride, spatial_squeeze,
                             reuse, scope)


register_network('resnet_v2_50', resnet_v2_50, resnet_arg_scope,
                 default_image_size=224, preprocessing_name='vgg',
                 logits_scopes=('resnet_v2_50/logits',),
                 published=('resnet_v2_50_2017_04_14.tar.gz', 75.6, 92.8))


def resnet_v2_101(inputs, num_classes=None, is_training=True, global_pool=True,
                  output_stride=None, spatial_squeeze=True, reuse=None,
                  scope='resnet_v2_101'):
  """ResNet-101 v2: 3, 4, 23 and 3 bottlenecks per block."""
  return _standard_resnet_v2((3, 4, 23, 3), inputs, num_classes, is_training,
                             global_pool, output_stride, spatial_squeeze,
                             reuse, scope)


register_network('resnet_v2_101', resnet_v2_101, resnet_arg_scope,
                 default_image_size=224, preprocessing_name='vgg',
                 logits_scopes=('resnet_v2_101/logits',),
                 published=('resnet_v2_101_2017_04_14.tar.gz', 77.0, 93.7))


def resnet_v2_152(inputs, num_classes=None, is_training=True, global_pool=True,
                  output_stride=None, spatial_squeeze=True, reuse=None,
                  scope='resnet_v2_152'):
  """ResNet-152 v2: 3, 8, 36 and 3 bottlenecks per block."""
  return _standard_resnet_v2((3, 8, 36, 3), inputs, num_classes, is_training,
                             global_pool, output_stride, spatial_squeeze,
                             reuse, scope)


register_network('resnet_v2_152', resnet_v2_152, resnet_arg_scope,
                 default_image_size=224, preprocessing_name='vgg',
                 logits_scopes=('resnet_v2_152/logits',),
                 published=('resnet_v2_152_2017_04_14.tar.gz', 77.8, 94.1))


def resnet_v2_200(inputs, num_classes=None, is_training=True, global_pool=True,
                  output_stride=None, spatial_squeeze=True, reuse=None,
                  scope='resnet_v2_200'):
  """ResNet-200 v2: 3, 24, 36 and 3 bottlenecks per block (no published
  checkpoint)."""
  return _standard_resnet_v2((3, 24, 36, 3), inputs, num_classes, is_training,
                             global_pool, output_stride, spatial_squeeze,
                             reuse, scope)


register_network('resnet_v2_200', resnet_v2_200, resnet_arg_scope,
                 default_image_size=224, preprocessing_name='vgg',
                 logits_scopes=('resnet_v2_200/logits',))
