"""What every preprocessing family needs to know about channels: how many an
image has, and TF-Slim's `use_grayscale` (an RGB image becomes one channel;
a one-channel image stays as it is)."""
import tensorflow as tf

import tf_compat  # noqa: F401


def num_channels(image):
  """The static channel count; a clear error when decoding left it unknown."""
  channels = image.shape[-1]
  if channels is None:
    raise ValueError('the channel count of %s must be known; decode images '
                     'with an explicit number of channels' % image)
  return int(channels)


def maybe_grayscale(image, use_grayscale):
  if use_grayscale and num_channels(image) == 3:
    return tf.image.rgb_to_grayscale(image)
  return image
