"""Inception v1-v3: the options of TF-Slim's *_base functions and heads.

Graph construction only (shapes and variable names), so these stay quick; the
published-checkpoint contract and a training step are in test_nets.py.
"""
import pytest
import tensorflow as tf
import tf_slim as slim

from nets import inception_utils
from nets import inception_v1
from nets import inception_v2
from nets import inception_v3

tf1 = tf.compat.v1

BASES = {
    'inception_v1': (inception_v1.inception_v1_base, 224, 'Mixed_5c', 1024),
    'inception_v2': (inception_v2.inception_v2_base, 224, 'Mixed_5c', 1024),
    'inception_v3': (inception_v3.inception_v3_base, 299, 'Mixed_7c', 2048),
}
INCEPTIONS = (inception_v1.inception_v1, inception_v2.inception_v2,
              inception_v3.inception_v3)


def _images(size, batch=2, channels=3):
  return tf1.placeholder(tf.float32, [batch, size, size, channels])


def _variable_names():
  return [v.op.name for v in tf1.global_variables()]


@pytest.mark.parametrize('name', sorted(BASES))
def test_base_stops_at_each_final_endpoint(name):
  base_fn, size, last, _ = BASES[name]
  with tf.Graph().as_default():
    _, all_points = base_fn(_images(size))
  names = list(all_points)
  assert names[-1] == last
  # A stem layer, a middle module and the one before last: each build is a
  # prefix of the full one, so more would only repeat the same check slower.
  for i in (0, len(names) // 2, len(names) - 2):
    end_point = names[i]
    with tf.Graph().as_default():
      net, end_points = base_fn(_images(size), final_endpoint=end_point)
      assert list(end_points) == names[:i + 1]
      assert net.shape.as_list() == all_points[end_point].shape.as_list()


@pytest.mark.parametrize('name', sorted(BASES))
def test_base_rejects_unknown_final_endpoint_before_building(name):
  base_fn, size, _, _ = BASES[name]
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='Unknown final endpoint Mixed_9z'):
      base_fn(_images(size), final_endpoint='Mixed_9z')
    assert not tf1.global_variables()


@pytest.mark.parametrize('name', sorted(BASES))
def test_base_rejects_non_positive_depth_multiplier(name):
  base_fn, size, _, _ = BASES[name]
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='depth_multiplier'):
      base_fn(_images(size), depth_multiplier=0)


@pytest.mark.parametrize('name', sorted(BASES))
def test_depth_multiplier_scales_channels(name):
  base_fn, size, _, channels = BASES[name]
  with tf.Graph().as_default():
    net, _ = base_fn(_images(size), depth_multiplier=0.5)
  assert net.shape.as_list()[-1] == channels // 2


@pytest.mark.parametrize('net_fn,size,features', [
    (inception_v2.inception_v2, 112, [2, 4, 4, 1024]),
    (inception_v3.inception_v3, 150, [2, 3, 3, 2048]),
])
def test_small_input_shrinks_the_final_pool(net_fn, size, features):
  with tf.Graph().as_default():
    logits, end_points = net_fn(_images(size), num_classes=10)
  assert end_points['AvgPool_1a'].shape.as_list() == [2, 1, 1, features[-1]]
  assert logits.shape.as_list() == [2, 10]


def test_inception_v2_reduced_kernel_reads_the_static_size():
  reduce_fn = inception_v2._reduced_kernel_size_for_small_input
  with tf.Graph().as_default():
    assert reduce_fn(_images(4), [7, 7]) == [4, 4]
    assert reduce_fn(_images(9), [7, 7]) == [7, 7]
    unknown = tf1.placeholder(tf.float32, [2, None, None, 3])
    assert reduce_fn(unknown, [7, 7]) == [7, 7]
    nchw = tf1.placeholder(tf.float32, [2, 3, 5, 6])
    assert inception_utils.reduced_kernel_size_for_small_input(
        nchw, [7, 7], 'NCHW') == [5, 6]


def test_inception_v3_aux_head_shrinks_its_kernel_for_small_input():
  # At 224 Mixed_6e is 12x12, pooled by the aux head to 3x3 (5x5 at 299).
  with tf.Graph().as_default():
    _, end_points = inception_v3.inception_v3(_images(224), num_classes=10)
    names = _variable_names()
  assert end_points['AuxLogits'].shape.as_list() == [2, 10]
  assert end_points['AvgPool_1a'].shape.as_list() == [2, 1, 1, 2048]
  assert 'InceptionV3/AuxLogits/Conv2d_2a_3x3/weights' in names


def test_inception_v3_without_aux_logits():
  with tf.Graph().as_default():
    _, end_points = inception_v3.inception_v3(
        _images(299), num_classes=10, create_aux_logits=False)
    names = _variable_names()
  assert 'AuxLogits' not in end_points
  assert not [n for n in names if 'AuxLogits' in n]


@pytest.mark.parametrize('net_fn,pool_end_point', zip(
    INCEPTIONS, ('AvgPool_0a_7x7', 'AvgPool_1a', 'AvgPool_1a')))
def test_zero_classes_returns_pooled_features_without_classifiers(
    net_fn, pool_end_point):
  with tf.Graph().as_default():
    features, end_points = net_fn(_images(net_fn.default_image_size),
                                  num_classes=0)
    names = _variable_names()
  assert features is end_points[pool_end_point]
  assert 'Logits' not in end_points and 'AuxLogits' not in end_points
  assert not [n for n in names if 'Logits' in n]


@pytest.mark.parametrize('net_fn', INCEPTIONS)
def test_global_pool_takes_other_input_sizes(net_fn):
  with tf.Graph().as_default():
    logits, end_points = net_fn(_images(net_fn.default_image_size + 32),
                                num_classes=5, global_pool=True)
  assert end_points['global_pool'].shape.as_list()[1:3] == [1, 1]
  assert logits.shape.as_list() == [2, 5]


@pytest.mark.parametrize('net_fn', INCEPTIONS[:2])
def test_no_spatial_squeeze_keeps_4d_logits(net_fn):
  with tf.Graph().as_default():
    logits, end_points = net_fn(_images(net_fn.default_image_size),
                                num_classes=5, spatial_squeeze=False)
  assert logits.shape.as_list() == [2, 1, 1, 5]
  assert end_points['Predictions'].shape.as_list() == [2, 1, 1, 5]


def test_inception_v2_plain_first_conv_without_separable():
  with tf.Graph().as_default():
    inception_v2.inception_v2_base(_images(224), final_endpoint='Conv2d_1a_7x7',
                                   use_separable_conv=False)
    variables = {v.op.name: v.shape.as_list() for v in tf1.global_variables()}
  assert variables['InceptionV2/Conv2d_1a_7x7/weights'] == [7, 7, 3, 64]
  assert not [n for n in variables if 'depthwise' in n]


def test_inception_v2_nchw_builds_channels_first_and_channels_last_logits():
  with tf.Graph().as_default():
    images = tf1.placeholder(tf.float32, [2, 3, 224, 224])
    net, _ = inception_v2.inception_v2_base(
        images, use_separable_conv=False, data_format='NCHW')
    assert net.shape.as_list() == [2, 1024, 7, 7]
  with tf.Graph().as_default():
    images = tf1.placeholder(tf.float32, [2, 3, 224, 224])
    logits, end_points = inception_v2.inception_v2(
        images, num_classes=5, use_separable_conv=False, data_format='NCHW')
    assert end_points['AvgPool_1a'].shape.as_list() == [2, 1024, 1, 1]
    assert logits.shape.as_list() == [2, 5]


def test_inception_v2_nchw_needs_a_plain_first_conv():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='use_separable_conv is False'):
      inception_v2.inception_v2_base(
          tf1.placeholder(tf.float32, [2, 3, 224, 224]), data_format='NCHW')
    with pytest.raises(ValueError, match='data_format'):
      inception_v2.inception_v2_base(_images(224), data_format='HWCN')


@pytest.mark.parametrize('base_fn,first_mixed', [
    (inception_v1.inception_v1_base, 'Mixed_3b'),
    (inception_v2.inception_v2_base, 'Mixed_3b'),
])
def test_without_root_block_inputs_feed_the_first_module(base_fn, first_mixed):
  with tf.Graph().as_default():
    _, end_points = base_fn(_images(28, channels=192),
                            include_root_block=False)
  assert next(iter(end_points)) == first_mixed
  assert not [e for e in end_points if e.startswith(('Conv2d', 'MaxPool_2', 'MaxPool_3'))]


@pytest.mark.parametrize('net_fn', INCEPTIONS)
def test_reuse_shares_every_variable(net_fn):
  size = net_fn.default_image_size
  with tf.Graph().as_default():
    with slim.arg_scope(inception_utils.inception_arg_scope()):
      net_fn(_images(size), num_classes=5)
      count = len(tf1.global_variables())
      net_fn(_images(size), num_classes=5, is_training=False, reuse=True)
    assert len(tf1.global_variables()) == count


def test_arg_scope_wrappers_are_the_shared_inception_scope():
  assert (inception_v1.inception_v1_arg_scope
          is inception_v2.inception_v2_arg_scope
          is inception_v3.inception_v3_arg_scope
          is inception_utils.inception_arg_scope)
