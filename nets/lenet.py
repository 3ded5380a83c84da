"""LeNet, TF-Slim's variant: two 5x5 conv/pool stages and two fully connected layers.

Scope names ('LeNet/conv1' ... 'LeNet/fc4') are those of TF-Slim's published
graph, so its checkpoints and `--checkpoint_exclude_scopes=LeNet/fc4` apply.
The first convolution takes whatever channel count the images have (1 for
grayscale digits, 3 for RGB).
"""
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets.registry import register_network

tf1 = tf.compat.v1


def lenet_arg_scope(weight_decay=0.0):
  """ReLU layers with truncated-normal(0.1) weights and L2 weight decay."""
  with slim.arg_scope(
      [slim.conv2d, slim.fully_connected],
      weights_regularizer=slim.l2_regularizer(weight_decay),
      weights_initializer=tf1.truncated_normal_initializer(stddev=0.1),
      activation_fn=tf.nn.relu) as sc:
    return sc


def lenet(images, num_classes=10, is_training=False, dropout_keep_prob=0.5,
          prediction_fn=slim.softmax, scope='LeNet'):
  """Builds LeNet on `images` [batch, height, width, channels].

  Arguments and results as cifarnet.cifarnet's, except that 28x28 images give
  the published fc3 input of 7*7*64 and num_classes 0 or None returns the
  fc3 features (before dropout).
  """
  end_points = {}
  with tf1.variable_scope(scope, 'LeNet', [images]):
    net = end_points['conv1'] = slim.conv2d(images, 32, [5, 5], scope='conv1')
    net = end_points['pool1'] = slim.max_pool2d(net, [2, 2], 2, scope='pool1')
    net = end_points['conv2'] = slim.conv2d(net, 64, [5, 5], scope='conv2')
    net = end_points['pool2'] = slim.max_pool2d(net, [2, 2], 2, scope='pool2')
    net = end_points['Flatten'] = slim.flatten(net)
    net = end_points['fc3'] = slim.fully_connected(net, 1024, scope='fc3')
    if not num_classes:
      return net, end_points
    net = end_points['dropout3'] = slim.dropout(
        net, dropout_keep_prob, is_training=is_training, scope='dropout3')
    logits = end_points['Logits'] = slim.fully_connected(
        net, num_classes, activation_fn=None, scope='fc4')
  end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
  return logits, end_points


register_network('lenet', lenet, lenet_arg_scope, default_image_size=28,
                 num_classes=10, preprocessing_name='lenet',
                 logits_scopes=('LeNet/fc4',))
