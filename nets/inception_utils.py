"""The arg_scope shared by the Inception family (v1-v4, Inception-ResNet-v2)."""
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401


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
