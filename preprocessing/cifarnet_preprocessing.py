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
from preprocessing.registry import register_preprocessing

_PADDING = 4


def _to_float(image, use_grayscale):
  return channels.maybe_grayscale(tf.cast(image, tf.float32), use_grayscale)


def _summarize(name, image, add_image_summaries):
  if add_image_summaries:
    tf.compat.v1.summary.image(name, tf.expand_dims(image, 0))


def preprocess_for_train(image, output_height, output_width, padding=_PADDING,
                         add_image_summaries=True, use_grayscale=False):
  """Pad, random crop, random flip, brightness/contrast, standardisation."""
  _summarize('image', image, add_image_summaries)
  image = _to_float(image, use_grayscale)
  if padding > 0:
    image = tf.pad(image, [[padding, padding], [padding, padding], [0, 0]])
  depth = image.shape[-1]
  if depth is None:
    depth = tf.shape(image)[-1]
  image = tf.image.random_crop(image, [output_height, output_width, depth])
  image = tf.image.random_flip_left_right(image)
  _summarize('distorted_image', image, add_image_summaries)
  # The two adjustments do not commute; TF-Slim applies them in this order.
  image = tf.image.random_brightness(image, max_delta=63)
  image = tf.image.random_contrast(image, lower=0.2, upper=1.8)
  return tf.image.per_image_standardization(image)


def preprocess_for_eval(image, output_height, output_width,
                        add_image_summaries=True, use_grayscale=False):
  """Central crop or zero padding to the output size, then standardisation."""
  _summarize('image', image, add_image_summaries)
  image = _to_float(image, use_grayscale)
  image = tf.image.resize_with_crop_or_pad(image, output_height, output_width)
  return tf.image.per_image_standardization(image)


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


register_preprocessing('cifarnet', preprocess_image)
