"""The flags the scripts share, each defined once: TF-Slim's names, defaults
and help.

train_image_classifier.py and eval_image_classifier.py call
`define_shared_flags` with the two defaults TF-Slim's scripts disagree on
(--batch_size 32 to train, 100 to evaluate; --dataset_split_name train /
test), and define only their own flags beside it. Flags that are fields of
a params dataclass (the optimizer's, the model_fn's) are generated from the
field by `define_flags_of`, so a default is written once, next to the code
that reads it, and read back with `params_from_flags`.
"""
import dataclasses
import typing

from absl import flags
import tensorflow as tf

from classification import classifier
from classification import optimization
from deployment import session_options

tf1 = tf.compat.v1
F = flags.FLAGS

_DEFINE = {bool: flags.DEFINE_boolean, int: flags.DEFINE_integer,
           float: flags.DEFINE_float, str: flags.DEFINE_string}

# The model_fn's fields that are flags of training only; the other one,
# --moving_average_decay, is shared (see classifier.ClassifierParams).
TRAINING_FIELDS = ('weight_decay', 'label_smoothing', 'ignore_missing_vars',
                   'log_every_n_steps')


def define_shared_flags(batch_size, dataset_split_name, flag_values=F):
  """The flags of both scripts; the arguments are the script's defaults."""
  on = {'flag_values': flag_values}
  # Dataset.
  flags.DEFINE_string('dataset_name', 'imagenet', 'Dataset to read (see '
                      'datasets/dataset_factory.py).', **on)
  flags.DEFINE_string('dataset_split_name', dataset_split_name,
                      'Split of the dataset to read.', **on)
  flags.DEFINE_string('dataset_dir', None,
                      'Directory of the converted dataset.', **on)
  flags.DEFINE_integer('labels_offset', 0, 'Subtracted from labels (1 drops '
                       'ImageNet background).', **on)
  flags.DEFINE_integer('num_readers', 4, 'Shards read in parallel.', **on)
  flags.DEFINE_integer('num_preprocessing_threads', 4,
                       'Parallel decode/preprocess calls.', **on)
  # Network.
  flags.DEFINE_string('model_name', 'inception_v3', 'Network to use.', **on)
  flags.DEFINE_string('preprocessing_name', None,
                      'Preprocessing; defaults to the network\'s.', **on)
  flags.DEFINE_bool('use_grayscale', False,
                    'Whether to convert input images to grayscale.', **on)
  define_flags_of(classifier.ClassifierParams, ['moving_average_decay'],
                  flag_values)
  # Devices.
  flags.DEFINE_integer('batch_size', batch_size,
                       'Images per clone: a batch (a training step) is '
                       'batch_size x num_clones images.', **on)
  flags.DEFINE_integer('num_clones', 1,
                       'Model clones to deploy (one per GPU).', **on)
  flags.DEFINE_boolean('clone_on_cpu', False, 'Place clones on CPU devices.',
                       **on)
  # Session settings, read by session_config().
  flags.DEFINE_string('precision', 'float32',
                      'float32; bfloat16 (CPUs with AVX512-BF16/AMX) or '
                      'float16 (GPUs, with loss scaling): 16-bit compute by a '
                      'graph rewrite, float32 variables and checkpoints (any '
                      'checkpoint evaluates in any precision).', **on)
  flags.DEFINE_integer('intra_op_threads', 0,
                       'Threads inside one op (0: TensorFlow\'s default, the '
                       'cores). The first session of a process sets it for '
                       'the process (see README "Threads").', **on)
  flags.DEFINE_integer('inter_op_threads', 0,
                       'Ops run side by side (0: TensorFlow\'s default, the '
                       'cores). The first session of a process sets it.',
                       **on)


def session_config():
  """The ConfigProto of both scripts' sessions, from the shared flags."""
  config = tf1.ConfigProto(allow_soft_placement=True)
  if F.clone_on_cpu and F.num_clones > 1:
    config.device_count['CPU'] = F.num_clones  # one device per clone
  return session_options.configure(config, F.precision, F.intra_op_threads,
                                   F.inter_op_threads)


def _flag_type(field):
  """bool, int, float or str: the field's type, Optional[...] unwrapped."""
  kinds = [k for k in typing.get_args(field.type) if k is not type(None)]
  return kinds[0] if kinds else field.type


def define_flags_of(params_class, names=None, flag_values=F):
  """One flag per field of the dataclass `params_class` made with
  optimization.flag_field (or those of `names`): the field's name, default
  and help."""
  for field in dataclasses.fields(params_class):
    if 'help' not in field.metadata or (names is not None and
                                        field.name not in names):
      continue
    _DEFINE[_flag_type(field)](field.name, field.default,
                               field.metadata['help'], flag_values=flag_values)


def params_from_flags(params_class, names=None, flag_values=F):
  """{field: flag value} of the fields `define_flags_of` made flags of."""
  return {field.name: getattr(flag_values, field.name)
          for field in dataclasses.fields(params_class)
          if 'help' in field.metadata and (names is None or
                                           field.name in names)}


def define_training_flags(flag_values=F):
  """TF-Slim's optimizer, learning-rate and replica flags, and the model_fn's
  training flags (weight decay, label smoothing...)."""
  define_flags_of(optimization.OptimizerParams, flag_values=flag_values)
  define_flags_of(classifier.ClassifierParams, TRAINING_FIELDS, flag_values)


def optimizer_params(flag_values=F):
  return optimization.OptimizerParams(
      **params_from_flags(optimization.OptimizerParams,
                          flag_values=flag_values))


def split_scopes(text):
  """'a, b' -> ['a', 'b']; None or '' -> []."""
  return [s.strip() for s in (text or '').split(',') if s.strip()]
