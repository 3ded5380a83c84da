"""What the Inception family (v1-v4, Inception-ResNet-v2, S3D-G) shares: the
arg_scope, the initializer of its hand-initialised layers, small-input kernels,
the staged builder, modules as tables of towers and the classifier head (which
MobileNet v1 and the video networks reuse). A helper: it registers no
network."""
import collections

import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401


def trunc_normal(stddev):
  """A zero-mean truncated normal initializer of `stddev` (TF-Slim's helper
  for the layers that override the arg_scope's initializer)."""
  return tf.compat.v1.truncated_normal_initializer(0.0, stddev)


def inception_arg_scope(weight_decay=0.00004,
                        use_batch_norm=True,
                        batch_norm_decay=0.9997,
                        batch_norm_epsilon=0.001,
                        activation_fn=tf.nn.relu,
                        batch_norm_updates_collections=tf.compat.v1.GraphKeys.UPDATE_OPS,
                        batch_norm_scale=False):
  """Conv and FC layers: L2 weight decay, variance-scaling
  init, batch norm (no gamma unless `batch_norm_scale`) then `activation_fn`."""
  batch_norm_params = {
      'decay': batch_norm_decay,
      'epsilon': batch_norm_epsilon,
      'updates_collections': batch_norm_updates_collections,
      'fused': None,
      'scale': batch_norm_scale,
  }
  if use_batch_norm:
    normalizer_fn, normalizer_params = slim.batch_norm, batch_norm_params
  else:
    normalizer_fn, normalizer_params = None, {}
  with slim.arg_scope([slim.conv2d, slim.fully_connected],
                      weights_regularizer=slim.l2_regularizer(weight_decay)):
    with slim.arg_scope(
        [slim.conv2d],
        weights_initializer=slim.variance_scaling_initializer(),
        activation_fn=activation_fn,
        normalizer_fn=normalizer_fn,
        normalizer_params=normalizer_params) as sc:
      return sc


def thinned_depth(depth_multiplier, min_depth):
  """depth(d): the channels of a layer that has d in the published network,
  times `depth_multiplier` but at least `min_depth`. Raises ValueError for a
  depth_multiplier <= 0 (TF-Slim's message)."""
  if depth_multiplier <= 0:
    raise ValueError('depth_multiplier is not greater than zero.')
  return lambda d: max(int(d * depth_multiplier), min_depth)


def reduced_kernel_size_for_small_input(input_tensor, kernel_size,
                                        data_format='NHWC'):
  """`kernel_size` clipped to the static height and width of `input_tensor`.

  Lets the final average pools (and v3's auxiliary head) work on inputs smaller
  than the default size. An unknown height or width is assumed large enough, so
  the kernel is kept as asked.
  """
  shape = input_tensor.get_shape().as_list()
  height, width = shape[1:3] if data_format == 'NHWC' else shape[2:4]
  if height is None or width is None:
    return list(kernel_size)
  return [min(height, kernel_size[0]), min(width, kernel_size[1])]


def average_whole_map(net, scope):
  """An average pool over the whole map (Inception-v4, Inception-ResNet-v2);
  reduce_mean, the same average, when the size is known only at run time."""
  kernel_size = net.get_shape()[1:3]
  if kernel_size.is_fully_defined():
    return slim.avg_pool2d(net, kernel_size, padding='VALID', scope=scope)
  return tf.reduce_mean(net, [1, 2], keepdims=True, name='global_pool')


def aux_logits(net, num_classes, pool_scope, conv_scope, logits_scope):
  """The auxiliary classifier of Inception-v4 and Inception-ResNet-v2 on the
  17x17 features, in scope 'AuxLogits' (the checkpoints name its layers
  differently: the scopes are arguments): 5x5/3 average pool, 1x1 conv to
  128, a conv spanning what is left (5x5 at 299) to 768, fully connected."""
  with tf.compat.v1.variable_scope('AuxLogits'):
    net = slim.avg_pool2d(net, [5, 5], stride=3, padding='VALID',
                          scope=pool_scope)
    net = slim.conv2d(net, 128, [1, 1], scope='Conv2d_1b_1x1')
    net = slim.conv2d(net, 768, net.get_shape()[1:3], padding='VALID',
                      scope=conv_scope)
    net = slim.flatten(net)
    return slim.fully_connected(net, num_classes, activation_fn=None,
                                scope=logits_scope)


def logits_conv(net, num_classes, spatial_squeeze, scope, data_format='NHWC'):
  """The classifier of Inception v1-v3: a linear 1x1 convolution of the pooled
  features; logits are channels-last whatever the layout, [batch,
  num_classes] with `spatial_squeeze`. On clips (5-D, channels-last, as the
  video heads pool them) the 1x1x1 convolution's logits are averaged over
  time."""
  if net.get_shape().ndims == 5:
    logits = slim.conv3d(net, num_classes, [1, 1, 1], activation_fn=None,
                         normalizer_fn=None, data_format='NDHWC', scope=scope)
    logits = tf.reduce_mean(logits, axis=1)
  else:
    logits = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                         normalizer_fn=None, scope=scope)
  if data_format == 'NCHW':
    logits = tf.transpose(logits, [0, 2, 3, 1])
  if spatial_squeeze:
    logits = tf.squeeze(logits, [1, 2], name='SpatialSqueeze')
  return logits


def build_up_to(inputs, stages, final_endpoint):
  """Applies `stages`, (end_point, fn(net, end_point) -> net) pairs, in order.

  Stops after `final_endpoint` and returns (net, end_points), end_points
  mapping each built stage's name to its output in build order. An unknown
  `final_endpoint` raises ValueError, naming the valid ones, before any layer
  is built.
  """
  names = [name for name, _ in stages]
  if final_endpoint not in names:
    raise ValueError('Unknown final endpoint %s (valid: %s)'
                     % (final_endpoint, ', '.join(names)))
  end_points = {}
  net = inputs
  for name, build in stages:
    net = build(net, name)
    end_points[name] = net
    if name == final_endpoint:
      break
  return net, end_points


# -- Inception modules as tables: towers of layers, concatenated --------------
def conv(depth, kernel_size, scope, **kwargs):
  """A layer of a tower: slim.conv2d(net, depth, kernel_size, ...)."""
  return lambda net: slim.conv2d(net, depth, kernel_size, scope=scope,
                                 **kwargs)


def avg_pool(kernel_size, scope, **kwargs):
  """A layer of a tower: slim.avg_pool2d(net, kernel_size, ...)."""
  return lambda net: slim.avg_pool2d(net, kernel_size, scope=scope, **kwargs)


def max_pool(kernel_size, scope, **kwargs):
  """A layer of a tower: slim.max_pool2d(net, kernel_size, ...)."""
  return lambda net: slim.max_pool2d(net, kernel_size, scope=scope, **kwargs)


def split(*layers):
  """A layer of a tower: `layers` side by side on its input, concatenated
  (Inception-v4's parallel 1x3 and 3x1 convolutions)."""
  return lambda net: tf.concat(axis=3, values=[layer(net) for layer in layers])


def towers(inputs, *branches, axis=3):
  """An Inception module: each branch, a list of layers applied in order to
  `inputs` in scope 'Branch_<i>', then the branches concatenated on
  channels (`axis`: 3 for NHWC, 1 for NCHW)."""
  outputs = []
  for i, layers in enumerate(branches):
    with tf.compat.v1.variable_scope('Branch_%d' % i):
      net = inputs
      for layer in layers:
        net = layer(net)
      outputs.append(net)
  return tf.concat(axis=axis, values=outputs)


def mixed(end_point, inputs, *branches, axis=3):
  """An Inception module (`towers`) in the variable scope `end_point`, as
  Inception v1-v3 build their Mixed_* stages."""
  with tf.compat.v1.variable_scope(end_point):
    return towers(inputs, *branches, axis=axis)


# -- The classifier head: pool, dropout, linear 1x1 convolution ---------------
# What a network names and sizes differently in that head; the defaults are
# Inception v2/v3's. pool_size: the average pool's kernel at the default image
# size; pool_scope: its scope, '{}x{}' filled with the kernel used;
# shrink_pool: clip the kernel to smaller maps (else it is fixed); pool_args:
# stride/padding as the network passes them (read, never changed);
# pre_logits: whether the dropout's output is end point 'PreLogits';
# predictions_in_logits: whether 'Predictions' is built in scope 'Logits'.
Head = collections.namedtuple(
    'Head', ['pool_size', 'pool_scope', 'pool_end_point', 'shrink_pool',
             'pool_args', 'dropout_scope', 'logits_scope', 'pre_logits',
             'predictions_in_logits'],
    defaults=('AvgPool_1a_{}x{}', 'AvgPool_1a', True, {'padding': 'VALID'},
              'Dropout_1b', 'Conv2d_1c_1x1', True, False))


def dropout_logits(net, end_points, num_classes, dropout_keep_prob,
                   spatial_squeeze, head, data_format='NHWC'):
  """Dropout then `logits_conv` on pooled features (end points 'PreLogits' if
  `head.pre_logits`, and 'Logits'), in the current scope."""
  net = slim.dropout(net, dropout_keep_prob, scope=head.dropout_scope)
  if head.pre_logits:
    end_points['PreLogits'] = net
  logits = logits_conv(net, num_classes, spatial_squeeze, head.logits_scope,
                       data_format)
  end_points['Logits'] = logits
  return logits


def classifier_head(net, end_points, num_classes, head, dropout_keep_prob,
                    prediction_fn, spatial_squeeze, global_pool=False,
                    data_format='NHWC'):
  """TF-Slim's image classifier (Inception v1-v3, MobileNet v1) on `net`.

  In scope 'Logits': an average pool (`head`'s, or over the whole map with
  `global_pool`: end point 'global_pool'), then, unless `num_classes` is 0 or
  None (the pooled features are returned instead of logits), dropout and a
  linear 1x1 convolution; 'Predictions' = prediction_fn(logits) if given.
  Returns (logits, end_points).
  """
  with tf.compat.v1.variable_scope('Logits'):
    if global_pool:
      spatial_axes = [1, 2] if data_format == 'NHWC' else [2, 3]
      net = tf.reduce_mean(net, spatial_axes, keepdims=True,
                           name='global_pool')
      end_points['global_pool'] = net
    else:
      kernel_size = head.pool_size
      if head.shrink_pool:
        kernel_size = reduced_kernel_size_for_small_input(net, kernel_size,
                                                          data_format)
      net = slim.avg_pool2d(net, kernel_size,
                            scope=head.pool_scope.format(*kernel_size),
                            **head.pool_args)
      end_points[head.pool_end_point] = net
    if not num_classes:
      return net, end_points
    logits = dropout_logits(net, end_points, num_classes, dropout_keep_prob,
                            spatial_squeeze, head, data_format)
    if head.predictions_in_logits and prediction_fn:
      end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
  if not head.predictions_in_logits and prediction_fn:
    end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
  return logits, end_points


def logits_head(net, end_points, num_classes, pool_scope, pre_logits):
  """The 'Logits' scope of Inception-v4 and Inception-ResNet-v2: an average
  pool over the whole map ('global_pool'), `pre_logits` (dropout and flatten,
  in each network's order and names: 'PreLogitsFlatten'), a fully connected
  'Logits' layer and the softmax. Returns (logits or features, end_points).
  """
  with tf.compat.v1.variable_scope('Logits'):
    net = average_whole_map(net, pool_scope)
    end_points['global_pool'] = net
    if not num_classes:
      return net, end_points
    net = end_points['PreLogitsFlatten'] = pre_logits(net)
    logits = slim.fully_connected(net, num_classes, activation_fn=None,
                                  scope='Logits')
    end_points['Logits'] = logits
    end_points['Predictions'] = tf.nn.softmax(logits, name='Predictions')
  return logits, end_points
