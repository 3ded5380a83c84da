"""Exports a trained network as a SavedModel or a TFLite model.

    python export_model.py --checkpoint_path=runs/lenet_digits --model_name=lenet \
        --dataset_name=digits --dataset_dir=data/digits \
        --export_dir=exports/lenet_digits/saved_model --format=saved_model
    python export_model.py ... --export_dir=exports/lenet_digits/int8 \
        --format=tflite --quantize=int8

SavedModel: signatures `serving_default` (input `image_bytes`: encoded
JPEG/PNG images, decoded and preprocessed in the graph) and `images` (input
`images`: preprocessed float images); outputs logits, probabilities, classes,
top_5_classes, top_5_probabilities and top_5_labels (names from labels.txt).
For TF Serving, export to <model base path>/<version>.

TFLite: export_dir/model.tflite takes one preprocessed image; --quantize
dynamic stores int8 weights, int8 runs integers throughout (int8 input and
output) calibrated on --num_calibration_images images of
--calibration_split, and is also written as model_data.cc and model_data.h
for TensorFlow Lite Micro, with the tensor arena its interpreter needs
(docs/deploying.md); the int8 model leaves out what TFLM never reads (inner
tensor names, metadata: the person detector's 307,736 bytes become 294,728,
measured by benchmarks/micro_model_bytes.py).

A quantization-aware checkpoint (trained with --quantize_delay; TF-Slim's
_quant ones) is not calibrated: --quantize=int8 converts the eval rewrite
with the ranges it learned (weights' made symmetric for TFLite's int8
kernels; the input's from the preprocessing, e.g. [-1, 1] for
inception/mobilenet, else from calibration images), no image read:

    python export_model.py --checkpoint_path=runs/lenet_qat \
        --export_dir=exports/lenet_qat/int8 --format=tflite --quantize=int8

Its int8 logits agree with the fake-quant eval graph's within 2-3 units
(0.5 on average) and the same class for 358 of 360 digits
(tests/test_qat_export.py; docs/deploying.md, "int8 from the learned
ranges"). Beside either: export.json (what the export is) and
labels.txt. Checkpoints trained with --moving_average_decay are exported
with their moving averages. An existing --export_dir is replaced only with
--overwrite.
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
from classification import fine_tuning
from classification import precise_bn
from classification import training_record
from datasets import dataset_factory
from serving import exporter
from serving import learned_ranges
from serving import micro
import script_flags

tf1 = tf.compat.v1
F = flags.FLAGS

flags.DEFINE_string('checkpoint_path', None,
                    'Checkpoint file, or a train_dir (its latest checkpoint).')
script_flags.define_network_flags(num_classes=True)
flags.DEFINE_string('export_dir', None, 'Directory to write.')
flags.DEFINE_enum('format', 'saved_model', exporter.FORMATS, 'What to write.')
flags.DEFINE_enum('quantize', 'none', exporter.QUANTIZE,
                  'TFLite only: none (float32), dynamic (int8 weights) or '
                  'int8 (integers only: the ranges a quantization-aware '
                  'checkpoint learned, else calibrated on the dataset).')
flags.DEFINE_integer('num_calibration_images', 300,
                     'Images calibrating --quantize=int8 (of a checkpoint '
                     'trained without --quantize_delay).')
flags.DEFINE_string('calibration_split', 'train',
                    'Split the calibration images come from.')
flags.DEFINE_bool('overwrite', False, 'Replace an existing --export_dir.')


def calibration_images(spec):
  """--num_calibration_images preprocessed images of --calibration_split."""
  dataset = dataset_factory.get_dataset(F.dataset_name, F.calibration_split,
                                        F.dataset_dir)
  input_fn = classifier.make_input_fn(
      dataset, spec.model_name, 1, is_training=False,
      preprocessing_name=spec.preprocessing_name, image_size=spec.image_size,
      use_grayscale=spec.use_grayscale, num_epochs=1, deterministic=True)
  with tf.Graph().as_default():
    images, _ = tf1.data.make_one_shot_iterator(
        input_fn().take(F.num_calibration_images)).get_next()
    with tf1.Session() as session:
      while True:
        try:
          yield session.run(images)[0]
        except tf.errors.OutOfRangeError:
          return


def check_flags():
  """Checks the flags; returns (checkpoint, whether --quantize=int8 takes
  the checkpoint's learned ranges)."""
  script_flags.check_flags(required=['checkpoint_path', 'export_dir'])
  script_flags.expand_paths('checkpoint_path', 'dataset_dir', 'export_dir')
  script_flags.apply_training_record(F.checkpoint_path)
  script_flags.check_flags(required=['model_name'])
  if F.format != 'tflite' and F.quantize != 'none':
    raise ValueError('--quantize=%s applies to --format=tflite only' %
                     F.quantize)
  checkpoint = fine_tuning.resolve_checkpoint(F.checkpoint_path)
  learned = (F.quantize == 'int8' and
             learned_ranges.quantization_aware(checkpoint))
  if F.quantize == 'int8' and not learned:
    if not (F.dataset_name and F.dataset_dir):
      raise ValueError('--quantize=int8 calibrates on the dataset (the '
                       'checkpoint was trained without --quantize_delay): '
                       'pass --dataset_name and --dataset_dir')
    script_flags.check_flags(at_least_one=['num_calibration_images'])
  exporter.check_destination(F.export_dir, F.overwrite)
  return checkpoint, learned


def input_range(spec):
  """(range, what gave it) of the int8 input of a quantization-aware
  export: the preprocessing's declared range, else the range of the
  calibration images (a preprocessing such as cifarnet's per-image
  standardization has no fixed one)."""
  declared = learned_ranges.preprocessing_range(spec.preprocessing_name)
  if declared is not None:
    return declared, "preprocessing '%s'" % spec.preprocessing_name
  if not (F.dataset_name and F.dataset_dir):
    raise ValueError(
        "--quantize=int8: preprocessing '%s' has no fixed output range for "
        'the int8 input (cifarnet: per-image standardization): pass '
        '--dataset_name and --dataset_dir to take it from '
        '--num_calibration_images images of --calibration_split' %
        spec.preprocessing_name)
  script_flags.check_flags(at_least_one=['num_calibration_images'])
  dataset_factory.get_dataset(F.dataset_name, F.calibration_split,
                              F.dataset_dir).check_files()
  found = learned_ranges.range_of_images(calibration_images(spec))
  return found, ("%d images of %s/%s (preprocessing '%s' has no fixed "
                 'range)' % (F.num_calibration_images, F.dataset_name,
                             F.calibration_split, spec.preprocessing_name))


def main(_):
  tf.compat.v1.disable_eager_execution()  # a TF 1 program: graph mode
  try:
    checkpoint, learned = check_flags()
    spec = exporter.make_spec(**script_flags.network_args(checkpoint))
    ranges = (None, None)
    if learned:  # before the long part
      ranges = input_range(spec)
    elif F.quantize == 'int8':  # the split is checked before the long part
      dataset_factory.get_dataset(F.dataset_name, F.calibration_split,
                                  F.dataset_dir).check_files()
    graph = exporter.RestoredGraph(spec, checkpoint, quantize=learned)
    try:
      if F.format == 'saved_model':
        exporter.write_saved_model(graph, F.export_dir, F.overwrite)
        written = F.export_dir
        what = 'SavedModel (signatures %s: %s, %s: %s)' % (
            exporter.BYTES_SIGNATURE, exporter.BYTES_INPUT,
            exporter.IMAGES_SIGNATURE, exporter.IMAGES_INPUT)
      else:
        images = (calibration_images(spec)
                  if F.quantize == 'int8' and not learned else None)
        written = quiet_tensorflow.quiet_native(
            exporter.write_tflite, graph, F.export_dir, F.quantize,
            images, F.overwrite, *ranges)
        what = 'TFLite %s model (%.2f MB%s)' % (
            'float32' if F.quantize == 'none' else F.quantize,
            os.path.getsize(written) / 1e6,
            '; the ranges quantization-aware training learned, input '
            '[%.6g, %.6g] from %s' % (ranges[0] + (ranges[1],))
            if learned else '')
    finally:
      graph.close()
  except (ValueError, tf.errors.OpError) as e:
    print('export_model: error: %s' % zoo_errors.one_line(e), file=sys.stderr)
    return 1
  record = training_record.read(checkpoint)[0] or {}
  unsettled = precise_bn.unsettled_line(
      checkpoint, record, record.get('moving_average_decay')
      if graph.moving_averages else None)
  if unsettled:
    print('export_model: warning: %s' % unsettled, file=sys.stderr)
  print('Exported %s (step %s%s) as a %s to %s' % (
      checkpoint, graph.global_step,
      ', moving averages' if graph.moving_averages else '', what, written))
  if F.quantize == 'int8':
    print(micro.summary(F.export_dir,
                        exporter.read_info(F.export_dir)['micro']))
  return 0


if __name__ == '__main__':
  script_flags.use_grouped_help()
  app.run(lambda argv: sys.exit(main(argv)))
