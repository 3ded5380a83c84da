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
import contextlib

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
  with tf1.variable_scope(scope, 'resnet_v2', [inputs], reuse=reuse) as sc:
    end_points_collection = sc.original_name_scope + '_end_points'
    with slim.arg_scope([slim.conv2d, bottleneck,
                         resnet_utils.stack_blocks_dense],
                        outputs_collections=end_points_collection), \
        (slim.arg_scope([slim.batch_norm], is_training=is_training)
         if is_training is not None else contextlib.nullcontext()):
      net = inputs
      if include_root_block:
        output_stride = resnet_utils.check_root_output_stride(output_stride)
        # The first unit's preact normalizes and activates conv1's output.
        with slim.arg_scope([slim.conv2d], activation_fn=None,
                            normalizer_fn=None):
          net = resnet_utils.conv2d_same(net, 64, 7, stride=2, scope='conv1')
        net = slim.max_pool2d(net, [3, 3], stride=2, scope='pool1')
      net = resnet_utils.stack_blocks_dense(net, blocks, output_stride,
                                            store_non_strided_activations)
      net = slim.batch_norm(net, activation_fn=tf.nn.relu, scope='postnorm')
      end_points = slim.utils.convert_collection_to_dict(
          end_points_collection)
      return resnet_utils.classifier_head(net, end_points, num_classes,
                                          global_pool, spatial_squeeze,
                                          sc.name)


resnet_v2.default_image_size = 224


def resnet_v2_block(scope, base_depth, num_units, stride):
  """A block of `num_units` v2 bottlenecks; the last one strides."""
  return resnet_utils.bottleneck_block(bottleneck, scope, base_depth,
                                       num_units, stride)


def _standard_resnet_v2(depth, inputs, num_classes, is_training, global_pool,
                        output_stride, spatial_squeeze,
                        store_non_strided_activations, min_base_depth,
                        depth_multiplier, reuse, scope):
  blocks = resnet_utils.standard_blocks(
      resnet_v2_block, resnet_utils.UNITS_PER_BLOCK[depth], min_base_depth,
      depth_multiplier)
  return resnet_v2(inputs, blocks, num_classes, is_training,
                   global_pool=global_pool, output_stride=output_stride,
                   include_root_block=True, spatial_squeeze=spatial_squeeze,
                   store_non_strided_activations=store_non_strided_activations,
                   reuse=reuse, scope=scope)


def resnet_v2_50(inputs, num_classes=None, is_training=True, global_pool=True,
                 output_stride=None, spatial_squeeze=True,
                 store_non_strided_activations=False, min_base_depth=8,
                 depth_multiplier=1, reuse=None, scope='resnet_v2_50'):
  """ResNet-50 with v2 units; arguments and results as resnet_v2()."""
  return _standard_resnet_v2(50, inputs, num_classes, is_training,
                             global_pool, output_stride, spatial_squeeze,
                             store_non_strided_activations, min_base_depth,
                             depth_multiplier, reuse, scope)


def resnet_v2_101(inputs, num_classes=None, is_training=True, global_pool=True,
                  output_stride=None, spatial_squeeze=True,
                  store_non_strided_activations=False, min_base_depth=8,
                  depth_multiplier=1, reuse=None, scope='resnet_v2_101'):
  """ResNet-101 with v2 units; arguments and results as resnet_v2()."""
  return _standard_resnet_v2(101, inputs, num_classes, is_training,
                             global_pool, output_stride, spatial_squeeze,
                             store_non_strided_activations, min_base_depth,
                             depth_multiplier, reuse, scope)


def resnet_v2_152(inputs, num_classes=None, is_training=True, global_pool=True,
                  output_stride=None, spatial_squeeze=True,
                  store_non_strided_activations=False, min_base_depth=8,
                  depth_multiplier=1, reuse=None, scope='resnet_v2_152'):
  """ResNet-152 with v2 units; arguments and results as resnet_v2()."""
  return _standard_resnet_v2(152, inputs, num_classes, is_training,
                             global_pool, output_stride, spatial_squeeze,
                             store_non_strided_activations, min_base_depth,
                             depth_multiplier, reuse, scope)


def resnet_v2_200(inputs, num_classes=None, is_training=True, global_pool=True,
                  output_stride=None, spatial_squeeze=True,
                  store_non_strided_activations=False, min_base_depth=8,
                  depth_multiplier=1, reuse=None, scope='resnet_v2_200'):
  """ResNet-200 of [2]; arguments and results as resnet_v2()."""
  return _standard_resnet_v2(200, inputs, num_classes, is_training,
                             global_pool, output_stride, spatial_squeeze,
                             store_non_strided_activations, min_base_depth,
                             depth_multiplier, reuse, scope)


for _network in (resnet_v2_50, resnet_v2_101, resnet_v2_152, resnet_v2_200):
  _network.default_image_size = resnet_v2.default_image_size
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
