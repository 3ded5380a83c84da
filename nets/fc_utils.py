"""The skeleton of AlexNet, OverFeat and VGG: conv layers, then fc6-fc8 as
convolutions.

fc6 convolves the last feature map with a kernel its size ('VALID'), fc7 and
fc8 are 1x1 convolutions, so the same variables classify one window at the
published size and a grid of windows on larger images
(`spatial_squeeze=False`). A family is a table of feature layers (`layer`
rows) and its fc6, which its functions pass to `build`. A helper: it
registers no network.
"""
import contextlib

import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401

tf1 = tf.compat.v1


def arg_scope(weight_decay, biases_initializer, valid_pools=False):
  """The arg_scope of these families: ReLU layers with `biases_initializer`
  and L2 decay, SAME convolutions (and VALID pools, as AlexNet's and
  OverFeat's say explicitly)."""
  with slim.arg_scope([slim.conv2d, slim.fully_connected],
                      activation_fn=tf.nn.relu,
                      weights_regularizer=slim.l2_regularizer(weight_decay),
                      biases_initializer=biases_initializer), \
      slim.arg_scope([slim.conv2d], padding='SAME') as sc:
    if not valid_pools:
      return sc
    with slim.arg_scope([slim.max_pool2d], padding='VALID') as sc:
      return sc


def layer(layer_fn, *args, **kwargs):
  """One row of a feature table: net -> layer_fn(net, *args, **kwargs), built
  when the network is (so the enclosing arg_scopes apply)."""
  return lambda net: layer_fn(net, *args, **kwargs)


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


def build(default_scope, features, fc6_depth, fc6_kernel, inputs,
          num_classes, is_training, dropout_keep_prob, spatial_squeeze, scope,
          global_pool, fc6_padding='VALID', small_fc_init=False):
  """A network of these families: `features` (a table of `layer` rows), then
  fc_head, in `scope` (default `default_scope`); every layer is an end point
  keyed by its scope path.

  The arguments from `inputs` on are those of TF-Slim's functions (see
  alexnet.alexnet_v2), fc6's are fc_head's. `small_fc_init`: AlexNet's and
  OverFeat's fc layers start from a truncated normal(0.005) and 0.1 biases,
  and fc8 from zero biases.
  """
  with tf1.variable_scope(scope, default_scope, [inputs]) as sc:
    collection = sc.original_name_scope + '_end_points'
    with slim.arg_scope([slim.conv2d, slim.fully_connected, slim.max_pool2d],
                        outputs_collections=collection):
      net = inputs
      for row in features:
        net = row(net)
      with (slim.arg_scope(
          [slim.conv2d],
          weights_initializer=tf1.truncated_normal_initializer(0.0, 0.005),
          biases_initializer=tf1.constant_initializer(0.1))
            if small_fc_init else contextlib.nullcontext()):
        return fc_head(
            net, collection, sc.name, num_classes, is_training,
            dropout_keep_prob, spatial_squeeze, global_pool, fc6_depth,
            fc6_kernel, fc6_padding,
            tf1.zeros_initializer() if small_fc_init else None)
