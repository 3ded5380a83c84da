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
               outputs_collections=None, scope=None,
               use_bounded_activations=False):
  """1x1 reduce, 3x3 (strided, atrous `rate`), 1x1 expand; ReLU after the sum.

  `use_bounded_activations` clips to [0, 6] (relu6) where the unit's
  activations are otherwise unbounded, which quantizes better.
  """
  with tf1.variable_scope(scope, 'bottleneck_v1', [inputs]) as sc:
    depth_in = slim.utils.last_dimension(inputs.get_shape(), min_rank=4)
    if depth == depth_in:
      shortcut = resnet_utils.subsample(inputs, stride, 'shortcut')
    else:
      shortcut = slim.conv2d(
          inputs, depth, [1, 1], stride=stride,
          activation_fn=tf.nn.relu6 if use_bounded_activations else None,
          scope='shortcut')
    residual = slim.conv2d(inputs, depth_bottleneck, [1, 1], stride=1,
                           scope='conv1')
    residual = resnet_utils.conv2d_same(residual, depth_bottleneck, 3, stride,
                                        rate=rate, scope='conv2')
    residual = slim.conv2d(residual, depth, [1, 1], stride=1,
                           activation_fn=None, scope='conv3')
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
  """Builds a v1 ResNet from `blocks`; returns (net, end_points).

  Args:
    inputs: [batch, height, width, channels] images.
    blocks: list of resnet_utils.Block (see resnet_v1_block).
    num_classes: classes of the 'logits' layer; 0 or None returns the features
      (after global pooling if `global_pool`).
    is_training: batch-norm mode. None leaves it to an enclosing
      slim.arg_scope([slim.batch_norm], is_training=...).
    global_pool: average-pool the last feature map to 1x1 (classification);
      False keeps it (dense prediction).
    output_stride: None for the nominal stride 32; else a multiple of 4 that
      the unit strides reach (e.g. 8 or 16), using atrous convolution beyond.
    include_root_block: build conv1 (7x7/2) and pool1 (3x3/2).
    spatial_squeeze: squeeze 1x1 logits to [batch, num_classes].
    store_non_strided_activations: see resnet_utils.stack_blocks_dense.
    reuse, scope: of the network's variable scope.

  Returns:
    net: logits, or features when `num_classes` is 0/None.
    end_points: ordered dict: conv1, every unit's convs and output, every
      block's output, then 'global_pool', logits and 'predictions'.
  """
  return resnet_utils.resnet(
      inputs, blocks, bottleneck, False, num_classes, is_training,
      global_pool, output_stride, include_root_block, spatial_squeeze,
      store_non_strided_activations, reuse, scope, 'resnet_v1')


resnet_v1.default_image_size = 224


# resnet_v1_block(scope, base_depth, num_units, stride): a block of
# `num_units` v1 bottlenecks; the last one strides.
resnet_v1_block = functools.partial(resnet_utils.bottleneck_block, bottleneck)


# TF-Slim's depths, one function each (UNITS_PER_BLOCK: 50, 101, 152, 200).
resnet_v1_50, resnet_v1_101, resnet_v1_152, resnet_v1_200 = (
    resnet_utils.standard_resnet(resnet_v1, resnet_v1_block, depth)
    for depth in resnet_utils.UNITS_PER_BLOCK)

for _network in (resnet_v1_50, resnet_v1_101, resnet_v1_152, resnet_v1_200):
  # The published v1 checkpoints were converted from MSRA's Caffe models:
  # 1000 classes (no background), VGG-style mean subtraction.
  registry.register_network(
      _network.__name__, _network, resnet_arg_scope,
      _network.default_image_size, num_classes=1000,
      preprocessing_name='vgg', logits_scopes=(_network.__name__ + '/logits',),
      labels_offset=1,
      published={
          'resnet_v1_50': ('resnet_v1_50_2016_08_28.tar.gz', 75.2, 92.2),
          'resnet_v1_101': ('resnet_v1_101_2016_08_28.tar.gz', 76.4, 92.9),
          'resnet_v1_152': ('resnet_v1_152_2016_08_28.tar.gz', 76.8, 93.2),
      }.get(_network.__name__))
del _network
