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
    # Training's random crop and colour distortion, seeded: an unseeded
    # draw once squeezed this image's range below 1.0 (0.996, a quick run).
    tf1.set_random_seed(0)
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


def test_vgg_means_image_is_made_outside_functions_with_the_same_floats():
  """The channel means are subtracted as an image made once (init_scope);
  inside tf.map_fn's loop (as the exported graphs preprocess), in a tf.data
  map and with a shape known only at run time they give the floats of
  subtracting each channel's mean."""
  images = np.stack([_image(300, 400, seed=i) for i in range(2)])
  means = np.array([123.68, 116.78, 103.94], np.float32)
  with tf.Graph().as_default(), tf1.Session() as sess:
    crop = lambda i: vgg_preprocessing.preprocess_image(i, 224, 224)
    mapped = tf.map_fn(crop, tf.constant(images),
                       fn_output_signature=tf.float32)
    streamed = tf1.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensor_slices(images).map(crop).batch(2)
    ).get_next()
    unknown = tf1.placeholder(tf.float32, [None, None, 3])
    dynamic = vgg_preprocessing._mean_image_subtraction(unknown, list(means))  # pylint: disable=protected-access
    resized = vgg_preprocessing._aspect_preserving_resize(  # pylint: disable=protected-access
        tf.constant(images[0]), 256)
    centre = vgg_preprocessing._central_crop(resized, 224, 224)  # pylint: disable=protected-access
    a, b, c = sess.run([mapped, streamed, centre])
    np.testing.assert_array_equal(a, b)
    for channel in range(3):
      np.testing.assert_array_equal(a[0][..., channel],
                                    c[..., channel] - means[channel])
    np.testing.assert_array_equal(sess.run(dynamic, {unknown: c}), a[0])


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


# --- identical to TF-Slim: values worked out independently in numpy ----------

def _call(name, image, size, is_training=False, **call_kwargs):
  """preprocessing_fn(image, size, size, **call_kwargs), evaluated once."""
  with tf.Graph().as_default():
    tf1.set_random_seed(0)
    fn = preprocessing_factory.get_preprocessing(name, is_training)
    with tf1.Session() as sess:
      return sess.run(fn(tf.constant(image), size, size, **call_kwargs))


def _bilinear(image, out_h, out_w, half_pixel_centers):
  """Bilinear resize as TF defines it: TF 1.x semantics (align_corners=False,
  no half-pixel centres) or TF 2's (half-pixel centres), in float64."""
  image = image.astype(np.float64)

  def sample(size_in, size_out):
    scale = size_in / size_out
    coords = np.arange(size_out, dtype=np.float64)
    if half_pixel_centers:
      coords = np.maximum((coords + 0.5) * scale - 0.5, 0)
    else:
      coords = coords * scale
    low = np.floor(coords).astype(int)
    high = np.minimum(low + 1, size_in - 1)
    return low, high, coords - low

  y0, y1, dy = sample(image.shape[0], out_h)
  x0, x1, dx = sample(image.shape[1], out_w)
  top = image[y0][:, x0] * (1 - dx)[None, :, None] + image[y0][:, x1] * dx[None, :, None]
  bottom = image[y1][:, x0] * (1 - dx)[None, :, None] + image[y1][:, x1] * dx[None, :, None]
  return top * (1 - dy)[:, None, None] + bottom * dy[:, None, None]


def test_vgg_resized_sides_are_rounded_like_tf_slim_for_short_sides_1_to_1000():
  from fractions import Fraction
  shorts = np.arange(1, 1001)
  longs = np.stack([shorts, shorts * 4 // 3 + 1, shorts * 3 + 7,
                    np.full_like(shorts, 1000)], axis=1).reshape(-1)
  shorts = np.repeat(shorts, 4)
  longs = np.maximum(longs, shorts)
  with tf.Graph().as_default():
    sizes = vgg_preprocessing._smallest_size_at_least(
        tf.constant(shorts), tf.constant(longs), 256)
    flipped = vgg_preprocessing._smallest_size_at_least(
        tf.constant(longs), tf.constant(shorts), 256)
    with tf1.Session() as sess:
      (new_short, new_long), (new_long_2, new_short_2) = sess.run([sizes, flipped])
  expected_long = [round(Fraction(256 * int(l), int(s))) for s, l in zip(shorts, longs)]
  assert new_short.tolist() == [256] * len(shorts)  # truncation gave 255 for 332
  assert new_long.tolist() == expected_long
  assert (new_short_2.tolist(), new_long_2.tolist()) == (new_short.tolist(),
                                                         new_long.tolist())


def test_vgg_eval_of_a_332_pixel_side_with_crop_equal_to_resize_side():
  value = _preprocess('vgg', _image(332, 500), 256)  # crashed when truncating
  assert value.shape == (256, 256, 3)


@pytest.mark.parametrize('is_training', [False, True])
def test_vgg_eval_values_on_a_fixed_image(is_training):
  image = _image(30, 45, seed=3)
  if is_training:  # resize_side_min == max: the scale is fixed, the crop random
    value = _call('vgg', image, 16, is_training=True, resize_side_min=20,
                  resize_side_max=20)
  else:
    value = _call('vgg', image, 16, resize_side_min=20)
  resized = _bilinear(image, 20, 30, half_pixel_centers=False)  # 30 -> 20, 45 -> 30
  means = np.array([123.68, 116.78, 103.94])
  if not is_training:
    np.testing.assert_allclose(value, resized[2:18, 7:23] - means, atol=1e-3)
    return
  # Some 16x16 window of the resized image, maybe flipped.
  windows = [resized[t:t + 16, l:l + 16] - means for t in range(5) for l in range(15)]
  windows += [w[:, ::-1] for w in windows]
  assert min(np.abs(value - w).max() for w in windows) < 1e-3


def test_inception_eval_values_on_a_fixed_image():
  image = _image(40, 30, seed=4)
  with tf.Graph().as_default():
    fn = preprocessing_factory.get_preprocessing('inception', False)
    output = fn(tf.constant(image), 12, 12, central_fraction=0.5)
    with tf1.Session() as sess:
      value = sess.run(output)
  # central_crop(0.5): rows int((40 - 20) / 2) = 10 .. 30, columns int(7.5) = 7 .. 23.
  crop = image[10:30, 7:23].astype(np.float64) / 255.0
  expected = (_bilinear(crop, 12, 12, half_pixel_centers=False) - 0.5) * 2.0
  np.testing.assert_allclose(value, expected, atol=1e-5)


def test_cifarnet_eval_values_on_a_fixed_image():
  image = _image(36, 36, seed=5)
  value = _preprocess('cifarnet', image, 32)
  crop = image[2:34, 2:34].astype(np.float64)
  expected = (crop - crop.mean()) / max(crop.std(), 1.0 / np.sqrt(crop.size))
  np.testing.assert_allclose(value, expected, atol=1e-4)


def test_lenet_values_on_a_fixed_8x8_image():
  image = _image(8, 8, 1, seed=6)
  value = _preprocess('lenet', image, 28)
  expected = (_bilinear(image, 28, 28, half_pixel_centers=True) - 128.0) / 128.0
  np.testing.assert_allclose(value, expected, atol=1e-5)


# --- TF-Slim's keyword arguments, same meaning -----------------------------------

def test_inception_eval_crop_image_and_central_fraction():
  image = _image(40, 30, seed=7)
  whole = _call('inception', image, 16, crop_image=False)
  np.testing.assert_allclose(
      whole, (_bilinear(image / 255.0, 16, 16, False) - 0.5) * 2, atol=1e-5)
  np.testing.assert_array_equal(_call('inception', image, 16,
                                      central_fraction=1.0), whole)
  assert not np.allclose(_preprocess('inception', image, 16), whole)  # 0.875


@pytest.mark.parametrize('name, keywords', [
    ('inception', dict(bbox=None, fast_mode=False, add_image_summaries=False,
                       crop_image=False, use_grayscale=False, central_fraction=0.9)),
    ('vgg', dict(resize_side_min=40, resize_side_max=48, use_grayscale=False,
                 bbox=None, add_image_summaries=False)),
    ('cifarnet', dict(add_image_summaries=False, use_grayscale=False, bbox=None)),
    ('lenet', dict(use_grayscale=False, bbox=None, add_image_summaries=False)),
])
@pytest.mark.parametrize('is_training', [False, True])
def test_every_family_takes_tf_slims_keywords(name, keywords, is_training):
  module = preprocessing_factory.get_info(name)
  with tf.Graph().as_default():
    output = module.preprocess_image(tf.constant(_image(50, 40)), 32, 32,
                                     is_training=is_training, **keywords)
    assert output.shape.as_list() == [32, 32, 3]
    assert tf1.get_collection(tf1.GraphKeys.SUMMARIES) == []  # none asked for


def _summary_tags(name, is_training, **kwargs):
  with tf.Graph().as_default():
    fn = preprocessing_factory.get_preprocessing(name, is_training)
    fn(tf.constant(_image(40, 40)), 32, 32, **kwargs)
    merged = tf1.summary.merge_all()
    if merged is None:
      return set()
    with tf1.Session() as sess:
      summary = tf1.Summary.FromString(sess.run(merged))
  assert all(v.image.height > 0 for v in summary.value)
  return {v.tag for v in summary.value}


@pytest.mark.parametrize('name, is_training, tags', [
    ('inception', True, {'distort_image/image_with_bounding_boxes/image/0',
                         'distort_image/images_with_distorted_bounding_box/image/0',
                         'distort_image/cropped_resized_image/image/0',
                         'distort_image/final_distorted_image/image/0'}),
    ('inception', False, set()),
    ('cifarnet', True, {'image/image/0', 'distorted_image/image/0'}),
    ('cifarnet', False, {'image/image/0'}),
    ('vgg', True, set()),
    ('lenet', True, set()),
])
def test_image_summaries_are_tf_slims(name, is_training, tags):
  assert _summary_tags(name, is_training) == tags
  assert _summary_tags(name, is_training, add_image_summaries=False) == set()


def test_reader_writes_the_preprocessing_image_summaries(tmp_path):
  from datasets import converters, dataset_factory, reader
  converters.convert('digits', str(tmp_path), num_shards=1)
  descriptor = dataset_factory.get_dataset('digits', 'train', str(tmp_path))
  preprocess = preprocessing_factory.get_preprocessing('cifarnet', True)
  with tf.Graph().as_default():
    dataset = reader.make_dataset(
        descriptor, 4, preprocess_fn=lambda image, **kw: preprocess(image, 8, 8, **kw))
    batch = tf1.data.make_one_shot_iterator(dataset).get_next()
    merged = tf1.summary.merge_all()
    with tf1.Session() as sess:
      sess.run(batch)
      summary = tf1.Summary.FromString(sess.run(merged))
  assert {v.tag for v in summary.value} == {'image/image/0', 'distorted_image/image/0'}
  assert [(v.image.height, v.image.width) for v in summary.value] == [(8, 8), (8, 8)]
