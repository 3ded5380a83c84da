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
