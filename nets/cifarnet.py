"""CifarNet, TF-Slim's CIFAR-10 model: two conv/pool/LRN stages and three dense layers.

Scope names ('CifarNet/conv1' ... 'CifarNet/logits') are those of TF-Slim's
published graph. The local response normalisations are part of the published
forward pass (after pool1, and after conv2 before pool2), so they are kept.
"""
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets.registry import register_network

tf1 = tf.compat.v1


def _lrn(net, name):
  # cuda-convnet's normalisation over 9 neighbouring channels (radius 4).
  return tf.nn.lrn(net, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name=name)


def cifarnet_arg_scope(weight_decay=0.004):
  """ReLU layers; dense layers start with 0.1 biases and carry the weight decay."""
  with slim.arg_scope(
      [slim.conv2d],
      weights_initializer=tf1.truncated_normal_initializer(stddev=5e-2),
      activation_fn=tf.nn.relu):
    with slim.arg_scope(
        [slim.fully_connected],
        biases_initializer=tf1.constant_initializer(0.1),
        weights_initializer=tf1.truncated_normal_initializer(stddev=0.04),
        weights_regularizer=slim.l2_regularizer(weight_decay),
        activation_fn=tf.nn.relu) as sc:
      return sc


def cifarnet(images, num_classes=10, is_training=False, dropout_keep_prob=0.5,
             prediction_fn=slim.softmax, scope='CifarNet'):
  """Builds CifarNet on `images` [batch, height, width, channels].

  Args:
    images: float images; 32x32 gives the published fc3 input of 8*8*64.
    num_classes: classes of the classifier; 0 or None returns the fc4
      features instead of logits.
    is_training: enables dropout.
    dropout_keep_prob: probability of keeping an fc3 activation in training.
    prediction_fn: maps logits to end_points['Predictions'].
    scope: variable scope of the network.

  Returns:
    (logits or features, end_points dict of every named stage).
  """
  end_points = {}
  with tf1.variable_scope(scope, 'CifarNet', [images]):
    net = end_points['conv1'] = slim.conv2d(images, 64, [5, 5], scope='conv1')
    net = end_points['pool1'] = slim.max_pool2d(net, [2, 2], 2, scope='pool1')
    net = _lrn(net, 'norm1')
    net = end_points['conv2'] = slim.conv2d(net, 64, [5, 5], scope='conv2')
    net = _lrn(net, 'norm2')
    net = end_points['pool2'] = slim.max_pool2d(net, [2, 2], 2, scope='pool2')
    net = end_points['Flatten'] = slim.flatten(net)
    net = end_points['fc3'] = slim.fully_connected(net, 384, scope='fc3')
    net = slim.dropout(net, dropout_keep_prob, is_training=is_training,
                       scope='dropout3')
    net = end_points['fc4'] = slim.fully_connected(net, 192, scope='fc4')
    if not num_classes:
      return net, end_points
    # The classifier is linear, starts near zero and is not weight-decayed.
    logits = end_points['Logits'] = slim.fully_connected(
        net, num_classes,
        biases_initializer=tf1.zeros_initializer(),
        weights_initializer=tf1.truncated_normal_initializer(stddev=1 / 192.0),
        weights_regularizer=None,
        activation_fn=None,
        scope='logits')
    end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
  return logits, end_points


register_network('cifarnet', cifarnet, cifarnet_arg_scope,
                 default_image_size=32, num_classes=10,
                 preprocessing_name='cifarnet',
                 logits_scopes=('CifarNet/logits',))
