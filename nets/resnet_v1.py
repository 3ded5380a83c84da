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


# resnet_v1_block(scope, base_depth, num_units, stride): a block of
# `num_units` v1 bottlenecks; the last one strides.
resnet_v1, resnet_v1_block = resnet_utils.family(
    bottleneck, False, 'resnet_v1',
    'Builds a v1 ResNet from `blocks`; returns (net, end_points).')

# TF-Slim's depths, one function each (UNITS_PER_BLOCK: 50, 101, 152, 200).
resnet_v1_50, resnet_v1_101, resnet_v1_152, resnet_v1_200 = (
    resnet_utils.standard_resnets(resnet_v1, resnet_v1_block))

# The published v1 checkpoints were converted from MSRA's Caffe models:
# 1000 classes (no background), VGG-style mean subtraction.
for _info in resnet_utils.registrations(
    (resnet_v1_50, resnet_v1_101, resnet_v1_152, resnet_v1_200),
    resnet_arg_scope, num_classes=1000, labels_offset=1, release='2016_08_28',
    accuracy={50: (75.2, 92.2), 101: (76.4, 92.9), 152: (76.8, 93.2)}):
  registry.register_network(**_info)
del _info
