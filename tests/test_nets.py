"""Every registered network against its published-checkpoint contract.

The contract is tests/data/checkpoint_specs/<name>.json (variable names and
shapes of the published TF-Slim checkpoint, end-point shapes at the default
size). New registrations are picked up here automatically; inputs come from
the registration (NetworkInfo.input_shape: images, or clips for the video
networks), never from the name.
"""
import fnmatch
import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from classification import moving_statistics
from nets import nets_factory

tf1 = tf.compat.v1
SPEC_DIR = os.path.join(os.path.dirname(__file__), 'data', 'checkpoint_specs')
# Large graphs: still run in CI, deselected by the quick subset (-m "not slow").
HEAVY = ('vgg_*', 'overfeat', 'alexnet_v2', 'inception_v4', 'inception_v3',
         'inception_resnet_v2', 'resnet_*_101', 'resnet_*_152', 'resnet_*_200',
         'nasnet_large', 'pnasnet_large', 'nasnet_cifar', 'i3d', 's3dg')
# Clips for the training step are cut to this many frames: a step on the
# published 64 costs 4x as much, and 16 still leave 2 frames at the last stage.
TRAIN_STEP_FRAMES = 16


def plain_session():
  """A session without Grappler's rewrites: these tests check what the
  network computes, not how TensorFlow optimises it, and rewriting a large
  training graph costs more than running it (nasnet_large: 12 s of a 31 s
  test)."""
  config = tf1.ConfigProto()
  config.graph_options.rewrite_options.disable_meta_optimizer = True
  return tf1.Session(config=config)


def _param(name):
  heavy = any(fnmatch.fnmatch(name, p) for p in HEAVY)
  return pytest.param(name, marks=[pytest.mark.slow] if heavy else [])


ALL = [_param(n) for n in nets_factory.list_models()]


def _spec(name):
  path = os.path.join(SPEC_DIR, name + '.json')
  if not os.path.exists(path):
    pytest.skip('no published-checkpoint spec for %s' % name)
  with open(path) as f:
    return json.load(f)


def test_every_spec_name_is_registered():
  specs = sorted(f[:-5] for f in os.listdir(SPEC_DIR) if f.endswith('.json'))
  missing = [n for n in specs if n not in nets_factory.list_models()]
  assert not missing


@pytest.mark.parametrize('name', ALL)
def test_graph_matches_published_checkpoint(name):
  spec = _spec(name)
  size = spec['default_image_size']
  info = nets_factory.get_info(name)
  assert info.default_image_size == size
  assert info.num_classes == spec['num_classes']
  with tf.Graph().as_default():
    fn = nets_factory.get_network_fn(name, spec['num_classes'])
    assert fn.default_image_size == size
    logits, end_points = fn(tf1.placeholder(tf.float32, info.input_shape(2)))
    got = {v.op.name: v.shape.as_list() for v in tf1.global_variables()}
  want = {n: s for n, s, _ in spec['variables']}
  missing = sorted(set(want) - set(got))
  extra = sorted(set(got) - set(want))
  assert not missing and not extra, ('missing', missing[:5], 'extra', extra[:5])
  wrong = [(n, got[n], want[n]) for n in want if got[n] != want[n]]
  assert not wrong
  assert logits.shape.as_list() == spec['logits_shape']
  assert sorted(end_points) == sorted(spec['end_points'])
  for key, shape in spec['end_points'].items():
    got_shape = [-1 if d is None else d for d in end_points[key].shape.as_list()]
    assert got_shape == shape, key


@pytest.mark.parametrize('name', ALL)
def test_training_step_is_finite_and_moves_every_variable(name):
  """Also: every batch-norm moving statistic's update is found where
  --precise_bn_batches looks for it (classification/moving_statistics.py),
  on the training graph this builds anyway."""
  info = nets_factory.get_info(name)
  num_classes = 7
  shape = info.input_shape(
      2, num_frames=min(info.num_frames, TRAIN_STEP_FRAMES) or None)
  rng = np.random.RandomState(0)
  with tf.Graph().as_default():
    tf1.set_random_seed(0)
    images = tf.constant(rng.uniform(-1, 1, shape), tf.float32)
    labels = tf.constant([1, 5])
    fn = nets_factory.get_network_fn(name, num_classes, weight_decay=1e-4,
                                     is_training=True)
    logits, end_points = fn(images)
    assert logits.shape.as_list() == [2, num_classes]
    moving = sorted(v.op.name for v in tf1.global_variables() if v.op.name.endswith(
        ('/moving_mean', '/moving_variance')))
    assert sorted(u.name for u in moving_statistics.moving_updates()) == moving
    loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    if 'AuxLogits' in end_points:
      loss += 0.4 * tf1.losses.sparse_softmax_cross_entropy(
          labels, tf1.layers.flatten(end_points['AuxLogits']))
    total = tf1.losses.get_total_loss()
    train_op = slim.learning.create_train_op(
        total, tf1.train.GradientDescentOptimizer(0.1))
    variables = tf1.trainable_variables()
    with plain_session() as sess:
      sess.run(tf1.global_variables_initializer())
      before = sess.run(variables)
      loss_value = sess.run(train_op)
      after = sess.run(variables)
  assert np.isfinite(loss_value)
  frozen = [v.op.name for v, b, a in zip(variables, before, after)
            if np.array_equal(b, a)]
  assert not frozen, frozen[:10]


@pytest.mark.parametrize('name', [p for p in ALL if p.values[0] in (
    'lenet', 'cifarnet', 'mobilenet_v1_025', 'i3d')])
def test_pre_logits_features_when_num_classes_is_zero(name):
  info = nets_factory.get_info(name)
  with tf.Graph().as_default():
    fn = nets_factory.get_network_fn(name, 0)
    features, _ = fn(tf1.placeholder(tf.float32, info.input_shape(2)))
    names = [v.op.name for v in tf1.global_variables()]
  assert features.shape[0] == 2
  assert not any(s in n for n in names for s in info.logits_scopes)


def test_grayscale_input_builds_single_channel_first_conv():
  with tf.Graph().as_default():
    nets_factory.get_network_fn('lenet', 10)(
        tf1.placeholder(tf.float32, [2, 28, 28, 1]))
    first = tf1.global_variables()[0]
  assert first.shape.as_list() == [5, 5, 1, 32]


def test_unknown_name_lists_the_known_ones():
  with pytest.raises(ValueError, match=r"unknown model_name 'lenett'; did you "
                     r"mean 'lenet'\? \(known: .*vgg_16"):
    nets_factory.get_network_fn('lenett', 10)
