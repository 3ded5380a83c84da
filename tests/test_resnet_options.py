"""ResNet options beyond the default classifier: output_stride (atrous),
feature-map outputs, non-strided block activations, conv2d_same, is_training.

Small inputs and, apart from one resnet_v1_50 check, a tiny ResNet (one unit
per block, with the strides of the published depths) keep these fast; the
published-size graphs are covered by test_nets.py.
"""
import functools

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from nets import resnet_utils
from nets import resnet_v1
from nets import resnet_v2

tf1 = tf.compat.v1


def _tiny(builder, block_fn):
  """`builder` over one unit per block; output depth 4 * 8 * 8 = 256."""
  blocks = resnet_utils.standard_blocks(block_fn, (1, 1, 1, 1),
                                        depth_multiplier=0.125)
  return functools.partial(builder, blocks=blocks, scope='tiny')


TINY = {'v1': _tiny(resnet_v1.resnet_v1, resnet_v1.resnet_v1_block),
        'v2': _tiny(resnet_v2.resnet_v2, resnet_v2.resnet_v2_block)}


def _build(network, images=None, **kwargs):
  """Builds `network` in the current graph; returns (net, end_points, vars)."""
  if images is None:
    images = tf1.placeholder(tf.float32, [2, 64, 64, 3])
  with slim.arg_scope(resnet_utils.resnet_arg_scope()):
    net, end_points = network(images, is_training=False, **kwargs)
  variables = {v.op.name: v.shape.as_list() for v in tf1.global_variables()}
  return net, end_points, variables


def _spatial(tensor):
  return tensor.shape.as_list()[1:3]


def test_resnet_v1_50_output_stride_16_keeps_variables_and_doubles_block4():
  with tf.Graph().as_default():
    _, nominal, nominal_vars = _build(resnet_v1.resnet_v1_50, num_classes=10)
  with tf.Graph().as_default():
    _, dense, dense_vars = _build(resnet_v1.resnet_v1_50, num_classes=10,
                                  output_stride=16)
  assert dense_vars == nominal_vars
  assert _spatial(nominal['resnet_v1_50/block4']) == [2, 2]  # 64 / 32
  assert _spatial(dense['resnet_v1_50/block4']) == [4, 4]  # 64 / 16
  assert dense['predictions'].shape.as_list() == [2, 10]


@pytest.mark.parametrize('family', ['v1', 'v2'])
def test_atrous_output_subsampled_equals_nominal_output(family):
  # Sizes 32k+1 align the corners of every stride, so the dense features at
  # even positions are exactly the nominal ones.
  with tf.Graph().as_default():
    images = tf.constant(np.random.RandomState(0).uniform(
        -1, 1, [2, 65, 65, 3]), tf.float32)
    nominal, _, _ = _build(TINY[family], images, global_pool=False)
    dense, _, _ = _build(TINY[family], images, global_pool=False,
                         output_stride=8, reuse=True)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      nominal, dense = sess.run([nominal, resnet_utils.subsample(dense, 4)])
  assert nominal.shape == (2, 3, 3, 256)
  np.testing.assert_allclose(dense, nominal, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('family', ['v1', 'v2'])
def test_no_global_pool_and_no_classes_returns_the_feature_map(family):
  with tf.Graph().as_default():
    net, end_points, variables = _build(TINY[family], num_classes=None,
                                        global_pool=False)
  assert net.shape.as_list() == [2, 2, 2, 256]
  assert not any('/logits' in name for name in variables)
  assert 'predictions' not in end_points and 'global_pool' not in end_points


def test_no_classes_with_global_pool_returns_pooled_features():
  with tf.Graph().as_default():
    net, end_points, _ = _build(TINY['v1'], num_classes=0)
  assert net.shape.as_list() == [2, 1, 1, 256]
  assert end_points['global_pool'] is net


def test_store_non_strided_activations_keeps_block_ends_at_full_resolution():
  with tf.Graph().as_default():
    net, end_points, _ = _build(TINY['v1'], global_pool=False,
                                store_non_strided_activations=True)
  assert _spatial(end_points['tiny/block1']) == [16, 16]  # 64 / 4 (root)
  assert _spatial(end_points['tiny/block3']) == [4, 4]
  assert _spatial(net) == [2, 2]


@pytest.mark.parametrize('output_stride', [6, 64])
def test_unreachable_output_stride_is_an_error(output_stride):
  with tf.Graph().as_default(), pytest.raises(ValueError,
                                              match='output_stride'):
    _build(TINY['v1'], output_stride=output_stride)


@pytest.mark.parametrize('size', [8, 9])
def test_conv2d_same_equals_stride_one_conv_then_subsample(size):
  with tf.Graph().as_default():
    images = tf.constant(np.random.RandomState(1).uniform(
        -1, 1, [1, size, size, 2]), tf.float32)
    with slim.arg_scope([slim.conv2d], activation_fn=None):
      strided = resnet_utils.conv2d_same(images, 4, 3, stride=2, scope='c')
      dense = slim.conv2d(images, 4, 3, stride=1, reuse=True, scope='c')
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      strided, dense = sess.run([strided, resnet_utils.subsample(dense, 2)])
  np.testing.assert_allclose(strided, dense, rtol=1e-5, atol=1e-5)


def test_v1_is_training_none_defers_batch_norm_mode_to_outer_arg_scope():
  with tf.Graph().as_default():
    images = tf1.placeholder(tf.float32, [2, 64, 64, 3])
    with slim.arg_scope(resnet_utils.resnet_arg_scope()), \
        slim.arg_scope([slim.batch_norm], is_training=True):
      TINY['v1'](images, num_classes=10, is_training=None)
    updates = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)
  assert updates  # training-mode batch norm registers moving-average updates
