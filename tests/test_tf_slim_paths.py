"""TF-Slim code runs unchanged: its import paths, factory tables and video nets.

Written as a TF-Slim user's script would be (`from nets import inception`,
`from nets.mobilenet import mobilenet_v2`, `nets_factory.networks_map[name]`
inside `slim.arg_scope(nets_factory.arg_scopes_map[name]())`). The i3d / s3dg
variable contract is tests/data/tf_slim_video_specs/<name>.json, derived from
TF-Slim's research/slim/nets/{i3d,s3dg,i3d_utils}.py by the script beside it
(no TF-Slim checkpoint of either was published); the end-point shapes at 64
frames are those of TF-Slim's i3d_test.py / s3dg_test.py.
"""
import importlib
import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from nets import i3d
from nets import i3d_utils
from nets import inception
from nets import nets_factory
from nets import registry
from nets import s3dg
from nets.mobilenet import mobilenet_v2
from nets.nasnet import nasnet

tf1 = tf.compat.v1
DATA = os.path.join(os.path.dirname(__file__), 'data')

# TF-Slim's module paths and (some of) the public names each one exposes.
TF_SLIM_MODULES = {
    'nets.alexnet': 'alexnet_v2 alexnet_v2_arg_scope',
    'nets.cifarnet': 'cifarnet cifarnet_arg_scope',
    'nets.lenet': 'lenet lenet_arg_scope',
    'nets.overfeat': 'overfeat overfeat_arg_scope',
    'nets.vgg': 'vgg_a vgg_16 vgg_19 vgg_arg_scope',
    'nets.resnet_utils': 'Block subsample conv2d_same stack_blocks_dense '
                         'resnet_arg_scope',
    'nets.resnet_v1': 'resnet_v1 resnet_v1_block bottleneck resnet_v1_50 '
                      'resnet_v1_101 resnet_v1_152 resnet_v1_200 '
                      'resnet_arg_scope',
    'nets.resnet_v2': 'resnet_v2 resnet_v2_block bottleneck resnet_v2_50 '
                      'resnet_v2_101 resnet_v2_152 resnet_v2_200 '
                      'resnet_arg_scope',
    'nets.mobilenet_v1': 'mobilenet_v1 mobilenet_v1_base mobilenet_v1_arg_scope '
                         'mobilenet_v1_075 mobilenet_v1_050 mobilenet_v1_025 '
                         'Conv DepthSepConv MOBILENETV1_CONV_DEFS',
    'nets.inception': 'inception_v1 inception_v1_base inception_v1_arg_scope '
                      'inception_v2 inception_v2_base inception_v2_arg_scope '
                      'inception_v3 inception_v3_base inception_v3_arg_scope '
                      'inception_v4 inception_v4_base inception_v4_arg_scope '
                      'inception_resnet_v2 inception_resnet_v2_base '
                      'inception_resnet_v2_arg_scope inception_arg_scope',
    'nets.inception_utils': 'inception_arg_scope',
    'nets.inception_v1': 'inception_v1 inception_v1_base inception_v1_arg_scope',
    'nets.inception_v2': 'inception_v2 inception_v2_base inception_v2_arg_scope',
    'nets.inception_v3': 'inception_v3 inception_v3_base inception_v3_arg_scope',
    'nets.inception_v4': 'inception_v4 inception_v4_base inception_v4_arg_scope '
                         'block_inception_a block_reduction_a '
                         'block_inception_b block_reduction_b block_inception_c',
    'nets.inception_resnet_v2': 'inception_resnet_v2 inception_resnet_v2_base '
                                'inception_resnet_v2_arg_scope block35 block17 '
                                'block8',
    'nets.i3d': 'i3d i3d_base i3d_arg_scope',
    'nets.s3dg': 's3dg s3dg_base s3dg_arg_scope self_gating',
    'nets.i3d_utils': 'conv3d_spatiotemporal inception_block_v1_3d '
                      'reduced_kernel_size_3d center_initializer',
    'nets.mobilenet.mobilenet': 'mobilenet mobilenet_base training_scope op '
                                'global_pool depth_multiplier',
    'nets.mobilenet.conv_blocks': 'expanded_conv expand_input_by_factor '
                                  'split_conv squeeze_excite',
    'nets.mobilenet.mobilenet_v2': 'mobilenet mobilenet_base training_scope '
                                   'V2_DEF mobilenet_v2_140 mobilenet_v2_050 '
                                   'mobilenet_v2_035',
    'nets.mobilenet.mobilenet_v3': 'mobilenet mobilenet_base training_scope '
                                   'V3_LARGE V3_SMALL V3_LARGE_MINIMALISTIC '
                                   'V3_SMALL_MINIMALISTIC V3_EDGETPU large '
                                   'small large_minimalistic '
                                   'small_minimalistic edge_tpu edge_tpu_075',
    'nets.nasnet.nasnet': 'build_nasnet_cifar build_nasnet_mobile '
                          'build_nasnet_large nasnet_cifar_arg_scope '
                          'nasnet_mobile_arg_scope nasnet_large_arg_scope '
                          'cifar_config mobile_imagenet_config '
                          'large_imagenet_config',
    'nets.nasnet.nasnet_utils': 'NasNetABaseCell NasNetANormalCell '
                                'NasNetAReductionCell calc_reduction_layers '
                                'factorized_reduction drop_path '
                                'global_avg_pool get_channel_index '
                                'get_channel_dim',
    'nets.nasnet.pnasnet': 'build_pnasnet_large build_pnasnet_mobile '
                           'pnasnet_large_arg_scope pnasnet_mobile_arg_scope '
                           'PNasNetNormalCell large_imagenet_config '
                           'mobile_imagenet_config',
    'nets.nets_factory': 'networks_map arg_scopes_map get_network_fn',
}

ENDPOINTS = ['Conv2d_1a_7x7', 'MaxPool_2a_3x3', 'Conv2d_2b_1x1',
             'Conv2d_2c_3x3', 'MaxPool_3a_3x3', 'Mixed_3b', 'Mixed_3c',
             'MaxPool_4a_3x3', 'Mixed_4b', 'Mixed_4c', 'Mixed_4d', 'Mixed_4e',
             'Mixed_4f', 'MaxPool_5a_2x2', 'Mixed_5b', 'Mixed_5c']


def _video_spec(name):
  with open(os.path.join(DATA, 'tf_slim_video_specs', name + '.json')) as f:
    return json.load(f)


def _variables():
  return {v.op.name: v.shape.as_list() for v in tf1.global_variables()}


def _shapes(end_points):
  return {k: v.shape.as_list() for k, v in end_points.items()}


# -- import paths --------------------------------------------------------------
@pytest.mark.parametrize('module', sorted(TF_SLIM_MODULES))
def test_tf_slim_module_path_exposes_its_public_names(module):
  mod = importlib.import_module(module)
  missing = [n for n in TF_SLIM_MODULES[module].split() if not hasattr(mod, n)]
  assert not missing


@pytest.mark.parametrize('old', ['nets.mobilenet_base', 'nets.mobilenet_v2',
                                 'nets.mobilenet_conv_blocks', 'nets.nasnet_utils',
                                 'nets.pnasnet', 'nets.mobilenet_v3'])
def test_moved_modules_live_only_at_tf_slim_paths(old):
  with pytest.raises(ModuleNotFoundError):
    importlib.import_module(old)


def test_inception_aggregates_the_family_modules():
  from nets import inception_utils, inception_v3, inception_resnet_v2  # pylint: disable=g-import-not-at-top
  assert inception.inception_v3 is inception_v3.inception_v3
  assert inception.inception_resnet_v2_arg_scope is (
      inception_resnet_v2.inception_resnet_v2_arg_scope)
  assert inception.inception_arg_scope is inception_utils.inception_arg_scope


# -- networks_map / arg_scopes_map -------------------------------------------
ZOO = sorted(
    'alexnet_v2 cifarnet overfeat vgg_a vgg_16 vgg_19 inception_v1 '
    'inception_v2 inception_v3 inception_v4 inception_resnet_v2 i3d s3dg lenet '
    'resnet_v1_50 resnet_v1_101 resnet_v1_152 resnet_v1_200 resnet_v2_50 '
    'resnet_v2_101 resnet_v2_152 resnet_v2_200 mobilenet_v1 mobilenet_v1_075 '
    'mobilenet_v1_050 mobilenet_v1_025 mobilenet_v2 mobilenet_v2_140 '
    'mobilenet_v2_035 mobilenet_v3_small mobilenet_v3_large '
    'mobilenet_v3_small_minimalistic mobilenet_v3_large_minimalistic '
    'mobilenet_edgetpu mobilenet_edgetpu_075 nasnet_cifar nasnet_mobile '
    'nasnet_large pnasnet_mobile pnasnet_large'.split())


def test_factory_maps_list_every_registered_network():
  names = nets_factory.list_models()
  assert len(ZOO) == 40 and not set(ZOO) - set(names)
  assert sorted(nets_factory.networks_map) == names
  assert sorted(nets_factory.arg_scopes_map) == names


def test_factory_maps_hold_tf_slim_functions():
  maps = nets_factory.networks_map, nets_factory.arg_scopes_map
  assert [m['inception_v3'] for m in maps] == [
      inception.inception_v3, inception.inception_v3_arg_scope]
  assert [m['mobilenet_v2'] for m in maps] == [
      mobilenet_v2.mobilenet, mobilenet_v2.training_scope]
  assert [m['nasnet_mobile'] for m in maps] == [
      nasnet.build_nasnet_mobile, nasnet.nasnet_mobile_arg_scope]
  assert [m['i3d'] for m in maps] == [i3d.i3d, i3d.i3d_arg_scope]
  assert [m['s3dg'] for m in maps] == [s3dg.s3dg, s3dg.s3dg_arg_scope]


def test_factory_maps_are_read_only():
  with pytest.raises(TypeError, match='networks_map is read-only'):
    nets_factory.networks_map['my_net'] = inception.inception_v1
  with pytest.raises(TypeError, match='arg_scopes_map is read-only'):
    del nets_factory.arg_scopes_map['lenet']
  assert 'lenet' in nets_factory.arg_scopes_map


def test_unknown_name_is_a_key_error_naming_the_known_ones():
  assert 'resnet50' not in nets_factory.networks_map
  assert nets_factory.networks_map.get('resnet50') is None
  with pytest.raises(KeyError, match="unknown model_name 'resnet50'; did you "
                     "mean 'resnet_v2_50'"):
    nets_factory.networks_map['resnet50']  # pylint: disable=pointless-statement


def test_factory_maps_follow_new_registrations(monkeypatch):
  monkeypatch.setattr(registry, '_NETWORKS', dict(registry._NETWORKS))  # pylint: disable=protected-access
  assert 'probe_net' not in nets_factory.networks_map
  registry.register_network('probe_net', inception.inception_v1,
                            inception.inception_v1_arg_scope, 224)
  assert nets_factory.networks_map['probe_net'] is inception.inception_v1
  assert nets_factory.arg_scopes_map['probe_net'] is (
      inception.inception_v1_arg_scope)
  assert len(nets_factory.networks_map) == len(nets_factory.list_models())
  assert 'probe_net' in list(nets_factory.arg_scopes_map)


# -- a TF-Slim user's script ---------------------------------------------------
def _checkpoint_spec(name):
  with open(os.path.join(DATA, 'checkpoint_specs', name + '.json')) as f:
    return json.load(f)


@pytest.mark.parametrize('name', ['inception_v1', 'mobilenet_v2', 'lenet',
                                  'cifarnet'])
def test_networks_map_builds_the_checkpoint_graph(name):
  spec = _checkpoint_spec(name)
  size = spec['default_image_size']
  with tf.Graph().as_default():
    images = tf1.placeholder(tf.float32, [2, size, size, 3])
    with slim.arg_scope(nets_factory.arg_scopes_map[name]()):
      logits, end_points = nets_factory.networks_map[name](
          images, num_classes=spec['num_classes'], is_training=False)
    variables = _variables()
  assert logits.shape.as_list() == spec['logits_shape']
  assert {k: [-1 if d is None else d for d in v]
          for k, v in _shapes(end_points).items()} == spec['end_points']
  assert variables == {n: s for n, s, _ in spec['variables']}


def test_inception_module_as_tf_slim_users_call_it():
  with tf.Graph().as_default():
    images = tf1.placeholder(tf.float32, [2, 299, 299, 3])
    with slim.arg_scope(inception.inception_v3_arg_scope()):
      logits, end_points = inception.inception_v3(images, num_classes=1001,
                                                  is_training=False)
      net, base_points = inception.inception_v3_base(
          images, final_endpoint='Mixed_6e', scope='Base')
  assert logits.shape.as_list() == [2, 1001]
  assert end_points['AuxLogits'].shape.as_list() == [2, 1001]
  assert end_points['Mixed_7c'].shape.as_list() == [2, 8, 8, 2048]
  assert net.shape.as_list() == [2, 17, 17, 768]
  assert list(base_points)[-1] == 'Mixed_6e'


def test_mobilenet_v2_as_its_readme_calls_it():
  with tf.Graph().as_default():
    images = tf1.placeholder(tf.float32, [2, 224, 224, 3])
    with slim.arg_scope(mobilenet_v2.training_scope(is_training=False)):
      logits, end_points = mobilenet_v2.mobilenet(images)
    assert logits.shape.as_list() == [2, 1001]
    assert end_points['layer_19'].shape.as_list() == [2, 7, 7, 1280]
    assert end_points['global_pool'].shape.as_list() == [2, 1, 1, 1280]
    assert 'MobilenetV2/Logits/Conv2d_1c_1x1/weights' in _variables()


def test_nasnet_as_tf_slim_users_call_it():
  with tf.Graph().as_default():
    images = tf1.placeholder(tf.float32, [2, 224, 224, 3])
    with slim.arg_scope(nasnet.nasnet_mobile_arg_scope()):
      logits, end_points = nasnet.build_nasnet_mobile(images, 1001,
                                                      is_training=False)
    variables = _variables()
  spec = _checkpoint_spec('nasnet_mobile')
  assert variables == {n: s for n, s, _ in spec['variables']}
  assert logits.shape.as_list() == [2, 1001]
  assert end_points['Cell_11'].shape.as_list() == [2, 7, 7, 1056]
  assert end_points['global_pool'].shape.as_list() == [2, 1056]


# -- i3d and s3dg --------------------------------------------------------------
@pytest.mark.parametrize('name', ['i3d', 's3dg'])
def test_video_net_is_registered_with_clip_inputs(name):
  info = nets_factory.get_info(name)
  assert (info.default_image_size, info.num_frames, info.input_rank) == (
      224, 64, 5)
  assert info.input_shape(2) == [2, 64, 224, 224, 3]
  fn = nets_factory.get_network_fn(name, 10)
  assert (fn.default_image_size, fn.num_frames) == (224, 64)
  assert info.logits_scopes == ('InceptionV1/Logits',)


@pytest.mark.parametrize('name', ['i3d', 's3dg'])
def test_video_net_variables_and_end_points_equal_tf_slims(name):
  spec = _video_spec(name)
  with tf.Graph().as_default():
    clips = tf1.placeholder(tf.float32, [2, 64, 224, 224, 3])
    with slim.arg_scope(nets_factory.arg_scopes_map[name]()):
      logits, end_points = nets_factory.networks_map[name](
          clips, num_classes=1000, is_training=False)
    variables = _variables()
    moving = {v.op.name for v in tf1.get_collection('moving_vars')}
  want = {n: s for n, s, _ in spec['variables']}
  assert sorted(set(want) - set(variables)) == []
  assert sorted(set(variables) - set(want)) == []
  assert variables == want
  assert moving == {n for n in want if '/moving_' in n}
  assert logits.shape.as_list() == spec['logits_shape']
  assert list(end_points) == ENDPOINTS + ['Logits', 'Predictions']
  assert _shapes(end_points) == spec['end_points']
  assert logits.op.name.startswith('InceptionV1/Logits/')


@pytest.mark.parametrize('base', [i3d.i3d_base, s3dg.s3dg_base])
def test_video_base_builds_up_to_each_final_endpoint(base):
  for index, endpoint in enumerate(ENDPOINTS):
    with tf.Graph().as_default():
      clips = tf1.placeholder(tf.float32, [2, 16, 64, 64, 3])
      net, end_points = base(clips, final_endpoint=endpoint)
    assert net.op.name.startswith('InceptionV1/' + endpoint + '/'), endpoint
    assert list(end_points) == ENDPOINTS[:index + 1]


@pytest.mark.parametrize('name', ['i3d', 's3dg'])
def test_sixteen_frame_clips_end_with_two_frames(name):
  with tf.Graph().as_default():
    fn = nets_factory.get_network_fn(name, 5)
    logits, end_points = fn(tf1.placeholder(tf.float32, [2, 16, 224, 224, 3]))
  shapes = _shapes(end_points)
  assert shapes['Conv2d_1a_7x7'] == [2, 8, 112, 112, 64]
  assert shapes['MaxPool_4a_3x3'] == [2, 4, 14, 14, 480]
  assert shapes['Mixed_5c'] == [2, 2, 7, 7, 1024]
  assert logits.shape.as_list() == [2, 5]


def test_video_options_spatial_squeeze_and_features():
  with tf.Graph().as_default():
    clips = tf1.placeholder(tf.float32, [2, 16, 112, 112, 3])
    logits, _ = s3dg.s3dg(clips, num_classes=6, spatial_squeeze=False)
    features, end_points = i3d.i3d(clips, num_classes=0, scope='Features')
    names = list(_variables())
  assert logits.shape.as_list() == [2, 1, 1, 6]
  assert features.shape.as_list() == [2, 1024]
  assert 'Logits' not in end_points
  assert not [n for n in names if n.startswith('Features/Logits')]


def _s3dg_variables(**kwargs):
  with tf.Graph().as_default():
    with slim.arg_scope(s3dg.s3dg_arg_scope()):
      _, end_points = s3dg.s3dg_base(
          tf1.placeholder(tf.float32, [2, 16, 64, 64, 3]), **kwargs)
    return _variables(), _shapes(end_points)


def test_s3dg_gating_and_temporal_convs_start_where_asked():
  variables, _ = _s3dg_variables(gating_startat='Mixed_5b',
                                 temporal_conv_startat='Mixed_4b')
  gated = sorted({n.split('/')[1] for n in variables if 'self_gating' in n})
  temporal = sorted({n.split('/')[1] for n in variables if '/temporal/' in n})
  assert gated == ['Mixed_5b', 'Mixed_5c']
  assert temporal == ['Mixed_4b', 'Mixed_4c', 'Mixed_4d', 'Mixed_4e',
                      'Mixed_4f', 'Mixed_5b', 'Mixed_5c']
  assert variables['InceptionV1/Mixed_3c/Branch_1/Conv2d_0b_3x3/weights'] == [
      1, 3, 3, 128, 192]
  assert variables['InceptionV1/Mixed_4b/Branch_1/Conv2d_0b_3x3/weights'] == [
      1, 3, 3, 96, 208]
  assert variables[
      'InceptionV1/Mixed_4b/Branch_1/Conv2d_0b_3x3/temporal/weights'] == [
          3, 1, 1, 208, 208]
  none, _ = _s3dg_variables(gating_startat=None, temporal_conv_startat=None)
  assert not [n for n in none if 'self_gating' in n or '/temporal/' in n]


def test_s3dg_depth_multiplier_min_depth_and_first_kernel():
  variables, shapes = _s3dg_variables(depth_multiplier=0.5, min_depth=16,
                                      first_temporal_kernel_size=1)
  assert variables['InceptionV1/Conv2d_1a_7x7/weights'] == [1, 7, 7, 3, 32]
  # 16 * 0.5 = 8 channels, raised to min_depth.
  assert variables['InceptionV1/Mixed_3b/Branch_2/Conv2d_0a_1x1/weights'] == [
      1, 1, 1, 96, 16]
  assert shapes['Mixed_5c'][-1] == 192 + 192 + 64 + 64


def test_s3dg_channels_first_creates_the_same_variables():
  want, _ = _s3dg_variables()
  with tf.Graph().as_default():
    with slim.arg_scope(s3dg.s3dg_arg_scope()):
      logits, end_points = s3dg.s3dg(
          tf1.placeholder(tf.float32, [2, 3, 16, 64, 64]), num_classes=4,
          data_format='NCDHW')
    got = _variables()
  assert end_points['Mixed_5c'].shape.as_list() == [2, 1024, 2, 2, 2]
  assert logits.shape.as_list() == [2, 4]
  assert {n: s for n, s in got.items() if '/Logits/' not in n} == want


@pytest.mark.parametrize('call, message', [
    (lambda x: i3d.i3d(x[:, 0]), r'i3d takes clips \[batch, frames, height, '
     r'width, channels\] \(5-D\); got a 4-D tensor of shape \[2, 64, 64, 3\]'),
    (lambda x: s3dg.s3dg_base(x, final_endpoint='Mixed_6a'),
     r'Unknown final endpoint Mixed_6a \(valid: Conv2d_1a_7x7, '),
    (lambda x: s3dg.s3dg(x, gating_startat='Mixed3b'),
     r"unknown gating_startat 'Mixed3b' \(known: None, Conv2d_2c_3x3, "),
    (lambda x: s3dg.s3dg(x, first_temporal_kernel_size=4),
     r'first_temporal_kernel_size can only be 1, 3, 5 or 7, got 4'),
    (lambda x: s3dg.s3dg(x, data_format='NHWC'),
     r"unknown data_format 'NHWC' \(known: NDHWC, NCDHW\)"),
    (lambda x: s3dg.s3dg(x, depth_multiplier=0),
     r'depth_multiplier is not greater than zero'),
])
def test_bad_video_arguments_name_the_culprit(call, message):
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match=message):
      call(tf1.placeholder(tf.float32, [2, 8, 64, 64, 3]))


def test_separable_temporal_kernel_starts_as_identity_in_time():
  with tf.Graph().as_default():
    with slim.arg_scope(s3dg.s3dg_arg_scope()):
      s3dg.s3dg_base(tf1.placeholder(tf.float32, [1, 8, 32, 32, 3]),
                     final_endpoint='Conv2d_2c_3x3')
    kernel = [v for v in tf1.global_variables()
              if v.op.name == 'InceptionV1/Conv2d_2c_3x3/temporal/weights'][0]
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      value = sess.run(kernel)
  assert value.shape == (3, 1, 1, 192, 192)
  np.testing.assert_array_equal(value[1, 0, 0], np.eye(192))
  assert not value[[0, 2]].any()


def test_center_initializer_refuses_kernels_it_cannot_centre():
  init = i3d_utils.center_initializer()
  with pytest.raises(ValueError, match='odd temporal kernel size'):
    init([2, 1, 1, 4, 4])
  with pytest.raises(ValueError, match=r'pointwise \(1x1\) spatial kernel'):
    init([3, 3, 3, 4, 4])


def test_self_gating_scales_each_channel_by_its_gate():
  rng = np.random.RandomState(0)
  x = rng.randn(2, 3, 4, 4, 5).astype(np.float32)
  w = rng.randn(5, 5).astype(np.float32)
  with tf.Graph().as_default():
    out = s3dg.self_gating(tf.constant(x), scope='Gate')
    (kernel,) = tf1.global_variables()
    assert kernel.op.name == 'Gate/self_gating/transformer_W/weights'
    with tf1.Session() as sess:
      sess.run(kernel.assign(w.reshape(1, 1, 1, 5, 5)))
      got = sess.run(out)
  gates = 1 / (1 + np.exp(-(x.mean(axis=(1, 2, 3)) @ w)))
  np.testing.assert_allclose(got, x * gates[:, None, None, None, :],
                             rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('name', ['i3d', 's3dg'])
def test_video_training_step_moves_every_variable(name):
  rng = np.random.RandomState(0)
  with tf.Graph().as_default():
    tf1.set_random_seed(0)
    clips = tf.constant(rng.uniform(-1, 1, [2, 8, 112, 112, 3]), tf.float32)
    fn = nets_factory.get_network_fn(name, 4, weight_decay=1e-4,
                                     is_training=True)
    logits, _ = fn(clips)
    tf1.losses.sparse_softmax_cross_entropy(tf.constant([0, 3]), logits)
    train_op = slim.learning.create_train_op(
        tf1.losses.get_total_loss(), tf1.train.GradientDescentOptimizer(0.1))
    variables = tf1.trainable_variables()
    moving = tf1.get_collection('moving_vars')
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      before = sess.run(variables + moving)
      loss = sess.run(train_op)
      after = sess.run(variables + moving)
  assert np.isfinite(loss)
  frozen = [v.op.name for v, b, a in zip(variables + moving, before, after)
            if np.array_equal(b, a)]
  assert not frozen, frozen[:10]
