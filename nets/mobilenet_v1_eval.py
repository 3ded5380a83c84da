"""TF-Slim's nets/mobilenet_v1_eval.py on TensorFlow 2.21: evaluates a
MobileNet v1 checkpoint on ImageNet's validation split, quantized with
--quantize (the eval graph of quantization-aware training).

    python nets/mobilenet_v1_eval.py --dataset_dir=data/imagenet \\
        --checkpoint_dir=runs/mobilenet_quant --quantize

TF-Slim's flags and defaults (--batch_size=250, --num_classes=1001,
--num_examples=50000, --image_size=224, --depth_multiplier=1.0,
--checkpoint_dir, --eval_dir, --quantize, --master). A thin script: it runs
eval_image_classifier.py with the flags this translates to, so every flag
of that script works here too (e.g. --dataset_name=digits).
"""
import math
import os
import sys

# Run as `python nets/mobilenet_v1_eval.py`: the checkout, not nets/, is
# where the modules are found (nets/ holds names such as inception.py).
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(
    os.path.abspath(__file__)):
  sys.path[0] = _ROOT

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from datasets import dataset_factory  # noqa: E402
from nets import mobilenet_v1  # noqa: E402
import eval_image_classifier  # noqa: E402  (its flags, then ours)
import script_flags  # noqa: E402

F = flags.FLAGS

flags.DEFINE_integer('num_examples', 50000, 'Number of examples to evaluate')
flags.DEFINE_integer('image_size', 224, 'Input image resolution')
flags.DEFINE_float('depth_multiplier', 1.0, 'Depth multiplier for mobilenet')
flags.DEFINE_string('checkpoint_dir', '', 'The directory for checkpoints')
flags.DEFINE_string('master', '', 'Session master')
if 'num_classes' not in F:
  flags.DEFINE_integer('num_classes', 1001, 'Number of classes to distinguish')
F.set_default('num_classes', 1001)
F.set_default('batch_size', 250)
F.set_default('dataset_split_name', 'validation')


def translated_flags():
  """eval_image_classifier.py's flags for this script's: only those the
  command line does not set itself. TF-Slim evaluates
  ceil(num_examples / batch_size) batches."""
  values = {
      'model_name': mobilenet_v1.name_for_depth_multiplier(
          F.depth_multiplier),
      'checkpoint_path': F.checkpoint_dir or None,
      'eval_image_size': F.image_size,
      'max_num_batches': int(math.ceil(F.num_examples / float(F.batch_size))),
  }
  return ['--%s=%s' % (name, value) for name, value in values.items()
          if value is not None and not F[name].present]


def main(argv):
  try:
    if not F.checkpoint_dir and not F['checkpoint_path'].present:
      raise ValueError('--checkpoint_dir is required: the directory of the '
                       'checkpoints')
    if F.master:
      raise ValueError('--master=%s: evaluation runs in this process here; '
                       'drop --master' % F.master)
    if F.dataset_dir:
      dataset = dataset_factory.get_dataset(
          F.dataset_name, F.dataset_split_name, F.dataset_dir)
      classes = dataset.num_classes - (F.labels_offset or 0)
      if F.num_classes != classes:
        raise ValueError('--num_classes=%d, but dataset %s has %d classes; '
                         'pass --num_classes=%d' % (
                             F.num_classes, F.dataset_name, classes, classes))
    F([argv[0]] + translated_flags())
  except (ValueError, IOError) as e:
    print('mobilenet_v1_eval: error: %s' % e, file=sys.stderr)
    return 1
  return eval_image_classifier.main(argv)


if __name__ == '__main__':
  script_flags.use_grouped_help()
  app.run(lambda argv: sys.exit(main(argv)))
