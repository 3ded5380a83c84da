"""AlexNet v2: the single-column network of Krizhevsky's "One weird trick" (2014).

As in TF-Slim, the LRN layers are gone and the fully connected layers are
convolutions (fc6 5x5 VALID, fc7 and fc8 1x1), so the network also runs fully
convolutionally on larger images with `spatial_squeeze=False`. End-point keys
are full scope paths ('alexnet_v2/conv1'), as TF-Slim's outputs collection
names them.
"""
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets import fc_utils
from nets.registry import register_network

tf1 = tf.compat.v1


def alexnet_v2_arg_scope(weight_decay=0.0005):
  """ReLU layers with 0.1 biases and L2 decay; SAME convolutions, VALID pools."""
  return fc_utils.arg_scope(weight_decay, tf1.constant_initializer(0.1),
                            valid_pools=True)


# The single column of the paper without its LRN layers, as in TF-Slim.
_FEATURES = (
    fc_utils.layer(slim.conv2d, 64, [11, 11], 4, padding='VALID',
                   scope='conv1'),
    fc_utils.layer(slim.max_pool2d, [3, 3], 2, scope='pool1'),
    fc_utils.layer(slim.conv2d, 192, [5, 5], scope='conv2'),
    fc_utils.layer(slim.max_pool2d, [3, 3], 2, scope='pool2'),
    fc_utils.layer(slim.conv2d, 384, [3, 3], scope='conv3'),
    fc_utils.layer(slim.conv2d, 384, [3, 3], scope='conv4'),
    fc_utils.layer(slim.conv2d, 256, [3, 3], scope='conv5'),
    fc_utils.layer(slim.max_pool2d, [3, 3], 2, scope='pool5'),
)

def alexnet_v2(inputs, num_classes=1000, is_training=True,
               dropout_keep_prob=0.5, spatial_squeeze=True, scope='alexnet_v2',
               global_pool=False):
  """Builds AlexNet v2; returns (logits, end_points).

  Args:
    inputs: float images [batch, height, width, channels]; 224x224 makes fc6
      see exactly its 5x5 window.
    num_classes: classes of fc8; 0 or None returns the fc7 features instead.
    is_training: enables dropout.
    dropout_keep_prob: probability of keeping an fc6/fc7 activation.
    spatial_squeeze: drops the 1x1 spatial dimensions of the logits.
    scope: variable scope of the network.
    global_pool: averages fc7 over space first, for any input size (not
      part of the published network).

  Returns:
    (logits or features, end_points dict keyed by scope path).
  """
  return fc_utils.build('alexnet_v2', _FEATURES, 4096, [5, 5], inputs,
                        num_classes, is_training, dropout_keep_prob,
                        spatial_squeeze, scope, global_pool,
                        small_fc_init=True)


register_network('alexnet_v2', alexnet_v2, alexnet_v2_arg_scope,
                 default_image_size=224, num_classes=1001,
                 preprocessing_name='vgg', logits_scopes=('alexnet_v2/fc8',))
