"""What the Inception family (v1-v4, Inception-ResNet-v2, S3D-G) shares: the
arg_scope, the initializer of its hand-initialised layers, small-input kernels
and the staged builder. A helper: it registers no network."""
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
  num_classes] with `spatial_squeeze`."""
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


def towers(inputs, *branches):
  """An Inception module: each branch, a list of layers applied in order to
  `inputs` in scope 'Branch_<i>', then the branches concatenated on
  channels (NHWC)."""
  outputs = []
  for i, layers in enumerate(branches):
    with tf.compat.v1.variable_scope('Branch_%d' % i):
      net = inputs
      for layer in layers:
        net = layer(net)
      outputs.append(net)
  return tf.concat(axis=3, values=outputs)
