"""Classifies image files: the top-5 labels of each, with probabilities.

    python classify_image.py --saved_model=exports/lenet_digits/saved_model samples/digits
    python classify_image.py --tflite_model=exports/lenet_digits/int8 a.png b.jpg
    python classify_image.py --checkpoint_path=runs/lenet_digits --model_name=lenet \
        --dataset_name=digits --dataset_dir=data/digits a.png

Arguments are image files (JPEG, PNG, GIF, BMP; other formats PIL reads are
converted) or folders of them. A SavedModel classifies through its
`serving_default` signature (image bytes in); a TFLite model or a checkpoint
gets the images decoded and preprocessed as that signature does. Prints,
for each image, its path and then `probability  label` lines, best first.
"""
import os
import sys

from absl import app
from absl import flags

import quiet_tensorflow  # (first: TensorFlow's noise off the terminal)
import tf_compat  # noqa: F401
import zoo_errors
import tensorflow as tf

from classification import classifier
from datasets import dataset_utils
from serving import exporter
from serving import inference
import script_flags

F = flags.FLAGS

flags.DEFINE_string('checkpoint_path', None,
                    'Checkpoint file or train_dir (the network as its '
                    'training recorded it, or --model_name).')
flags.DEFINE_string('saved_model', None, 'SavedModel export directory.')
flags.DEFINE_string('tflite_model', None,
                    'TFLite model file or export directory.')
flags.DEFINE_string(
    'tflite_kernels', inference.DEFAULT_TFLITE_KERNELS,
    'What runs --tflite_model: builtin (TFLite\'s built-in kernels, no '
    'delegate), xnnpack (the XNNPACK delegate) or micro (TensorFlow Lite '
    'Micro\'s interpreter).')
script_flags.define_network_flags(num_classes=True)
flags.DEFINE_integer('top_k', exporter.TOP_K, 'Labels printed per image.')
flags.DEFINE_integer('batch_size', 32, 'Images classified at once.')


def image_paths(arguments):
  """The image files named or held (directly) by the folders named."""
  if not arguments:
    raise ValueError('name at least one image file or folder')
  paths = []
  for argument in arguments:
    path = dataset_utils.expand_path(argument)
    if os.path.isdir(path):
      found = sorted(os.path.join(path, name) for name in os.listdir(path)
                     if name.lower().endswith(dataset_utils.IMAGE_EXTENSIONS))
      if not found:
        raise ValueError("folder '%s' holds no image files (%s)" % (
            argument, ' '.join(dataset_utils.IMAGE_EXTENSIONS)))
      paths.extend(found)
    elif not os.path.exists(path):
      raise ValueError("image '%s' does not exist" % argument)
    else:
      paths.append(path)
  return paths


def read_images(paths):
  """Encoded bytes of each image; raises ValueError naming one that cannot
  be read or is not an image."""
  encoded = []
  for path in paths:
    try:
      encoded.append(dataset_utils.read_image_file(path)[0])
    except OSError as e:
      raise ValueError("cannot read image '%s': %s" % (
          path, e.strerror or e)) from None
    except dataset_utils.ConversionError:
      raise ValueError("'%s' is not an image (PIL cannot decode it)" %
                       path) from None
  return encoded


def spec_from_flags():
  checkpoint = dataset_utils.expand_path(F.checkpoint_path)
  script_flags.apply_training_record(checkpoint)
  if not F.model_name:
    raise ValueError('--model_name is required with --checkpoint_path (its '
                     'directory has no training record)')
  return exporter.make_spec(**script_flags.network_args(checkpoint))


def main(argv):
  tf.compat.v1.disable_eager_execution()  # a TF 1 program: graph mode
  try:
    script_flags.check_flags(at_least_one=['top_k', 'batch_size'])
    inference.check_tflite_kernels(F.tflite_kernels)
    if F['tflite_kernels'].present and not F.tflite_model:
      raise ValueError('--tflite_kernels applies to --tflite_model only')
    paths = image_paths(argv[1:])
    encoded = read_images(paths)
    model = quiet_tensorflow.quiet_native(  # TFLite's XNNPACK line
        inference.open_model,
        checkpoint_path=dataset_utils.expand_path(F.checkpoint_path),
        saved_model=dataset_utils.expand_path(F.saved_model),
        tflite_model=dataset_utils.expand_path(F.tflite_model),
        spec_from_flags=spec_from_flags, tflite_kernels=F.tflite_kernels)
    try:
      logits = [model.logits_of_encoded(encoded[i:i + F.batch_size])
                for i in range(0, len(encoded), F.batch_size)]
    finally:
      model.close()
  except (ValueError, tf.errors.OpError) as e:
    print('classify_image: error: %s' % zoo_errors.one_line(e),
          file=sys.stderr)
    return 1
  names = model.spec.label_names
  rows = [row for batch in logits for row in inference.top_k(batch, F.top_k)]
  for path, best in zip(paths, rows):
    print(path)
    for label, probability in best:
      print('  %.4f  %s' % (probability, names[label] if names else label))
  return 0


if __name__ == '__main__':
  script_flags.use_grouped_help()
  app.run(lambda argv: sys.exit(main(argv)))
