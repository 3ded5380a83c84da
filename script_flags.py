"""The flags the scripts share, each defined once: TF-Slim's names, defaults
and help.

train_image_classifier.py and eval_image_classifier.py call
`define_shared_flags` with the defaults TF-Slim's scripts disagree on
(--batch_size 32 to train, 100 to evaluate; --dataset_split_name train /
the dataset's test or validation; --train_image_size / --eval_image_size),
and define only their own flags beside it. The export scripts and
classify_image.py call `define_network_flags` (which network, trained on
which data); all read them back with `network_args` and check them with
`check_flags`; the scripts that read a checkpoint take the flags not given
from its training record (`apply_training_record`). Flags that
are fields of a params dataclass (the optimizer's, the model_fn's) are
generated from the field by `define_flags_of`, so a default is written
once, next to the code that reads it, and read back with
`params_from_flags`.
"""
import dataclasses
import os
import sys
import typing

from absl import flags
import tensorflow as tf

from classification import classifier
from classification import fine_tuning
from classification import optimization
from classification import training_record
from datasets import dataset_utils
from datasets import reader
from deployment import session_options

tf1 = tf.compat.v1
F = flags.FLAGS

_DEFINE = {bool: flags.DEFINE_boolean, int: flags.DEFINE_integer,
           float: flags.DEFINE_float, str: flags.DEFINE_string}

# The model_fn's fields that are flags of training only; the other one,
# --moving_average_decay, is shared (see classifier.ClassifierParams).
TRAINING_FIELDS = ('weight_decay', 'label_smoothing', 'ignore_missing_vars',
                   'log_every_n_steps', 'async_worker_warmup_steps',
                   'distort_colors_after_batching')


def define_network_flags(model_name=None, dataset_name=None,
                         image_size_flag='image_size', num_classes=False,
                         preprocessing=True, labels_offset=None,
                         flag_values=F):
  """The flags naming a network and the data it reads or was trained on,
  with the script's defaults: TF-Slim's train, eval and
  export_inference_graph default to inception_v3 on imagenet, and each
  names its input size flag its own way (--train_image_size,
  --eval_image_size, --image_size). num_classes: the export scripts' flag
  for a network without a dataset; preprocessing: --preprocessing_name
  (not for a graph whose input is preprocessed); labels_offset: training's
  0, or None for the scripts reading a checkpoint (see
  fine_tuning.default_labels_offset)."""
  on = {'flag_values': flag_values}
  flags.DEFINE_string('model_name', model_name, 'The network (see '
                      'nets_factory.list_models()).', **on)
  flags.DEFINE_string('dataset_name', dataset_name, 'The dataset read or '
                      'trained on (see datasets/dataset_factory.py).', **on)
  flags.DEFINE_string('dataset_dir', None, 'Directory of the converted '
                      'dataset (records, labels.txt).', **on)
  flags.DEFINE_integer(
      'labels_offset', labels_offset, 'Subtracted from labels (1 drops '
      'ImageNet\'s background).%s' % ('' if labels_offset is not None else
                                       ' Unset: 1 for a VGG or ResNet v1 '
                                       'checkpoint of one class fewer than '
                                       'the dataset, else 0.'), **on)
  if num_classes:
    flags.DEFINE_integer('num_classes', None, 'Outputs of the network, '
                         'instead of --dataset_name.', **on)
  flags.DEFINE_integer(image_size_flag, None,
                       'Input size; defaults to the network\'s.', **on)
  if preprocessing:
    flags.DEFINE_string('preprocessing_name', None,
                        'Preprocessing; defaults to the network\'s.', **on)
  flags.DEFINE_bool('use_grayscale', False,
                    'Whether to convert input images to grayscale.', **on)
  # TF-Slim's recipes spell it so (TensorFlow Lite Micro's person detector).
  flags.DEFINE_alias('input_grayscale', 'use_grayscale', **on)


def define_shared_flags(batch_size, dataset_split_name, image_size_flag,
                        labels_offset, flag_values=F):
  """The flags of both scripts; the arguments are the script's defaults and
  its name of the input size flag."""
  on = {'flag_values': flag_values}
  define_network_flags('inception_v3', 'imagenet', image_size_flag,
                       labels_offset=labels_offset, flag_values=flag_values)
  flags.DEFINE_string('dataset_split_name', dataset_split_name,
                      'Split of the dataset to read.%s' % (
                          '' if dataset_split_name else " Unset: 'test' where "
                          "the dataset has one, else 'validation'."), **on)
  flags.DEFINE_integer('num_readers', reader.NUM_READERS,
                       'Shards read in parallel.', **on)
  flags.DEFINE_integer('num_preprocessing_threads',
                       reader.NUM_PREPROCESSING_THREADS,
                       'Parallel decode/preprocess calls.', **on)
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


# Each script's name of the input size flag (see define_network_flags).
IMAGE_SIZE_FLAGS = ('image_size', 'train_image_size', 'eval_image_size')


def network_args(checkpoint=None):
  """exporter.make_spec's keywords from define_network_flags' flags (an
  unset --labels_offset is inferred from `checkpoint`)."""
  return dict(
      checkpoint=checkpoint,
      model_name=F.model_name, dataset_name=F.dataset_name,
      dataset_dir=dataset_utils.expand_path(F.dataset_dir),
      num_classes=F['num_classes'].value if 'num_classes' in F else None,
      labels_offset=F.labels_offset,
      image_size=next(F[size].value for size in IMAGE_SIZE_FLAGS if size in F),
      preprocessing_name=(F['preprocessing_name'].value
                          if 'preprocessing_name' in F else None),
      use_grayscale=F.use_grayscale)


# The flags a training record (classification/training_record.py) sets when
# they are not given, by record field; the image size goes to the script's
# own size flag. A recorded dataset is not used when --num_classes is given.
RECORDED_FLAGS = ('model_name', 'image_size', 'preprocessing_name',
                  'use_grayscale', 'labels_offset', 'dataset_name',
                  'dataset_dir')
DATASET_FIELDS = ('labels_offset', 'dataset_name', 'dataset_dir')


def apply_training_record(checkpoint):
  """Flags not given take their values from the training record beside
  `checkpoint` (a file prefix or a train_dir), printed in one line when they
  change a default; returns the record, or None when there is none. A given
  --model_name other than the record's is refused, naming both (the
  checkpoint's variables are another network's); other given flags win (a
  size the checkpoint's layers cannot take is found when it is restored:
  fine_tuning.misfit_message)."""
  if not checkpoint:
    return None
  record, path = training_record.read(checkpoint)
  if record is None:
    return None
  size_flag = next(size for size in IMAGE_SIZE_FLAGS if size in F)
  num_classes_given = 'num_classes' in F and F['num_classes'].present
  # What an unset flag would have meant: a record equal to it is not news.
  implied = {'labels_offset': 0}
  if record.get('model_name'):
    info = classifier.image_network_info(record['model_name'])
    implied.update(image_size=info.default_image_size,
                   preprocessing_name=info.preprocessing_name)
  changed = []
  for field in RECORDED_FLAGS:
    flag = size_flag if field == 'image_size' else field
    if (flag not in F or record.get(field) is None or
        (num_classes_given and field in DATASET_FIELDS)):
      continue
    if F[flag].present:
      if field == 'model_name' and F[flag].value != record[field]:
        raise ValueError(
            '--model_name=%s disagrees with the checkpoint: %s says it is a '
            '%s; drop the flag (or pass another --checkpoint_path)' % (
                F[flag].value, path, record[field]))
      continue
    if F[flag].value != record[field]:
      if record[field] != implied.get(field, F[flag].value):
        changed.append('--%s=%s' % (flag, record[field]))
      setattr(F, flag, record[field])
  if ('quantize' in F and isinstance(F['quantize'].value, bool) and
      not F['quantize'].present and record.get('quantize_delay') is not None):
    # A quantization-aware checkpoint is evaluated and exported as trained;
    # --quantize=false reads it as a float network.
    F.quantize = True
    changed.append('--quantize')
  if changed:
    print('As trained (%s): %s' % (path, ' '.join(changed)), flush=True)
  return record


def resolve_labels_offset(checkpoint, dataset_classes):
  """Sets an unset --labels_offset from `checkpoint` (see
  fine_tuning.default_labels_offset)."""
  if F.labels_offset is None:
    F.labels_offset = fine_tuning.default_labels_offset(
        F.model_name, checkpoint, dataset_classes)


def input_args():
  """classifier.make_input_fn's keywords from the shared flags."""
  args = network_args()
  return dict(preprocessing_name=args['preprocessing_name'],
              image_size=args['image_size'], num_readers=F.num_readers,
              num_preprocessing_threads=F.num_preprocessing_threads,
              labels_offset=F.labels_offset, use_grayscale=F.use_grayscale)


def check_flags(required=(), at_least_one=()):
  """Raises ValueError naming the first flag of `required` left empty or of
  `at_least_one` given below 1."""
  for name in required:
    if not F[name].value:
      raise ValueError('--%s is required' % name)
  for name in at_least_one:
    if F[name].value is not None and F[name].value < 1:
      raise ValueError('--%s must be at least 1, got %d' % (name,
                                                           F[name].value))


def expand_paths(*names):
  """`~` and $VARIABLES in the path flags `names` (the shell leaves
  --flag=~/x alone)."""
  for name in names:
    setattr(F, name, dataset_utils.expand_path(getattr(F, name)))


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


# --help: every flag the script reads, in groups (absl's own --help lists
# only the flags the script file defines; --helpfull adds absl's and
# TensorFlow's). Flags of no group are listed under the script's name.
HELP_GROUPS = (
    ('Network and data', (
        'model_name', 'dataset_name', 'dataset_dir', 'dataset_split_name',
        'labels_offset', 'num_classes') + IMAGE_SIZE_FLAGS + (
            'preprocessing_name', 'use_grayscale', 'num_readers',
            'num_preprocessing_threads', 'distort_colors_after_batching',
            'checkpoint_path')),
    ('Batch and devices', (
        'batch_size', 'num_clones', 'clone_on_cpu', 'variable_update',
        'precision', 'intra_op_threads', 'inter_op_threads')),
    ('Optimizer and learning rate', tuple(
        f.name for f in dataclasses.fields(optimization.OptimizerParams)
        if f.name not in ('sync_replicas', 'replicas_to_aggregate'))),
    ('Training', ('train_dir', 'max_number_of_steps', 'weight_decay',
                  'label_smoothing', 'moving_average_decay', 'random_seed',
                  'log_every_n_steps', 'save_summaries_secs',
                  'save_summaries_steps', 'save_interval_secs')),
    ('Fine-tuning', ('checkpoint_exclude_scopes', 'trainable_scopes',
                     'ignore_missing_vars')),
    ('Cluster', ('master', 'worker_replicas', 'num_ps_tasks', 'task',
                 'ps_hosts', 'worker_hosts', 'job_name', 'sync_replicas',
                 'replicas_to_aggregate')),
)


def grouped_help(flag_values=F, script=None):
  """The text --help prints after the script's docstring: the flags of the
  script and of this module, by HELP_GROUPS, the rest under the script."""
  script = script or sys.argv[0]
  by_module = flag_values.flags_by_module_dict()
  own = {}
  for module in (__name__, script):
    for flag in by_module.get(module, ()):
      own[flag.name] = flag
  lines = []
  for title, names in HELP_GROUPS + (
      (os.path.basename(script), tuple(sorted(own))),):
    chosen = [own.pop(name) for name in names if name in own]
    if chosen:
      lines.append('\n%s:' % title)
      flag_values._render_flag_list(chosen, lines, '  ')  # pylint: disable=protected-access
  lines.append('\n-v N (--verbosity=N) shows TensorFlow\'s own logs at absl '
               'level N.')
  return '\n'.join(lines)


def use_grouped_help(flag_values=F):
  """Makes --help (and -h, --helpshort) print grouped_help: absl prints
  FlagValues.main_module_help(), replaced on this instance."""
  flag_values.__dict__['main_module_help'] = (
      lambda: grouped_help(flag_values))
