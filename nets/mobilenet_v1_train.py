"""TF-Slim's nets/mobilenet_v1_train.py on TensorFlow 2.21: trains MobileNet
v1 on ImageNet, with quantization-aware training under --quantize.

    python nets/mobilenet_v1_train.py --dataset_dir=data/imagenet \\
        --checkpoint_dir=runs/mobilenet_quant --quantize \\
        --fine_tune_checkpoint=checkpoints/mobilenet_v1_1.0_224.ckpt

TF-Slim's flags and defaults (--batch_size=64, --num_classes=1001,
--image_size=224, --depth_multiplier=1.0, --log_every_n_steps=100,
--save_summaries_secs=100, --save_interval_secs=100, --master, --task,
--ps_tasks) and its recipe: plain SGD at 0.045 (1e-4 when fine-tuning),
decayed by 0.94 every 2.5 epochs; --quantize starts fake quantization at
step 250000 from scratch and at once when fine-tuning (the float checkpoint
has no ranges: they start fresh). A thin script: it runs
train_image_classifier.py with the flags this translates to, so every flag
of that script works here too (e.g. --dataset_name=digits to try it).
"""
import os
import sys

# Run as `python nets/mobilenet_v1_train.py`: the checkout, not nets/, is
# where the modules are found (nets/ holds names such as inception.py).
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(
    os.path.abspath(__file__)):
  sys.path[0] = _ROOT

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from datasets import dataset_factory  # noqa: E402
from nets import mobilenet_v1  # noqa: E402
import script_flags  # noqa: E402
import train_image_classifier  # noqa: E402  (its flags, then ours)

F = flags.FLAGS

flags.DEFINE_integer('num_classes', 1001, 'Number of classes to distinguish')
flags.DEFINE_integer('number_of_steps', None,
                     'Number of training steps to perform before stopping')
flags.DEFINE_integer('image_size', 224, 'Input image resolution')
flags.DEFINE_float('depth_multiplier', 1.0, 'Depth multiplier for mobilenet')
flags.DEFINE_bool('quantize', False, 'Quantize training')
flags.DEFINE_string('fine_tune_checkpoint', '',
                    'Checkpoint from which to start finetuning.')
flags.DEFINE_string('checkpoint_dir', '',
                    'Directory for writing training checkpoints and logs')
flags.DEFINE_integer('ps_tasks', 0, 'Number of ps')
for _name, _value in (('batch_size', 64), ('log_every_n_steps', 100),
                      ('save_summaries_secs', 100), ('save_interval_secs', 100)):
  F.set_default(_name, _value)

# TF-Slim's recipe (its get_learning_rate and get_quant_delay).
LEARNING_RATE, FINE_TUNE_LEARNING_RATE = 0.045, 1e-4
QUANT_DELAY = 250000  # from scratch; fine-tuning quantizes from step 0
LEARNING_RATE_DECAY_FACTOR, NUM_EPOCHS_PER_DECAY = 0.94, 2.5


def check_num_classes(num_classes, split):
  """--num_classes against the dataset's classes (less --labels_offset)."""
  dataset = dataset_factory.get_dataset(F.dataset_name, split, F.dataset_dir)
  classes = dataset.num_classes - F.labels_offset
  if num_classes != classes:
    raise ValueError('--num_classes=%d, but dataset %s has %d classes; pass '
                     '--num_classes=%d' % (num_classes, F.dataset_name,
                                           classes, classes))


def unless_given(values):
  """['--name=value', ...] of `values` whose flag the command line does not
  set (None: left unset)."""
  return ['--%s=%s' % (name, value) for name, value in values.items()
          if value is not None and not F[name].present]


def quant_delay():
  """--quantize_delay as TF-Slim's script computes it (-1: float)."""
  if not F.quantize:
    return -1
  return 0 if F.fine_tune_checkpoint else QUANT_DELAY


def translated_flags():
  """train_image_classifier.py's flags for this script's: only those the
  command line does not set itself."""
  fine_tuning = bool(F.fine_tune_checkpoint)
  return unless_given({
      'model_name': mobilenet_v1.name_for_depth_multiplier(
          F.depth_multiplier),
      'train_dir': F.checkpoint_dir,
      'max_number_of_steps': F.number_of_steps,
      'train_image_size': F.image_size,
      'num_ps_tasks': F.ps_tasks,
      'quantize_delay': quant_delay(),
      'checkpoint_path': F.fine_tune_checkpoint or None,
      # TF-Slim's --ignore_missing_vars for the ranges is not needed: only
      # model variables are restored, the ranges start fresh (one line).
      'optimizer': 'sgd',
      'learning_rate': (FINE_TUNE_LEARNING_RATE if fine_tuning
                        else LEARNING_RATE),
      'learning_rate_decay_type': 'exponential',
      'learning_rate_decay_factor': LEARNING_RATE_DECAY_FACTOR,
      'num_epochs_per_decay': NUM_EPOCHS_PER_DECAY,
  })


def main(argv):
  try:
    if not F.checkpoint_dir and not F['train_dir'].present:
      raise ValueError('--checkpoint_dir is required: the directory for the '
                       'checkpoints and logs')
    if not F.dataset_dir:
      raise ValueError('--dataset_dir is required: the location of the dataset')
    check_num_classes(F.num_classes, F.dataset_split_name)
    F([argv[0]] + translated_flags())
  except (ValueError, IOError) as e:
    print('mobilenet_v1_train: error: %s' % e, file=sys.stderr)
    return 1
  return train_image_classifier.main(argv)


if __name__ == '__main__':
  script_flags.use_grouped_help()
  app.run(lambda argv: sys.exit(main(argv)))
