r"""Writes a network's inference GraphDef (TF-Slim's flags); frozen with
--checkpoint_path.

    python export_inference_graph.py --model_name=inception_v3 \
        --output_file=/tmp/inception_v3_inf_graph.pb
    python export_inference_graph.py --model_name=lenet --dataset_name=digits \
        --dataset_dir=data/digits --checkpoint_path=runs/lenet_digits \
        --output_file=exports/lenet_digits/frozen_graph.pb

As TF-Slim's (whose flags it takes): the network on a float placeholder
named `input` of [--batch_size, --image_size, --image_size, channels]
(channels 1 with --use_grayscale or a grayscale dataset such as digits or
mnist, else 3), of clips [--batch_size, --num_frames, ...] for a video
network (i3d, s3dg: --num_frames defaults to the network's, and TF-Slim's
--is_video_model may be given); its classes come from --dataset_name (minus
--labels_offset) or --num_classes; --dataset_dir is read only for label
names, so a published checkpoint exports without its dataset.
Two nodes are added, `logits` and `probabilities` (the softmax), so the
outputs have names whatever the network. With --checkpoint_path the
variables are folded into constants (the moving averages when trained with
them): a frozen graph in one step, no freeze_graph needed. The file is
written under a temporary name and renamed; an existing one is replaced only
with --overwrite.
"""
import sys

from absl import app
from absl import flags

import quiet_tensorflow  # noqa: F401  (first: TensorFlow's noise off the terminal)
import tf_compat  # noqa: F401
import zoo_errors
import tensorflow as tf

from classification import classifier
from classification import fine_tuning
from classification import precise_bn
from classification import training_record
from datasets import dataset_utils
from nets import nets_factory
from serving import exporter
import script_flags

F = flags.FLAGS

script_flags.define_network_flags('inception_v3', 'imagenet',
                                  num_classes=True, preprocessing=False)
flags.DEFINE_boolean('is_training', False,
                     'Whether to build the training graph (dropout, batch '
                     'statistics).')
flags.DEFINE_integer('batch_size', None,
                     'Batch size of the input; unset leaves it unknown.')
flags.DEFINE_string('output_file', '', 'Where to save the GraphDef.')
flags.DEFINE_bool('write_text_graphdef', False,
                  'Write the GraphDef as text (pbtxt) instead of binary.')
flags.DEFINE_string('checkpoint_path', None,
                    'Checkpoint (file or train_dir) to freeze into the graph.')
flags.DEFINE_bool('overwrite', False, 'Replace an existing --output_file.')
flags.DEFINE_bool('quantize', False,
                  'whether to use quantized graph or not (TF-Slim\'s flag: '
                  'the eval graph of quantization-aware training, '
                  'quantization/; unset, taken from the training record).')
flags.DEFINE_bool('is_video_model', False,
                  'TF-Slim\'s flag for a video network (i3d, s3dg), whose '
                  'input is clips; implied by --model_name.')
flags.DEFINE_integer('num_frames', None,
                     'Frames per clip of a video network; defaults to the '
                     'network\'s.')


def clip_frames():
  """Frames per clip of --model_name's input: None for an image network
  (refusing TF-Slim's video flags), --num_frames or the network's for a
  video one."""
  script_flags.check_flags(at_least_one=['num_frames'])
  frames = nets_factory.get_info(F.model_name).num_frames
  if frames:
    return F.num_frames or frames
  if F.is_video_model or F.num_frames:
    raise ValueError(
        "--%s: model_name '%s' takes images, not clips (the video networks: "
        '%s)' % ('is_video_model' if F.is_video_model else 'num_frames',
                 F.model_name, ', '.join(
                     n for n in nets_factory.list_models()
                     if nets_factory.get_info(n).num_frames)))
  return None


def main(_):
  tf.compat.v1.disable_eager_execution()  # a TF 1 program: graph mode
  try:
    if not F.output_file:
      raise ValueError('You must supply the path to save to with '
                       '--output_file')
    script_flags.check_flags(at_least_one=['batch_size'])
    checkpoint = None
    if F.checkpoint_path:
      checkpoint = fine_tuning.resolve_checkpoint(
          dataset_utils.expand_path(F.checkpoint_path))
      script_flags.apply_training_record(checkpoint)
    args = script_flags.network_args(checkpoint)
    if F.num_classes and not F['dataset_name'].present:
      args['dataset_name'] = None  # --num_classes instead of the default
    num_frames = clip_frames()
    spec = exporter.make_spec(clips=bool(num_frames), **args)
    written = exporter.export_inference_graph(
        spec, dataset_utils.expand_path(F.output_file),
        batch_size=F.batch_size, is_training=F.is_training,
        checkpoint=checkpoint, as_text=F.write_text_graphdef,
        overwrite=F.overwrite, num_frames=num_frames, quantize=F.quantize)
  except (ValueError, tf.errors.OpError) as e:
    print('export_inference_graph: error: %s' % zoo_errors.one_line(e),
          file=sys.stderr)
    return 1
  if checkpoint:
    record = training_record.read(checkpoint)[0] or {}
    unsettled = precise_bn.unsettled_line(
        checkpoint, record, record.get('moving_average_decay')
        if written['moving_averages'] else None)
    if unsettled:
      print('export_inference_graph: warning: %s' % unsettled,
            file=sys.stderr)
  print('Wrote %s graph of %s to %s: input %s %s float32, outputs %s%s' % (
      'the frozen' if written['frozen'] else 'the', F.model_name,
      F.output_file, written['input'],
      ['?' if d is None else d for d in written['shape']],
      ', '.join(written['outputs']),
      ' (moving averages of %s)' % checkpoint if written['moving_averages']
      else ' (weights of %s)' % checkpoint if checkpoint else ''))
  return 0


if __name__ == '__main__':
  script_flags.use_grouped_help()
  app.run(lambda argv: sys.exit(main(argv)))
