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
  with slim.arg_scope([slim.conv2d, slim.fully_connected],
                      activation_fn=tf.nn.relu,
                      biases_initializer=tf1.constant_initializer(0.1),
                      weights_regularizer=slim.l2_regularizer(weight_decay)):
    with slim.arg_scope([slim.conv2d], padding='SAME'):
      with slim.arg_scope([slim.max_pool2d], padding='VALID') as sc:
        return sc


def alexnet_v2(inputs, num_classes=1000, is_training=True,
               dropout_keep_prob=0.5, spatial_squeeze=True,
               scope='alexnet_v2', global_pool=False):
  """Builds AlexNet v2 on `inputs` [batch, height, width, channels].

  Args:
    inputs: float images; 224x224 makes fc6 see exactly its 5x5 window.
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
  with tf1.variable_scope(scope, 'alexnet_v2', [inputs]) as sc:
    collection = sc.original_name_scope + '_end_points'
    with slim.arg_scope([slim.conv2d, slim.fully_connected, slim.max_pool2d],
                        outputs_collections=[collection]):
      net = slim.conv2d(inputs, 64, [11, 11], 4, padding='VALID',
                        scope='conv1')
      net = slim.max_pool2d(net, [3, 3], 2, scope='pool1')
      net = slim.conv2d(net, 192, [5, 5], scope='conv2')
      net = slim.max_pool2d(net, [3, 3], 2, scope='pool2')
      net = slim.conv2d(net, 384, [3, 3], scope='conv3')
      net = slim.conv2d(net, 384, [3, 3], scope='conv4')
      net = slim.conv2d(net, 256, [3, 3], scope='conv5')
      net = slim.max_pool2d(net, [3, 3], 2, scope='pool5')

      with fc_utils.fc_initializers():
        return fc_utils.fc_head(
            net, collection, sc.name, num_classes, is_training,
            dropout_keep_prob, spatial_squeeze, global_pool, fc6_depth=4096,
            fc6_kernel=[5, 5],
            logits_biases_initializer=tf1.zeros_initializer())


alexnet_v2.default_image_size = 224

register_network('alexnet_v2', alexnet_v2, alexnet_v2_arg_scope,
                 alexnet_v2.default_image_size, num_classes=1001,
                 preprocessing_name='vgg',
                 logits_scopes=('alexnet_v2/fc8',))
