"""Inception-style preprocessing, as the published Inception/MobileNet/NASNet models saw it.

Training: a random crop covering 5-100% of the image (TF-Slim's distorted
bounding box), resized to the output size, randomly flipped and colour
distorted. Evaluation: the central 87.5% resized bilinearly. Both return
floats in [-1, 1]. Integer images are converted to [0, 1] first
(`tf.image.convert_image_dtype`); float images are taken to be in [0, 1].

`preprocess_image` takes TF-Slim's keyword arguments with their meaning:
`bbox` (boxes the training crop must partly cover), `fast_mode`,
`add_image_summaries`, `crop_image` (random crop for training, central crop
for evaluation), `use_grayscale`; and `central_fraction` (of the evaluation
crop). Training writes TF-Slim's image summaries: 'image_with_bounding_boxes',
'images_with_distorted_bounding_box', 'cropped_resized_image' and
'final_distorted_image' (in the 'distort_image' scope).

`distort_colors=False` leaves the colour distortion out of the training
preprocessing, for `distort_color_batch` to apply to the batch where the
network runs (an accelerator does it in a fraction of the CPU's time; the
scripts' --distort_colors_after_batching): per image the same draws from
the same ranges, in the same order (fast mode).

Resizing uses TensorFlow 1.x semantics (`tf.compat.v1.image`, no half-pixel
centres) because that is what the published checkpoints were trained and
evaluated with.
"""
import tensorflow as tf

import tf_compat  # noqa: F401
from preprocessing import channels
from preprocessing import encoded_image
from preprocessing.registry import register_preprocessing

tf1 = tf.compat.v1

# The four resize methods of TF 1.x, in the order of their enum values.
_RESIZE_METHODS = (tf1.image.ResizeMethod.BILINEAR,
                   tf1.image.ResizeMethod.NEAREST_NEIGHBOR,
                   tf1.image.ResizeMethod.BICUBIC,
                   tf1.image.ResizeMethod.AREA)

# Colour distortions per ordering; each ordering is a different composition.
_FAST_ORDERINGS = (('brightness', 'saturation'), ('saturation', 'brightness'))
_FULL_ORDERINGS = (('brightness', 'saturation', 'hue', 'contrast'),
                   ('saturation', 'brightness', 'contrast', 'hue'),
                   ('contrast', 'hue', 'brightness', 'saturation'),
                   ('hue', 'saturation', 'contrast', 'brightness'))
_DISTORTIONS = {
    'brightness': lambda x: tf.image.random_brightness(x, max_delta=32. / 255.),
    'saturation': lambda x: tf.image.random_saturation(x, lower=0.5, upper=1.5),
    'hue': lambda x: tf.image.random_hue(x, max_delta=0.2),
    'contrast': lambda x: tf.image.random_contrast(x, lower=0.5, upper=1.5),
}
# Saturation and hue are defined on RGB only.
_RGB_ONLY = ('saturation', 'hue')


def apply_with_random_selector(x, func, num_cases):
  """func(x, case) for a case drawn uniformly from range(num_cases) at run time.

  Only the selected branch runs, so the unselected distortions cost nothing.
  """
  if num_cases == 1:
    return func(x, 0)
  selector = tf1.random_uniform([], maxval=num_cases, dtype=tf.int32)
  return tf.switch_case(selector, [
      (lambda case=case: func(x, case)) for case in range(num_cases)])


def distort_color(image, color_ordering=0, fast_mode=True, scope=None):
  """Random brightness/saturation (and hue/contrast unless fast_mode) of a [0, 1] image.

  The distortions do not commute, so `color_ordering` (0-3) picks one of
  four compositions; fast mode has two (0, and any other value). Saturation
  and hue are skipped for images that are not 3-channel.
  """
  orderings = _FAST_ORDERINGS if fast_mode else _FULL_ORDERINGS
  if not 0 <= color_ordering <= 3:
    raise ValueError('color_ordering must be in [0, 3], got %r' % color_ordering)
  rgb = channels.num_channels(image) == 3
  with tf1.name_scope(scope, 'distort_color', [image]):
    for name in orderings[min(color_ordering, len(orderings) - 1)]:
      if rgb or name not in _RGB_ONLY:
        image = _DISTORTIONS[name](image)
    # The random_* adjustments may leave [0, 1].
    return tf.clip_by_value(image, 0.0, 1.0)


def distorted_bounding_box_crop(image, bbox, min_object_covered=0.1,
                                aspect_ratio_range=(0.75, 1.33),
                                area_range=(0.05, 1.0), max_attempts=100,
                                scope=None):
  """A random crop that covers part of one of `bbox` [1, num_boxes, 4].

  Boxes are [ymin, xmin, ymax, xmax] in [0, 1]. After `max_attempts`
  failures to satisfy the constraints the whole image is returned.

  Returns:
    (cropped image, the crop as a [1, 1, 4] box).
  """
  with tf1.name_scope(scope, 'distorted_bounding_box_crop', [image, bbox]):
    begin, size, crop_box = tf1.image.sample_distorted_bounding_box(
        tf.shape(image),
        bounding_boxes=bbox,
        min_object_covered=min_object_covered,
        aspect_ratio_range=aspect_ratio_range,
        area_range=area_range,
        max_attempts=max_attempts,
        use_image_if_no_bounding_boxes=True)
    cropped = tf.slice(image, begin, size)
    # The dynamic slice loses the static channel count.
    cropped.set_shape([None, None, image.shape[-1]])
    return cropped, crop_box


def _to_signed_unit_range(image):
  """[0, 1] -> [-1, 1]."""
  return tf.multiply(tf.subtract(image, 0.5), 2.0)


def preprocess_for_train(image, height, width, bbox=None, fast_mode=True,
                         scope=None, add_image_summaries=True, random_crop=True,
                         use_grayscale=False, distort_colors=True):
  """Randomly cropped, resized, flipped and colour-distorted image in [-1, 1].

  Args:
    image: [height, width, channels] image; integers are scaled to [0, 1],
      floats must already be in [0, 1].
    height, width: output size.
    bbox: [1, num_boxes, 4] float boxes [ymin, xmin, ymax, xmax] the crop
      must partly cover; None means the whole image.
    fast_mode: bilinear resize and brightness/saturation only; otherwise a
      random resize method and hue/contrast distortions too.
    scope: name scope.
    add_image_summaries: write TF-Slim's four image summaries.
    random_crop: False resizes the whole image instead of a random crop.
    use_grayscale: converts an RGB result to one channel.
    distort_colors: False leaves the colour distortion (and its clipping)
      to distort_color_batch; fast mode only.
  An EncodedJpeg `image` is decoded only where the crop falls.
  """
  if not distort_colors and (not fast_mode or use_grayscale):
    raise ValueError('distort_colors=False (colour distortion after '
                     'batching) needs fast_mode and colour images: the '
                     'batch distortion has brightness and saturation only, '
                     'and TF-Slim distorts before use_grayscale')
  with tf1.name_scope(scope, 'distort_image', [height, width, bbox]):
    if bbox is None:
      bbox = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, shape=[1, 1, 4])
    if encoded_image.is_encoded(image):
      return _train_from_jpeg(image, height, width, bbox, fast_mode,
                              add_image_summaries, random_crop, use_grayscale,
                              distort_colors)
    if image.dtype != tf.float32:
      image = tf.image.convert_image_dtype(image, dtype=tf.float32)
    if add_image_summaries:
      tf1.summary.image('image_with_bounding_boxes', tf1.image.draw_bounding_boxes(
          tf.expand_dims(image, 0), bbox))
    if random_crop:
      cropped, distorted_box = distorted_bounding_box_crop(image, bbox)
      if add_image_summaries:
        tf1.summary.image('images_with_distorted_bounding_box',
                          tf1.image.draw_bounding_boxes(
                              tf.expand_dims(image, 0), distorted_box))
      image = cropped
    return _resize_flip_distort(image, height, width, fast_mode,
                                add_image_summaries, use_grayscale,
                                distort_colors)


def _resize_flip_distort(image, height, width, fast_mode, add_image_summaries,
                         use_grayscale, distort_colors=True):
  """The training steps after the crop: float [0, 1] or uint8 -> [-1, 1]."""
  # The float conversion precedes the resize: the bilinear kernel is 2-3x
  # faster on floats than on uint8, and this is TF-Slim's arithmetic.
  if image.dtype != tf.float32:
    image = tf.image.convert_image_dtype(image, dtype=tf.float32)
  # The crop's aspect ratio is not kept; fast mode always resizes bilinearly.
  image = apply_with_random_selector(
      image,
      lambda x, method: tf1.image.resize_images(x, [height, width],
                                                _RESIZE_METHODS[method]),
      num_cases=1 if fast_mode else len(_RESIZE_METHODS))
  if add_image_summaries:
    tf1.summary.image('cropped_resized_image', tf.expand_dims(image, 0))
  image = tf.image.random_flip_left_right(image)
  if distort_colors:
    image = apply_with_random_selector(
        image, lambda x, ordering: distort_color(x, ordering, fast_mode),
        num_cases=1 if fast_mode else len(_FULL_ORDERINGS))
  if add_image_summaries:
    tf1.summary.image('final_distorted_image', tf.expand_dims(image, 0))
  image = channels.maybe_grayscale(image, use_grayscale)
  return _to_signed_unit_range(image)


def _train_from_jpeg(image, height, width, bbox, fast_mode, add_image_summaries,
                     random_crop, use_grayscale, distort_colors):
  """preprocess_for_train of an EncodedJpeg: the crop is drawn from the
  header's shape, exactly as from the decoded image's, and only the crop is
  decoded and converted to float; from there on TF-Slim's ops, so a given
  crop box gives the same floats as preprocess_for_train of the decoded
  image."""
  if add_image_summaries:
    # Only the summary pipeline evaluates these; the training pipeline
    # never fetches them, so the whole-image decode is pruned there.
    whole = tf.image.convert_image_dtype(image.decode(), dtype=tf.float32)
    tf1.summary.image('image_with_bounding_boxes', tf1.image.draw_bounding_boxes(
        tf.expand_dims(whole, 0), bbox))
  if random_crop:
    with tf1.name_scope(None, 'distorted_bounding_box_crop', [bbox]):
      begin, size, distorted_box = tf1.image.sample_distorted_bounding_box(
          image.shape(), bounding_boxes=bbox, min_object_covered=0.1,
          aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0),
          max_attempts=100, use_image_if_no_bounding_boxes=True)
      cropped = image.decode_window(begin[0], begin[1], size[0], size[1])
    if add_image_summaries:
      tf1.summary.image('images_with_distorted_bounding_box',
                        tf1.image.draw_bounding_boxes(
                            tf.expand_dims(whole, 0), distorted_box))
  else:
    cropped = image.decode()
  return _resize_flip_distort(cropped, height, width, fast_mode,
                              add_image_summaries, use_grayscale,
                              distort_colors)


def preprocess_for_eval(image, height, width, central_fraction=0.875,
                        scope=None, central_crop=True, use_grayscale=False):
  """Central `central_fraction` of the image, resized bilinearly, in [-1, 1].

  `height` and `width` None (or 0) keep the cropped size. An EncodedJpeg
  `image` is decoded only inside the central crop.
  """
  with tf1.name_scope(scope, 'eval_image', [height, width]):
    if encoded_image.is_encoded(image):
      # Only the central crop is decoded; from there on the same ops as
      # below, so the result is bit-identical.
      if central_crop and central_fraction:
        image = image.decode_window(*central_window(image.shape(),
                                                    central_fraction))
      else:
        image = image.decode()
      central_crop = False
    if image.dtype != tf.float32:
      image = tf.image.convert_image_dtype(image, dtype=tf.float32)
    image = channels.maybe_grayscale(image, use_grayscale)
    if central_crop and central_fraction:
      image = tf.image.central_crop(image, central_fraction=central_fraction)
    if height and width:
      image = tf1.image.resize_bilinear(image[tf.newaxis], [height, width],
                                        align_corners=False)[0]
    return _to_signed_unit_range(image)


def distort_color_batch(images, scope=None):
  """distort_color in fast mode (brightness, then saturation for RGB, then
  the clip) on a batch of images in [-1, 1] that preprocess_image made with
  distort_colors=False: each image its own draws, from TF-Slim's ranges.
  Elementwise ops on the whole batch, for the device the network runs on.
  """
  with tf1.name_scope(scope, 'distort_color_batch', [images]):
    images = tf.convert_to_tensor(images)
    count = tf.shape(images)[0]
    per_image = lambda low, high: tf1.random_uniform(  # noqa: E731
        tf.stack([count, 1, 1, 1]), low, high, dtype=images.dtype)
    images = images * 0.5 + 0.5
    images = images + per_image(-32. / 255., 32. / 255.)
    if channels.num_channels(images) == 3:
      images = adjust_saturation_per_image(images, per_image(0.5, 1.5))
    return _to_signed_unit_range(tf.clip_by_value(images, 0.0, 1.0))


def adjust_saturation_per_image(images, factors):
  """tf.image.adjust_saturation of each RGB image of a batch by its own
  factor ([batch, 1, 1, 1]), in elementwise ops (the kernel takes one factor).

  Scaling the saturation keeps each pixel's value (its largest channel) and
  hue, so every channel moves away from the value by one factor: c' = v -
  k (v - c), with k = min(factor, v / (v - min)) so the saturation stays at
  most 1, and 0 where v <= 0 (the kernel's saturation of such a pixel is 0).
  Equal to the kernel's HSV round trip up to float rounding.
  """
  value = tf.reduce_max(images, axis=-1, keepdims=True)
  spread = value - tf.reduce_min(images, axis=-1, keepdims=True)
  k = tf.maximum(tf.minimum(factors, value / tf.maximum(spread, 1e-30)), 0.0)
  return value - k * (value - images)


def central_window(shape, central_fraction):
  """(top, left, height, width) of tf.image.central_crop's crop of an image
  of int32 `shape`, in its float64 arithmetic."""
  size = tf.cast(shape[:2], tf.float64)
  start = tf.cast((size - size * tf.constant(central_fraction, tf.float64)) / 2,
                  tf.int32)
  extent = shape[:2] - start * 2
  return start[0], start[1], extent[0], extent[1]


@encoded_image.takes_encoded_images
def preprocess_image(image, output_height, output_width, is_training=False,
                     bbox=None, fast_mode=True, add_image_summaries=True,
                     crop_image=True, use_grayscale=False,
                     central_fraction=0.875, distort_colors=True):
  """Training or evaluation preprocessing of one image; see the two functions.

  TF-Slim's keywords: `crop_image` is the training's random crop and the
  evaluation's central crop; `bbox`, `fast_mode` and `add_image_summaries`
  apply to training, `central_fraction` to evaluation. `distort_colors`
  (training; not TF-Slim's): False leaves the colours to
  distort_color_batch.
  """
  if is_training:
    return preprocess_for_train(image, output_height, output_width, bbox,
                                fast_mode, add_image_summaries=add_image_summaries,
                                random_crop=crop_image, use_grayscale=use_grayscale,
                                distort_colors=distort_colors)
  return preprocess_for_eval(image, output_height, output_width,
                             central_fraction=central_fraction,
                             central_crop=crop_image, use_grayscale=use_grayscale)


register_preprocessing('inception', preprocess_image,
                       output_range=(-1.0, 1.0))  # [0, 1] -> [-1, 1]
