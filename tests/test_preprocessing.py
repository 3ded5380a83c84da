"""Preprocessing functions: output sizes, value ranges, randomness, name mapping."""
import numpy as np
import pytest
import tensorflow as tf

from preprocessing import preprocessing_factory
from preprocessing import vgg_preprocessing

tf1 = tf.compat.v1
NAMES = ('inception', 'vgg', 'lenet', 'cifarnet')
SIZES = {'inception': 224, 'vgg': 224, 'lenet': 28, 'cifarnet': 32}


def _image(height, width, channels=3, seed=0):
  return np.random.RandomState(seed).randint(
      0, 256, [height, width, channels]).astype(np.uint8)


def _constant(height, width, colour):
  return np.tile(np.array(colour, np.uint8), [height, width, 1])


def _preprocess(name, image, size, is_training=False, runs=1, **kwargs):
  """Builds the preprocessing of `image` once and evaluates it `runs` times."""
  with tf.Graph().as_default():
    tf1.set_random_seed(0)
    fn = preprocessing_factory.get_preprocessing(name, is_training, **kwargs)
    output = fn(tf.constant(image), size, size)
    with tf1.Session() as sess:
      values = [sess.run(output) for _ in range(runs)]
  assert output.shape.as_list() == list(values[0].shape)
  return values if runs > 1 else values[0]


@pytest.mark.parametrize('is_training', [False, True])
@pytest.mark.parametrize('fast_mode', [True, False])
def test_inception_output_is_in_signed_unit_range(is_training, fast_mode):
  with tf.Graph().as_default():
    fn = preprocessing_factory.get_preprocessing('inception', is_training)
    output = fn(tf.constant(_image(300, 200)), 224, 224, fast_mode=fast_mode)
    with tf1.Session() as sess:
      value = sess.run(output)
  assert value.shape == (224, 224, 3)
  assert value.min() >= -1.0 and value.max() <= 1.0
  assert value.max() - value.min() > 1.0  # not collapsed to a constant


def test_inception_eval_maps_uint8_black_and_white_to_minus_one_and_one():
  black = _preprocess('inception', _constant(100, 100, [0, 0, 0]), 64)
  white = _preprocess('inception', _constant(100, 100, [255, 255, 255]), 64)
  np.testing.assert_allclose(black, -1.0)
  np.testing.assert_allclose(white, 1.0)


def test_inception_takes_float_input_as_unit_range():
  grey = np.full([50, 50, 3], 0.75, np.float32)
  np.testing.assert_allclose(_preprocess('inception', grey, 32), 0.5,
                             rtol=1e-6)


def test_inception_eval_is_deterministic_and_training_is_random():
  image = _image(300, 200)
  first, second = _preprocess('inception', image, 224, runs=2)
  np.testing.assert_array_equal(first, second)
  first, second = _preprocess('inception', image, 224, is_training=True,
                              runs=2)
  assert not np.allclose(first, second)


def test_inception_training_accepts_images_of_unknown_size():
  with tf.Graph().as_default():
    images = tf1.placeholder(tf.uint8, [None, None, 3])
    output = preprocessing_factory.get_preprocessing('inception', True)(
        images, 96, 96)
    with tf1.Session() as sess:
      value = sess.run(output, {images: _image(120, 80)})
  assert output.shape.as_list() == [96, 96, 3]
  assert value.shape == (96, 96, 3)


@pytest.mark.parametrize('is_training', [False, True])
def test_vgg_subtracts_the_channel_means_from_a_constant_colour(is_training):
  value = _preprocess('vgg', _constant(300, 400, [200, 100, 50]), 224,
                      is_training=is_training)
  assert value.shape == (224, 224, 3)
  np.testing.assert_allclose(
      value, np.broadcast_to([200 - 123.68, 100 - 116.78, 50 - 103.94],
                             value.shape), rtol=1e-5)


def test_vgg_eval_is_deterministic_and_training_is_random():
  image = _image(300, 400)
  first, second = _preprocess('vgg', image, 224, runs=2)
  np.testing.assert_array_equal(first, second)
  first, second = _preprocess('vgg', image, 224, is_training=True, runs=2)
  assert not np.allclose(first, second)


def test_vgg_resize_keeps_the_aspect_ratio_with_the_smaller_side_given():
  with tf.Graph().as_default():
    resized = vgg_preprocessing._aspect_preserving_resize(
        tf.constant(_image(300, 600)), 256)
    with tf1.Session() as sess:
      assert sess.run(resized).shape == (256, 512, 3)


def test_vgg_one_channel_subtracts_the_grey_mean():
  value = _preprocess('vgg', _constant(256, 256, [100]), 224)
  grey_mean = 0.2989 * 123.68 + 0.5870 * 116.78 + 0.1140 * 103.94
  np.testing.assert_allclose(value, 100 - grey_mean, rtol=1e-5)


@pytest.mark.parametrize('is_training', [False, True])
def test_lenet_scales_an_output_sized_image_exactly(is_training):
  image = _image(28, 28, 1)
  value = _preprocess('lenet', image, 28, is_training=is_training)
  np.testing.assert_array_equal(value, (image.astype(np.float32) - 128) / 128)


def test_lenet_resizes_8x8_digits_to_28x28_bilinearly():
  constant = _preprocess('lenet', _constant(8, 8, [64]), 28)
  assert constant.shape == (28, 28, 1)
  np.testing.assert_allclose(constant, -0.5)  # bilinear keeps a constant
  value = _preprocess('lenet', _image(8, 8, 1), 28)
  assert value.min() >= -1.0 and value.max() < 1.0
  assert len(np.unique(value)) > 64  # interpolated, not padded or repeated


@pytest.mark.parametrize('is_training', [False, True])
def test_cifarnet_output_is_standardised(is_training):
  value = _preprocess('cifarnet', _image(32, 32), 32, is_training=is_training)
  assert value.shape == (32, 32, 3)
  assert abs(value.mean()) < 1e-4
  assert abs(value.std() - 1.0) < 1e-3


def test_cifarnet_eval_crops_larger_images_and_is_deterministic():
  first, second = _preprocess('cifarnet', _image(40, 36), 32, runs=2)
  assert first.shape == (32, 32, 3)
  np.testing.assert_array_equal(first, second)


def test_cifarnet_training_is_random():
  first, second = _preprocess('cifarnet', _image(32, 32), 32,
                              is_training=True, runs=2)
  assert not np.allclose(first, second)


@pytest.mark.parametrize('is_training', [False, True])
@pytest.mark.parametrize('name', NAMES)
def test_one_channel_input_gives_one_channel_output(name, is_training):
  size = SIZES[name]
  value = _preprocess(name, _image(300, 300, 1), size, is_training=is_training)
  assert value.shape == (size, size, 1)
  assert np.all(np.isfinite(value))


@pytest.mark.parametrize('name', ['inception', 'vgg', 'lenet', 'cifarnet'])
def test_use_grayscale_converts_rgb_to_one_channel(name):
  size = SIZES[name]
  value = _preprocess(name, _image(300, 300), size, is_training=True,
                      use_grayscale=True)
  assert value.shape == (size, size, 1)


@pytest.mark.parametrize('network, expected', [
    ('inception_v3', 'inception'), ('vgg_16', 'vgg'),
    ('resnet_v1_50', 'vgg'), ('lenet', 'lenet'), ('cifarnet', 'cifarnet'),
    ('mobilenet_v2', 'inception')])
def test_network_name_maps_to_its_preprocessing(network, expected):
  image = _image(64, 48)
  np.testing.assert_array_equal(_preprocess(network, image, 32),
                                _preprocess(expected, image, 32))


def test_unknown_name_lists_the_preprocessing_names():
  with pytest.raises(ValueError, match=r"unknown preprocessing_name 'vgg16'; "
                     r"did you mean 'vgg_16'\? \(known: cifarnet, "
                     r"inception, lenet, vgg"):
    preprocessing_factory.get_preprocessing('vgg16')
