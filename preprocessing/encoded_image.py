"""A JPEG not yet decoded: preprocessing decodes only the part it keeps.

TF-Slim's preprocessing gets a decoded image and then crops it: for a
random 5-100% crop or the central 87.5%, much of the decoding (inverse DCT,
upsampling, colour conversion) is for pixels that are thrown away. The
reader (datasets/reader.py) hands a preprocessing function that declares
`takes_encoded_images` an `EncodedJpeg` for JPEG records; the function reads
the size from the header (`tf.io.extract_jpeg_shape`), chooses its crop
window there, and decodes only that window (`tf.image.decode_and_crop_jpeg`,
with a margin of columns that makes its pixels those of decoding
everything and cropping). Records in
other formats (PNG, raw) reach the same function as a decoded uint8 tensor,
as before.

Decoding follows `tf.io.decode_image`'s defaults (fancy upsampling, the
integer DCT), so a window is bit-identical to the same window of the image
the dataset's decoder returns.
"""
import tensorflow as tf

import tf_compat  # noqa: F401


# Columns decoded beyond a window on each side (decode_window): one is
# enough for 2x horizontal chroma subsampling; 16 is one 4:2:0 block.
_MARGIN = 16


class EncodedJpeg(object):
  """The bytes of one JPEG and the channel count to decode it to."""

  def __init__(self, contents, channels):
    self.contents = contents
    self.channels = int(channels)

  @property
  def dtype(self):
    return tf.uint8  # of the decoded pixels

  def shape(self):
    """int32 [height, width, channels] of the decoded image, from the header."""
    shape = tf.io.extract_jpeg_shape(self.contents)
    return tf.concat([shape[:2], [self.channels]], 0)

  def decode(self):
    """The whole image, uint8 [height, width, channels]."""
    image = tf.io.decode_jpeg(self.contents, channels=self.channels)
    image.set_shape([None, None, self.channels])
    return image

  def decode_window(self, offset_height, offset_width, height, width):
    """uint8 [height, width, channels]: the window of the decoded image at
    (offset_height, offset_width), decoding little more than the window.

    libjpeg upsamples the chroma of a cropped region's first and last
    columns as if they were the image's edges, so those pixels can differ
    from the whole image's; decoding _MARGIN more columns on each side and
    cutting them off gives exactly the whole image's pixels. (Rows need no
    margin: skipped rows keep their upsampling context.)
    """
    offset_height, offset_width, height, width = [
        tf.cast(x, tf.int32)
        for x in (offset_height, offset_width, height, width)]
    image_width = tf.io.extract_jpeg_shape(self.contents)[1]
    left = tf.maximum(offset_width - _MARGIN, 0)
    right = tf.minimum(offset_width + width + _MARGIN, image_width)
    wider = tf.image.decode_and_crop_jpeg(
        self.contents, tf.stack([offset_height, left, height, right - left]),
        channels=self.channels)
    start = offset_width - left
    image = wider[:, start:start + width]
    image.set_shape([None, None, self.channels])
    return image


def is_encoded(image):
  return isinstance(image, EncodedJpeg)


def takes_encoded_images(fn):
  """Marks `fn(image, ...)` as accepting an EncodedJpeg for `image`: its
  attribute `takes_encoded_images` is the class, which the reader (a
  datasets module: it imports no preprocessing) instantiates."""
  fn.takes_encoded_images = EncodedJpeg
  return fn


def accepts_encoded(fn):
  """The class of encoded image `fn` takes, or None."""
  return getattr(fn, 'takes_encoded_images', None)


def random_crop_offset(height, width, output_height, output_width):
  """tf.image.random_crop's (top, left) offset of an output-sized crop of an
  image of `height` x `width`: the same random op and arithmetic, so the
  same distribution (and, given the op's seeds, the same offsets), drawn
  without the image."""
  shape = tf.stack([height, width, 1])
  size = tf.constant([output_height, output_width, 1], tf.int32)
  check = tf.debugging.Assert(tf.reduce_all(shape >= size),
                              ['Need value.shape >= size, got ', shape, size],
                              summarize=1000)
  with tf.control_dependencies([check]):
    limit = shape - size + 1
  offset = tf.compat.v1.random_uniform([3], dtype=tf.int32,
                                       maxval=tf.int32.max) % limit
  return offset[0], offset[1]
