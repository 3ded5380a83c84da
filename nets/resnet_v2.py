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
    preact = slim.batch_norm(inputs, activation_fn=tf.nn.relu, scope='preact')
    # The next unit's preact (or postnorm) normalizes the sum.
    shortcut, residual = resnet_utils.bottleneck_branches(
        inputs, preact, depth, depth_bottleneck, stride, rate, normalized=False)
    return slim.utils.collect_named_outputs(outputs_collections, sc.name,
                                            shortcut + residual)


# resnet_v2_block(scope, base_depth, num_units, stride): a block of
# `num_units` v2 bottlenecks; the last one strides.
resnet_v2, resnet_v2_block = resnet_utils.family(
    bottleneck, True, 'resnet_v2',
    'Builds a v2 ResNet from `blocks`; returns (net, end_points).\n\n'
    '  Without the root block, `inputs` should come from a convolution\n'
    '  without normalization/activation, as conv1\'s output does.\n'
    '  \'postnorm\' has no end point (as in TF-Slim).')

# TF-Slim's depths, one function each (UNITS_PER_BLOCK: 50, 101, 152, 200).
resnet_v2_50, resnet_v2_101, resnet_v2_152, resnet_v2_200 = (
    resnet_utils.standard_resnets(resnet_v2, resnet_v2_block))

# The published v2 checkpoints: 1001 classes (0 = background).
for _info in resnet_utils.registrations(
    (resnet_v2_50, resnet_v2_101, resnet_v2_152, resnet_v2_200),
    resnet_arg_scope, num_classes=1001, release='2017_04_14',
    accuracy={50: (75.6, 92.8), 101: (77.0, 93.7), 152: (77.8, 94.1)}):
  registry.register_network(**_info)
del _info
