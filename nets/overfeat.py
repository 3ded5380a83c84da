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
  """ReLU layers with zero biases and L2 decay; SAME convolutions, VALID pools."""
  with slim.arg_scope([slim.conv2d, slim.fully_connected],
                      activation_fn=tf.nn.relu,
                      weights_regularizer=slim.l2_regularizer(weight_decay),
                      biases_initializer=tf1.zeros_initializer()):
    with slim.arg_scope([slim.conv2d], padding='SAME'):
      with slim.arg_scope([slim.max_pool2d], padding='VALID') as sc:
        return sc


def overfeat(inputs, num_classes=1000, is_training=True, dropout_keep_prob=0.5,
             spatial_squeeze=True, scope='overfeat', global_pool=False):
  """Builds OverFeat on `inputs` [batch, height, width, channels].

  Args:
    inputs: float images, 231x231 for classification.
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
  with tf1.variable_scope(scope, 'overfeat', [inputs]) as sc:
    collection = sc.original_name_scope + '_end_points'
    with slim.arg_scope([slim.conv2d, slim.fully_connected, slim.max_pool2d],
                        outputs_collections=collection):
      net = slim.conv2d(inputs, 64, [11, 11], 4, padding='VALID',
                        scope='conv1')
      net = slim.max_pool2d(net, [2, 2], scope='pool1')
      net = slim.conv2d(net, 256, [5, 5], padding='VALID', scope='conv2')
      net = slim.max_pool2d(net, [2, 2], scope='pool2')
      net = slim.conv2d(net, 512, [3, 3], scope='conv3')
      net = slim.conv2d(net, 1024, [3, 3], scope='conv4')
      net = slim.conv2d(net, 1024, [3, 3], scope='conv5')
      net = slim.max_pool2d(net, [2, 2], scope='pool5')

      with fc_utils.fc_initializers():
        return fc_utils.fc_head(
            net, collection, sc.name, num_classes, is_training,
            dropout_keep_prob, spatial_squeeze, global_pool, fc6_depth=3072,
            fc6_kernel=[6, 6],
            logits_biases_initializer=tf1.zeros_initializer())


overfeat.default_image_size = 231

register_network('overfeat', overfeat, overfeat_arg_scope,
                 overfeat.default_image_size, num_classes=1001,
                 preprocessing_name='vgg', logits_scopes=('overfeat/fc8',))
