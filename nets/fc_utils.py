"""The classifier of AlexNet, OverFeat and VGG: fc6-fc8 as convolutions.

fc6 convolves the last feature map with a kernel its size ('VALID'), fc7 and
fc8 are 1x1 convolutions, so the same variables classify one window at the
published size and a grid of windows on larger images
(`spatial_squeeze=False`). A helper: it registers no network.
"""
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401


def fc_head(net, end_points_collection, scope_name, num_classes, is_training,
            dropout_keep_prob, spatial_squeeze, global_pool, fc6_depth,
            fc6_kernel, fc6_padding='VALID', logits_biases_initializer=None):
  """fc6, dropout6, fc7 (4096), then the options TF-Slim gives these nets.

  Args:
    net: the last feature map.
    end_points_collection: the collection the network's layers are added to;
      its contents up to fc7 become the end points.
    scope_name: the network's scope, prefixing the 'fc8' end point.
    num_classes: classes of fc8; 0 or None returns the fc7 features.
    is_training: enables dropout.
    dropout_keep_prob: probability of keeping an fc6/fc7 activation.
    spatial_squeeze: drops the 1x1 spatial dimensions of the logits.
    global_pool: averages fc7 over space first ('global_pool' end point).
    fc6_depth, fc6_kernel, fc6_padding: fc6's outputs, kernel and padding.
    logits_biases_initializer: fc8's, when it differs from the arg_scope's.

  Returns:
    (logits or features, end_points).
  """
  net = slim.conv2d(net, fc6_depth, fc6_kernel, padding=fc6_padding,
                    scope='fc6')
  net = slim.dropout(net, dropout_keep_prob, is_training=is_training,
                     scope='dropout6')
  net = slim.conv2d(net, 4096, [1, 1], scope='fc7')
  end_points = slim.utils.convert_collection_to_dict(end_points_collection)
  if global_pool:
    net = tf.reduce_mean(net, [1, 2], keepdims=True, name='global_pool')
    end_points['global_pool'] = net
  if num_classes:
    net = slim.dropout(net, dropout_keep_prob, is_training=is_training,
                       scope='dropout7')
    biases = ({} if logits_biases_initializer is None
              else {'biases_initializer': logits_biases_initializer})
    net = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                      normalizer_fn=None, scope='fc8', **biases)
    if spatial_squeeze:
      net = tf.squeeze(net, [1, 2], name='fc8/squeezed')
    end_points[scope_name + '/fc8'] = net
  return net, end_points


def fc_initializers():
  """AlexNet's and OverFeat's fc layers start from a small truncated normal
  and 0.1 biases (their fc8 passes its own biases initializer)."""
  return slim.arg_scope(
      [slim.conv2d],
      weights_initializer=tf.compat.v1.truncated_normal_initializer(0.0, 0.005),
      biases_initializer=tf.compat.v1.constant_initializer(0.1))
