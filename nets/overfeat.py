"""OverFeat (Sermanet et al., 2014, arXiv:1312.6229), the "fast" model, as in TF-Slim.

The fully connected layers are convolutions (fc6 6x6 VALID, fc7 and fc8 1x1):
at 231x231 fc6 sees exactly one window, on larger images the network runs
fully convolutionally with `spatial_squeeze=False`. End-point keys are full
scope paths ('overfeat/conv1'), as TF-Slim's outputs collection names them.
"""
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets import fc_utils
from nets.registry import register_network

tf1 = tf.compat.v1


def overfeat_arg_scope(weight_decay=0.0005):
  """ReLU layers, zero biases, L2 decay; SAME convolutions, VALID pools."""
  return fc_utils.arg_scope(weight_decay, tf1.zeros_initializer(),
                            valid_pools=True)


# The "fast" model's five convolutions; its fc layers are in fc_utils.
_FEATURES = (
    fc_utils.layer(slim.conv2d, 64, [11, 11], 4, padding='VALID',
                   scope='conv1'),
    fc_utils.layer(slim.max_pool2d, [2, 2], scope='pool1'),
    fc_utils.layer(slim.conv2d, 256, [5, 5], padding='VALID', scope='conv2'),
    fc_utils.layer(slim.max_pool2d, [2, 2], scope='pool2'),
    fc_utils.layer(slim.conv2d, 512, [3, 3], scope='conv3'),
    fc_utils.layer(slim.conv2d, 1024, [3, 3], scope='conv4'),
    fc_utils.layer(slim.conv2d, 1024, [3, 3], scope='conv5'),
    fc_utils.layer(slim.max_pool2d, [2, 2], scope='pool5'),
)

def overfeat(inputs, num_classes=1000, is_training=True,
             dropout_keep_prob=0.5, spatial_squeeze=True, scope='overfeat',
             global_pool=False):
  """Builds OverFeat; returns (logits, end_points). Arguments and results as
  alexnet.alexnet_v2's, except that 231x231 images make fc6 see exactly its
  6x6 window."""
  return fc_utils.build('overfeat', _FEATURES, 3072, [6, 6], inputs,
                        num_classes, is_training, dropout_keep_prob,
                        spatial_squeeze, scope, global_pool,
                        small_fc_init=True)


register_network('overfeat', overfeat, overfeat_arg_scope,
                 default_image_size=231, num_classes=1001,
                 preprocessing_name='vgg', logits_scopes=('overfeat/fc8',))
