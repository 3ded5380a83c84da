"""CifarNet preprocessing: per-image standardised images, augmented for training.

Training pads 4 pixels on each side, takes a random output-sized crop, flips
it at random and randomly changes brightness and contrast; evaluation crops
or pads to the output size. Both end with `tf.image.per_image_standardization`
(zero mean, unit variance per image), so the input range does not matter
except for the brightness delta, which assumes [0, 255].

With `add_image_summaries` (the default, as in TF-Slim) the input is
summarised as 'image' and, in training, the cropped and flipped image as
'distorted_image'.
"""
import tensorflow as tf

import tf_compat  # noqa: F401
from preprocessing import channels
from preprocessing import encoded_image
from preprocessing.registry import register_preprocessing

_PADDING = 4


def _to_float(image, use_grayscale):
  return channels.maybe_grayscale(tf.cast(image, tf.float32), use_grayscale)


def _summarize(name, image, add_image_summaries):
  if add_image_summaries:
    tf.compat.v1.summary.image(name, tf.expand_dims(image, 0))


def _window_of_padded_crop(offset, length, size, padding):
  """(first source row, rows, zero rows before, zero rows after) of the
  output rows [offset, offset + length) of an image of `size` rows with
  `padding` zero rows added on each side."""
  start = offset - padding
  first = tf.maximum(start, 0)
  rows = tf.minimum(start + length, size) - first
  before = first - start
  return first, rows, before, length - before - rows


def _padded_crop_from_jpeg(image, offset_height, offset_width, output_height,
                           output_width, padding, use_grayscale):
  """The crop at (offset_height, offset_width) of the EncodedJpeg `image`
  padded with `padding` zeros on each side: float32, decoding only the part
  of the crop inside the image."""
  shape = image.shape()
  top, rows, above, below = _window_of_padded_crop(
      offset_height, output_height, shape[0], padding)
  left, cols, before, after = _window_of_padded_crop(
      offset_width, output_width, shape[1], padding)
  window = _to_float(image.decode_window(top, left, rows, cols), use_grayscale)
  crop = tf.pad(window, [[above, below], [before, after], [0, 0]])
  crop.set_shape([output_height, output_width, window.shape[-1]])
  return crop


def _crop_offset(shape, output_height, output_width, padding):
  """tf.image.random_crop's offset of an output-sized crop of the padded
  image (see encoded_image.random_crop_offset)."""
  return encoded_image.random_crop_offset(
      shape[0] + 2 * padding, shape[1] + 2 * padding, output_height,
      output_width)


def preprocess_for_train(image, output_height, output_width, padding=_PADDING,
                         add_image_summaries=True, use_grayscale=False):
  """Pad, random crop, random flip, brightness/contrast, standardisation.

  An EncodedJpeg `image` is decoded only where the crop falls."""
  if encoded_image.is_encoded(image):
    if add_image_summaries:  # pruned where not fetched (see reader.py)
      _summarize('image', image.decode(), True)
    offset_height, offset_width = _crop_offset(
        image.shape(), output_height, output_width, max(padding, 0))
    image = _padded_crop_from_jpeg(image, offset_height, offset_width,
                                   output_height, output_width,
                                   max(padding, 0), use_grayscale)
    return _flip_and_distort(image, add_image_summaries)
  _summarize('image', image, add_image_summaries)
  image = _to_float(image, use_grayscale)
  if padding > 0:
    image = tf.pad(image, [[padding, padding], [padding, padding], [0, 0]])
  depth = image.shape[-1]
  if depth is None:
    depth = tf.shape(image)[-1]
  image = tf.image.random_crop(image, [output_height, output_width, depth])
  return _flip_and_distort(image, add_image_summaries)


def _flip_and_distort(image, add_image_summaries):
  image = tf.image.random_flip_left_right(image)
  _summarize('distorted_image', image, add_image_summaries)
  # The two adjustments do not commute; TF-Slim applies them in this order.
  image = tf.image.random_brightness(image, max_delta=63)
  image = tf.image.random_contrast(image, lower=0.2, upper=1.8)
  return tf.image.per_image_standardization(image)


def preprocess_for_eval(image, output_height, output_width,
                        add_image_summaries=True, use_grayscale=False):
  """Central crop or zero padding to the output size, then standardisation.

  An EncodedJpeg `image` is decoded only inside the crop (bit-identical)."""
  if encoded_image.is_encoded(image):
    if add_image_summaries:
      _summarize('image', image.decode(), True)
    shape = image.shape()
    # resize_with_crop_or_pad's offsets: crop centred, padding centred.
    top = tf.maximum((shape[0] - output_height) // 2, 0)
    left = tf.maximum((shape[1] - output_width) // 2, 0)
    rows = tf.minimum(shape[0], output_height)
    cols = tf.minimum(shape[1], output_width)
    above = tf.maximum((output_height - shape[0]) // 2, 0)
    before = tf.maximum((output_width - shape[1]) // 2, 0)
    window = _to_float(image.decode_window(top, left, rows, cols),
                       use_grayscale)
    image = tf.pad(window, [[above, output_height - rows - above],
                            [before, output_width - cols - before], [0, 0]])
    image.set_shape([output_height, output_width, window.shape[-1]])
    return tf.image.per_image_standardization(image)
  _summarize('image', image, add_image_summaries)
  image = _to_float(image, use_grayscale)
  image = tf.image.resize_with_crop_or_pad(image, output_height, output_width)
  return tf.image.per_image_standardization(image)


@encoded_image.takes_encoded_images
def preprocess_image(image, output_height, output_width, is_training=False,
                     add_image_summaries=True, use_grayscale=False, bbox=None,
                     padding=_PADDING):
  """Training or evaluation preprocessing of one [height, width, C] image.

  TF-Slim's arguments; `bbox` is unused (as in TF-Slim), `padding` is
  preprocess_for_train's.
  """
  del bbox
  if is_training:
    return preprocess_for_train(image, output_height, output_width, padding,
                                add_image_summaries=add_image_summaries,
                                use_grayscale=use_grayscale)
  return preprocess_for_eval(image, output_height, output_width,
                             add_image_summaries=add_image_summaries,
                             use_grayscale=use_grayscale)


# No output_range: per-image standardization's values depend on the image
# (up to sqrt(pixels - 1) for one bright pixel on black), not the pixels'.
register_preprocessing('cifarnet', preprocess_image)
