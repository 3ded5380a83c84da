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

alexnet_v2 = fc_utils.network(
    'alexnet_v2', __name__, _FEATURES, fc6_depth=4096, fc6_kernel=[5, 5],
    doc='Builds AlexNet v2; returns (logits, end_points).\n' +
    fc_utils.ARGS_DOC % {
        'size': '224x224 makes fc6 see exactly its 5x5 window.', 'more': ''})
alexnet_v2.default_image_size = 224

register_network('alexnet_v2', alexnet_v2, alexnet_v2_arg_scope,
                 num_classes=1001,
                 preprocessing_name='vgg',
                 logits_scopes=('alexnet_v2/fc8',))
