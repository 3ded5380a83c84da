"""VGG-style preprocessing, as the published VGG and ResNet checkpoints saw it.

Simonyan & Zisserman, arXiv:1409.1556: the smaller side is resized (keeping
the aspect ratio) to a random length in [256, 512] for training and to 256
for evaluation, then an output-sized crop is taken (random, and randomly
flipped, for training; central for evaluation) and the per-channel ImageNet
mean is subtracted. Pixel values stay in [0, 255]: uint8 images are cast,
float images must already be in [0, 255].

Resizing uses TensorFlow 1.x bilinear semantics (no half-pixel centres),
as the published checkpoints were trained and evaluated with; the resized
sides are rounded to the nearest integer (tf.math.rint, halves to even) from
float32 arithmetic, exactly as TF-Slim computes them, so the smaller side is
`resize_side` whatever the shape.

`preprocess_image` takes TF-Slim's arguments (`is_training`,
`resize_side_min`, `resize_side_max`, `use_grayscale`); `bbox` and
`add_image_summaries` are accepted for a uniform signature and unused, as in
TF-Slim's VGG preprocessing (it writes no summaries and uses no boxes).
"""
import tensorflow as tf

import tf_compat  # noqa: F401
from preprocessing import channels
from preprocessing import encoded_image
from preprocessing.registry import register_preprocessing

tf1 = tf.compat.v1

_R_MEAN = 123.68
_G_MEAN = 116.78
_B_MEAN = 103.94
# Luma weights of tf.image.rgb_to_grayscale: a one-channel image is the
# grayscale of an RGB one, so its mean is the grayscale of the RGB mean.
_LUMA = (0.2989, 0.5870, 0.1140)
_GRAY_MEAN = sum(w * m for w, m in zip(_LUMA, (_R_MEAN, _G_MEAN, _B_MEAN)))

_RESIZE_SIDE_MIN = 256
_RESIZE_SIDE_MAX = 512


def _mean_image_subtraction(image, means):
  """Subtracts means[c] from channel c of a [height, width, C] image."""
  if image.shape.ndims != 3:
    raise ValueError('image must be [height, width, channels], got %s'
                     % image.shape)
  if len(means) != channels.num_channels(image):
    raise ValueError('%d means for a %d-channel image'
                     % (len(means), channels.num_channels(image)))
  if not image.shape.is_fully_defined():
    return image - tf.constant(means, dtype=image.dtype)
  # Broadcasting a [C] vector along the innermost dimension is slow on CPU
  # (0.3 ms for a 224x224x3 image on one core, where subtracting an image of
  # the same shape takes 0.01 ms and gives the same floats): the means as a
  # whole image, made once where the graph begins (init_scope: outside the
  # tf.data function this runs in for every image).
  with tf.init_scope():
    means = tf.tile(tf.constant([[means]], dtype=image.dtype),
                    image.shape.as_list()[:2] + [1])
  return image - means


def _channel_means(image):
  if channels.num_channels(image) == 1:
    return [_GRAY_MEAN]
  return [_R_MEAN, _G_MEAN, _B_MEAN]


def _smallest_size_at_least(height, width, smallest_side):
  """(new_height, new_width) with the smaller side `smallest_side`, same aspect."""
  height = tf.cast(height, tf.float32)
  width = tf.cast(width, tf.float32)
  smallest_side = tf.cast(smallest_side, tf.float32)
  scale = smallest_side / tf.minimum(height, width)
  # Rounded, as TF-Slim's tf.rint: truncating 255.99998 would give 255.
  return (tf.cast(tf.math.rint(height * scale), tf.int32),
          tf.cast(tf.math.rint(width * scale), tf.int32))


def _aspect_preserving_resize(image, smallest_side):
  """Bilinear resize of a [height, width, C] image; returns float32."""
  shape = tf.shape(image)
  new_height, new_width = _smallest_size_at_least(shape[0], shape[1],
                                                  smallest_side)
  resized = tf1.image.resize_bilinear(image[tf.newaxis],
                                      [new_height, new_width],
                                      align_corners=False)[0]
  resized.set_shape([None, None, image.shape[-1]])
  return resized


def _central_crop(image, crop_height, crop_width):
  shape = tf.shape(image)
  top = (shape[0] - crop_height) // 2
  left = (shape[1] - crop_width) // 2
  return tf.image.crop_to_bounding_box(image, top, left, crop_height,
                                       crop_width)


def _train_from_jpeg(image, output_height, output_width, resize_side_min,
                     resize_side_max, use_grayscale):
  """preprocess_for_train of an EncodedJpeg: the same random scale and crop
  offset, drawn from the header's shape, and for the same draws the same
  floats (resized_crop_from_jpeg)."""
  resize_side = tf1.random_uniform([], minval=resize_side_min,
                                   maxval=resize_side_max + 1, dtype=tf.int32)
  shape = image.shape()
  resized_height, resized_width = _smallest_size_at_least(
      shape[0], shape[1], resize_side)
  offset_height, offset_width = encoded_image.random_crop_offset(
      resized_height, resized_width, output_height, output_width)
  image = resized_crop_from_jpeg(image, resize_side, offset_height,
                                 offset_width, output_height, output_width)
  image = channels.maybe_grayscale(image, use_grayscale)
  image = tf.image.random_flip_left_right(image)
  return _mean_image_subtraction(image, _channel_means(image))


def _bilinear_samples(offset, length, source_size, resized_size):
  """(lower rows, upper rows, weights of the upper) that TF 1.x's bilinear
  resize from `source_size` to `resized_size` uses for outputs [offset,
  offset + length): output i samples i * (source / resized) in float32,
  rows floor and ceil of it, the upper clamped to the image."""
  scale = tf.cast(source_size, tf.float32) / tf.cast(resized_size, tf.float32)
  position = tf.cast(tf.range(offset, offset + length), tf.float32) * scale
  floor = tf.floor(position)
  lower = tf.maximum(tf.cast(floor, tf.int32), 0)
  upper = tf.minimum(tf.cast(tf.math.ceil(position), tf.int32),
                     source_size - 1)
  return lower, upper, position - floor


def resized_crop_from_jpeg(image, resize_side, offset_height, offset_width,
                           output_height, output_width):
  """The output-sized crop at (offset_height, offset_width) of the EncodedJpeg
  `image` resized (TF 1.x bilinear) to smaller side `resize_side`, float32,
  bit-identical to resizing the whole decoded image and cropping, at a
  fraction of the cost.

  The bilinear resize interpolates along rows first, then between the two
  rows each output row reads; both steps are exact to redo in parts. Only
  the band of rows the crop reads is decoded and resized along its width
  (the resize kernel, from floats: it reads uint8 as these floats, bit for
  bit, 2-3x faster); then the crop's columns, and per output row the same
  interpolation between its two rows, in the kernel's arithmetic
  (top + (bottom - top) * weight).
  """
  shape = image.shape()
  resized_height, resized_width = _smallest_size_at_least(
      shape[0], shape[1], resize_side)
  lower, upper, weight = _bilinear_samples(offset_height, output_height,
                                           shape[0], resized_height)
  first = lower[0]
  rows = upper[-1] - first + 1
  band = image.decode_window(first, 0, rows, shape[1])
  band = tf1.image.resize_bilinear(tf.cast(band, tf.float32)[tf.newaxis],
                                   tf.stack([rows, resized_width]),
                                   align_corners=False)[0]
  band = band[:, offset_width:offset_width + output_width]
  top = tf.gather(band, lower - first)
  bottom = tf.gather(band, upper - first)
  crop = top + (bottom - top) * weight[:, tf.newaxis, tf.newaxis]
  # A fence: grappler's constant folding would otherwise re-associate this
  # sum with a following constant subtraction (the means) and round
  # differently from the resize kernel followed by that subtraction.
  return tf.ensure_shape(crop, [output_height, output_width, image.channels])


def preprocess_for_train(image, output_height, output_width,
                         resize_side_min=_RESIZE_SIDE_MIN,
                         resize_side_max=_RESIZE_SIDE_MAX,
                         use_grayscale=False):
  """Random scale in [resize_side_min, resize_side_max], random crop and flip.

  An EncodedJpeg `image` takes the faster path of _train_from_jpeg.
  """
  if encoded_image.is_encoded(image):
    return _train_from_jpeg(image, output_height, output_width,
                            resize_side_min, resize_side_max, use_grayscale)
  resize_side = tf1.random_uniform([], minval=resize_side_min,
                                   maxval=resize_side_max + 1, dtype=tf.int32)
  image = _aspect_preserving_resize(image, resize_side)
  depth = channels.num_channels(image)
  image = tf.image.random_crop(image, [output_height, output_width, depth])
  image = tf.cast(image, tf.float32)
  image = channels.maybe_grayscale(image, use_grayscale)
  image = tf.image.random_flip_left_right(image)
  return _mean_image_subtraction(image, _channel_means(image))


def preprocess_for_eval(image, output_height, output_width, resize_side,
                        use_grayscale=False):
  """Smaller side resized to `resize_side`, central crop, mean subtracted."""
  if encoded_image.is_encoded(image):
    shape = image.shape()
    resized_height, resized_width = _smallest_size_at_least(
        shape[0], shape[1], resize_side)
    image = resized_crop_from_jpeg(
        image, resize_side, (resized_height - output_height) // 2,
        (resized_width - output_width) // 2, output_height, output_width)
    image = channels.maybe_grayscale(image, use_grayscale)
    return _mean_image_subtraction(image, _channel_means(image))
  image = _aspect_preserving_resize(image, resize_side)
  image = _central_crop(image, output_height, output_width)
  image.set_shape([output_height, output_width, image.shape[-1]])
  image = tf.cast(image, tf.float32)
  image = channels.maybe_grayscale(image, use_grayscale)
  return _mean_image_subtraction(image, _channel_means(image))


@encoded_image.takes_encoded_images
def preprocess_image(image, output_height, output_width, is_training=False,
                     resize_side_min=_RESIZE_SIDE_MIN,
                     resize_side_max=_RESIZE_SIDE_MAX, use_grayscale=False,
                     bbox=None, add_image_summaries=True):
  """Training or evaluation preprocessing of one [height, width, C] image.

  At evaluation the smaller side is resized to `resize_side_min`. `bbox` and
  `add_image_summaries` are unused (TF-Slim's VGG preprocessing has neither).
  """
  del bbox, add_image_summaries
  if is_training:
    return preprocess_for_train(image, output_height, output_width,
                                resize_side_min, resize_side_max,
                                use_grayscale)
  return preprocess_for_eval(image, output_height, output_width,
                             resize_side_min, use_grayscale)


# Pixels in [0, 255] less a channel mean (resizing stays within its
# inputs' range); one range for RGB and grayscale images: the widest.
OUTPUT_RANGE = (-max(_R_MEAN, _G_MEAN, _B_MEAN),
                255.0 - min(_R_MEAN, _G_MEAN, _B_MEAN, _GRAY_MEAN))
register_preprocessing('vgg', preprocess_image, output_range=OUTPUT_RANGE)
