"""ResNet v1 (batch norm after every convolution), TF-Slim layout.

The bottleneck unit of [1] with projection shortcuts only where the depth
changes, batch norm after every weight layer and ReLU after the addition: the
architecture of MSRA's ResNet-50/101/152 and of TF-Slim's published
resnet_v1_* checkpoints (1000 classes, no background class, VGG preprocessing).

  with slim.arg_scope(resnet_v1.resnet_arg_scope()):
    logits, end_points = resnet_v1.resnet_v1_101(images, 1000,
                                                 is_training=False)
  # Dense prediction: global_pool=False, output_stride=16 (atrous block4).

[1] He et al., Deep Residual Learning for Image Recognition. arXiv:1512.03385
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
               outputs_collections=None, scope=None,
               use_bounded_activations=False):
  """1x1 reduce, 3x3 (strided, atrous `rate`), 1x1 expand; ReLU after the sum.

  `use_bounded_activations` clips to [0, 6] (relu6) where the unit's
  activations are otherwise unbounded, which quantizes better.
  """
  with tf1.variable_scope(scope, 'bottleneck_v1', [inputs]) as sc:
    shortcut, residual = resnet_utils.bottleneck_branches(
        inputs, inputs, depth, depth_bottleneck, stride, rate, normalized=True,
        shortcut_activation_fn=(tf.nn.relu6 if use_bounded_activations
                                else None))
    if use_bounded_activations:
      residual = tf.clip_by_value(residual, -6.0, 6.0)
      output = tf.nn.relu6(shortcut + residual)
    else:
      output = tf.nn.relu(shortcut + residual)
    return slim.utils.collect_named_outputs(outputs_collections, sc.name,
                                            output)


def resnet_v1(inputs, blocks, num_classes=None, is_training=True,
              global_pool=True, output_stride=None, include_root_block=True,
              spatial_squeeze=True, store_non_strided_activations=False,
              reuse=None, scope=None):
  """A v1 ResNet of `blocks` (see resnet_v1_block); returns (net,
  end_points). Arguments and results as resnet_utils.resnet."""
  return resnet_utils.resnet(
      inputs, blocks, bottleneck, False, num_classes, is_training, global_pool,
      output_stride, include_root_block, spatial_squeeze,
      store_non_strided_activations, reuse, scope, 'resnet_v1')


resnet_v1.default_image_size = 224


def resnet_v1_block(scope, base_depth, num_units, stride):
  """A block of `num_units` v1 bottlenecks of width `base_depth` (output 4x
  wider); the last one strides by `stride`."""
  return resnet_utils.bottleneck_block(bottleneck, scope, base_depth,
                                       num_units, stride)


def _standard_resnet_v1(units_per_block, inputs, num_classes, is_training,
                        global_pool, output_stride, spatial_squeeze,
                        store_non_strided_activations, min_base_depth,
                        depth_multiplier, reuse, scope):
  """resnet_v1 over the four ImageNet blocks, `units_per_block` units each."""
  blocks = resnet_utils.standard_blocks(resnet_v1_block, units_per_block,
                                        min_base_depth, depth_multiplier)
  return resnet_v1(inputs, blocks, num_classes, is_training,
                   global_pool=global_pool, output_stride=output_stride,
                   include_root_block=True, spatial_squeeze=spatial_squeeze,
                   store_non_strided_activations=store_non_strided_activations,
                   reuse=reuse, scope=scope)


# The published v1 checkpoints were converted from MSRA's Caffe models:
# 1000 classes (no background), VGG-style mean subtraction. Each depth below
# takes resnet_v1's arguments, and `depth_multiplier` thins every block (its
# base depth not below `min_base_depth`).
def resnet_v1_50(inputs, num_classes=None, is_training=True, global_pool=True,
                 output_stride=None, spatial_squeeze=True,
                 store_non_strided_activations=False, min_base_depth=8,
                 depth_multiplier=1, reuse=None, scope='resnet_v1_50'):
  """ResNet-50 v1: 3, 4, 6 and 3 bottlenecks per block."""
  return _standard_resnet_v1(
      (3, 4, 6, 3), inputs, num_classes, is_training, global_pool,
      output_stride, spatial_squeeze, store_non_strided_activations,
      min_base_depth, depth_multiplier, reuse, scope)


register_network('resnet_v1_50', resnet_v1_50, resnet_arg_scope,
                 default_image_size=224, num_classes=1000, labels_offset=1,
                 preprocessing_name='vgg',
                 logits_scopes=('resnet_v1_50/logits',),
                 published=('resnet_v1_50_2016_08_28.tar.gz', 75.2, 92.2))


def resnet_v1_101(inputs, num_classes=None, is_training=True, global_pool=True,
                  output_stride=None, spatial_squeeze=True,
                  store_non_strided_activations=False, min_base_depth=8,
                  depth_multiplier=1, reuse=None, scope='resnet_v1_101'):
  """ResNet-101 v1: 3, 4, 23 and 3 bottlenecks per block."""
  return _standard_resnet_v1(
      (3, 4, 23, 3), inputs, num_classes, is_training, global_pool,
      output_stride, spatial_squeeze, store_non_strided_activations,
      min_base_depth, depth_multiplier, reuse, scope)


register_network('resnet_v1_101', resnet_v1_101, resnet_arg_scope,
                 default_image_size=224, num_classes=1000, labels_offset=1,
                 preprocessing_name='vgg',
                 logits_scopes=('resnet_v1_101/logits',),
                 published=('resnet_v1_101_2016_08_28.tar.gz', 76.4, 92.9))


def resnet_v1_152(inputs, num_classes=None, is_training=True, global_pool=True,
                  output_stride=None, spatial_squeeze=True,
                  store_non_strided_activations=False, min_base_depth=8,
                  depth_multiplier=1, reuse=None, scope='resnet_v1_152'):
  """ResNet-152 v1: 3, 8, 36 and 3 bottlenecks per block."""
  return _standard_resnet_v1(
      (3, 8, 36, 3), inputs, num_classes, is_training, global_pool,
      output_stride, spatial_squeeze, store_non_strided_activations,
      min_base_depth, depth_multiplier, reuse, scope)


register_network('resnet_v1_152', resnet_v1_152, resnet_arg_scope,
                 default_image_size=224, num_classes=1000, labels_offset=1,
                 preprocessing_name='vgg',
                 logits_scopes=('resnet_v1_152/logits',),
                 published=('resnet_v1_152_2016_08_28.tar.gz', 76.8, 93.2))


def resnet_v1_200(inputs, num_classes=None, is_training=True, global_pool=True,
                  output_stride=None, spatial_squeeze=True,
                  store_non_strided_activations=False, min_base_depth=8,
                  depth_multiplier=1, reuse=None, scope='resnet_v1_200'):
  """ResNet-200 v1: 3, 24, 36 and 3 bottlenecks per block (no published
  checkpoint)."""
  return _standard_resnet_v1(
      (3, 24, 36, 3), inputs, num_classes, is_training, global_pool,
      output_stride, spatial_squeeze, store_non_strided_activations,
      min_base_depth, depth_multiplier, reuse, scope)


register_network('resnet_v1_200', resnet_v1_200, resnet_arg_scope,
                 default_image_size=224, num_classes=1000, labels_offset=1,
                 preprocessing_name='vgg',
                 logits_scopes=('resnet_v1_200/logits',))
