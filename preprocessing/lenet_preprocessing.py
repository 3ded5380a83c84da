"""LeNet preprocessing: output-sized float image scaled by (x - 128) / 128.

TF-Slim's version crops or pads to the output size, which suits MNIST (already
28x28). This project's bundled 'digits' data set holds 8x8 grayscale images,
and cropping/padding them to 28x28 would leave a tiny digit in a black frame
that fills 92% of the input; so an image of another size is resized
bilinearly instead, and an image of the output size is left untouched. The
resize samples at pixel centres (TF 2 semantics), which keeps the digit
centred when upsampling. Pixel values are taken to be in [0, 255].
"""
import tensorflow as tf

import tf_compat  # noqa: F401
from preprocessing import channels
from preprocessing.registry import register_preprocessing


def _has_size(image, height, width):
  return image.shape[0] == height and image.shape[1] == width


def preprocess_image(image, output_height, output_width, is_training=False,
                     use_grayscale=False, bbox=None, add_image_summaries=True):
  """The same for training and evaluation (`is_training` is accepted, unused).

  Args:
    image: [height, width, channels] image, uint8 or float in [0, 255].
    output_height, output_width: size of the result.
    is_training: unused; LeNet was trained without augmentation.
    use_grayscale: converts an RGB image to one channel.
    bbox, add_image_summaries: unused (TF-Slim's LeNet preprocessing has
      neither); accepted so every family takes the same keywords.

  Returns:
    float32 [output_height, output_width, channels] image in [-1, 1).
  """
  del is_training, bbox, add_image_summaries
  image = channels.maybe_grayscale(tf.cast(image, tf.float32), use_grayscale)
  if not _has_size(image, output_height, output_width):
    image = tf.image.resize(image, [output_height, output_width],
                            method=tf.image.ResizeMethod.BILINEAR)
  return (image - 128.0) / 128.0


register_preprocessing('lenet', preprocess_image,
                       output_range=(-1.0, 127.0 / 128.0))  # (x - 128) / 128
