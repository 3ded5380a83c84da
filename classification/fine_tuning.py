"""Fine-tuning from a checkpoint: which variables it restores, checked by
name and shape against the checkpoint before anything runs."""
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from classification import training_record
from nets import nets_factory

tf1 = tf.compat.v1

# The name of a variable's shadow in the checkpoints of a run trained with
# --moving_average_decay (tf.train.ExponentialMovingAverage's).
MOVING_AVERAGE_SUFFIX = '/ExponentialMovingAverage'


def resolve_checkpoint(path, what='--checkpoint_path'):
  """A checkpoint file prefix from a file prefix or a directory."""
  if tf.io.gfile.isdir(path):
    found = tf.train.latest_checkpoint(path)
    if not found:
      raise ValueError("%s '%s' is a directory without a checkpoint" % (
          what, path))
    return found
  if not (tf.io.gfile.glob(path + '.index') or tf.io.gfile.glob(path)):
    raise ValueError("%s '%s' is not a checkpoint" % (what, path))
  return path


def checkpoint_mismatches(checkpoint_shapes, wanted):
  """(missing names, 'name [shape] (checkpoint: [shape])' lines) of the
  variables `wanted` ({checkpoint name: shape}) against a checkpoint's
  {name: shape}, in the order of `wanted`."""
  missing = [name for name in wanted if name not in checkpoint_shapes]
  wrong = ['%s %s (checkpoint: %s)' % (name, list(shape),
                                       list(checkpoint_shapes[name]))
           for name, shape in wanted.items()
           if name in checkpoint_shapes
           and list(shape) != list(checkpoint_shapes[name])]
  return missing, wrong


def shape_mismatches(checkpoint_shapes, wanted):
  """[(name, shape, checkpoint shape)] of `wanted` ({checkpoint name:
  shape}) whose shape differs from the checkpoint's {name: shape}."""
  return [(name, list(shape), list(checkpoint_shapes[name]))
          for name, shape in wanted.items()
          if name in checkpoint_shapes and
          list(shape) != list(checkpoint_shapes[name])]


def misfit_message(checkpoint, mismatches, num_classes, image_size,
                   size_flag):
  """One line naming the flag at fault for `mismatches` (see
  shape_mismatches, not empty): the classes (a classifier of another width),
  grayscale (a first convolution of other input channels) or the image size
  (anything else: a layer whose input grows with the image, such as
  CifarNet's or LeNet's fully connected ones)."""
  name, shape, there = mismatches[0]
  found = "checkpoint '%s': %s is %s there, %s here" % (checkpoint, name,
                                                       there, shape)
  if shape and shape[-1] == num_classes and there[-1] != shape[-1]:
    return ('%d classes do not fit %s; check --dataset_name/--num_classes and '
            '--labels_offset' % (num_classes, found))
  if (len(shape) == 4 and shape[:2] == there[:2] and shape[3] == there[3] and
      {shape[2], there[2]} == {1, 3}):
    return ('%d input channel(s) do not fit %s; check --use_grayscale' % (
        shape[2], found))
  record, _ = training_record.read(checkpoint)
  trained = (record or {}).get('image_size')
  return '%s=%d does not fit %s%s' % (
      size_flag, image_size, found,
      '; it was trained at %d (its %s)' % (trained, training_record.FILENAME)
      if trained else '; pass the size it was trained at')


class CheckpointFitHook(tf1.train.SessionRunHook):
  """Raises ValueError (misfit_message) before a session restores
  `checkpoint` into a graph whose model variables have other shapes: a
  Saver restores them anyway and the first matmul fails with a raw
  "Matrix size-incompatible"."""

  def __init__(self, checkpoint, **describe):
    # `checkpoint` may be a callable, read when the graph is final: training
    # learns only then which readable checkpoint the runner restores.
    self._checkpoint, self._describe = checkpoint, describe

  def begin(self):
    checkpoint = (self._checkpoint() if callable(self._checkpoint)
                  else self._checkpoint)
    if not checkpoint:
      return
    mismatches = shape_mismatches(
        dict(tf.train.list_variables(checkpoint)),
        {v.op.name: v.shape.as_list() for v in slim.get_model_variables()})
    if mismatches:
      raise ValueError(misfit_message(checkpoint, mismatches,
                                      **self._describe))


def restore_variables(session, checkpoint, model_name, variables=None,
                      spec=None, moving_averages=None):
  """Restores `variables` (default: all) from `checkpoint`, with their moving
  averages when every trainable one has them (or as `moving_averages` says:
  False, the variables themselves); returns whether it did.

  Raises ValueError naming the checkpoint when it does not fit the network
  (with the serving ModelSpec `spec`, naming the flag at fault).
  """
  variables = tf1.global_variables() if variables is None else variables
  shapes = dict(tf.train.list_variables(checkpoint))
  names = {v.op.name for v in variables}
  trainable = [v for v in tf1.trainable_variables() if v.op.name in names]
  averaged = bool(trainable) and all(
      v.op.name + MOVING_AVERAGE_SUFFIX in shapes for v in trainable)
  if moving_averages is not None:
    averaged = averaged and moving_averages

  def name_in_checkpoint(v):
    name = v.op.name
    if averaged and name + MOVING_AVERAGE_SUFFIX in shapes:
      return name + MOVING_AVERAGE_SUFFIX
    return name

  to_restore = {name_in_checkpoint(v): v for v in variables}
  missing, wrong = checkpoint_mismatches(
      shapes, {name: v.shape.as_list() for name, v in to_restore.items()})
  if missing:
    raise ValueError(
        "checkpoint '%s' does not match the network %s: %d of its %d "
        'variable(s) missing, first: %s; was it trained with another '
        '--model_name?' % (checkpoint, model_name, len(missing),
                           len(to_restore), ', '.join(missing[:3])))
  if wrong:
    if spec is not None:
      raise ValueError(misfit_message(
          checkpoint, shape_mismatches(shapes, {
              name: v.shape.as_list() for name, v in to_restore.items()}),
          spec.num_classes, spec.image_size, '--image_size'))
    raise ValueError(
        "checkpoint '%s' does not match the network %s: %d variable(s) with "
        'other shapes, first: %s; check --dataset_name/--num_classes, '
        '--labels_offset, --use_grayscale and --image_size' % (
            checkpoint, model_name, len(wrong), '; '.join(wrong[:3])))
  if to_restore:
    tf1.train.Saver(to_restore).restore(session, checkpoint)
  return averaged


def fine_tune_init_fn(checkpoint_path, exclude_scopes, ignore_missing_vars,
                      note='', quantized=False):
  """Scaffold init_fn restoring model variables not excluded, after checking
  names and shapes against the checkpoint (the mismatches are listed).

  MonitoredTrainingSession calls it only when the model_dir has no
  checkpoint of its own, so a restarted run resumes instead; `note` is
  printed then, when the restore happens. `quantized` (a graph rewritten
  for quantization-aware training): the ranges are no model variables and
  start fresh, as in TF-Slim, which a line says.
  """
  checkpoint = resolve_checkpoint(checkpoint_path)
  exclusions = [s.rstrip('/') for s in exclude_scopes or ()]
  chosen = [v for v in slim.get_model_variables()
            if not any(v.op.name == e or v.op.name.startswith(e + '/')
                       for e in exclusions)]
  shapes = dict(tf.train.list_variables(checkpoint))
  missing, wrong = checkpoint_mismatches(
      shapes, {v.op.name: v.shape.as_list() for v in chosen})
  if wrong:
    raise ValueError("checkpoint '%s' does not match the network: %d variable(s)"
                     ' with other shapes, first: %s; exclude them with '
                     '--checkpoint_exclude_scopes' % (checkpoint, len(wrong),
                                                       '; '.join(wrong[:3])))
  if missing and not ignore_missing_vars:
    raise ValueError("checkpoint '%s' does not match the network: %d variable(s)"
                     ' missing, first: %s; pass --ignore_missing_vars or '
                     '--checkpoint_exclude_scopes' % (
                         checkpoint, len(missing), ', '.join(missing[:3])))
  chosen_names = {v.op.name for v in chosen}
  excluded = [v for v in slim.get_model_variables()
              if v.op.name not in chosen_names]
  chosen = [v for v in chosen if v.op.name in shapes]
  if not chosen:
    raise ValueError("checkpoint '%s' shares no variable with the network" %
                     checkpoint)
  lines = ['Fine-tuning from %s: restored %s' % (checkpoint,
                                                 variables_and_scopes(chosen))]
  if excluded:
    lines.append(note or 'Not restored: %s (--checkpoint_exclude_scopes=%s)'
                 % (variables_and_scopes(excluded), ','.join(exclusions)))
  if missing:
    lines.append('Not restored: %s, not in the checkpoint '
                 '(--ignore_missing_vars)' % variables_and_scopes(
                     [v for v in slim.get_model_variables()
                      if v.op.name in missing]))
  if not excluded and not missing:
    lines.append('Not restored: nothing (every model variable is in the '
                 'checkpoint with its shape)')
  if quantized:
    lines.append(quantization_ranges_line(checkpoint, shapes))
  saver = tf1.train.Saver(chosen)

  def init_fn(unused_scaffold, session):
    # Printed when the restore happens: a run resuming from its own
    # checkpoint restores nothing from checkpoint_path.
    for line in lines:
      print(line, flush=True)
    saver.restore(session, checkpoint)
  return init_fn


def quantization_ranges_line(checkpoint, shapes):
  """What fine-tuning into quantization-aware training does with the
  ranges: `shapes` is the checkpoint's {name: shape}."""
  if not any(name.endswith('_quant/min') for name in shapes):
    return ('Quantization ranges start fresh: %s holds none (trained in '
            'float)' % checkpoint)
  return ('Quantization ranges start fresh: those of %s are not restored '
          '(fine-tuning restores model variables, as TF-Slim\'s)' % checkpoint)


def variables_and_scopes(variables, depth=2, at_most=8):
  """'6 variables of LeNet/conv1, LeNet/conv2, LeNet/fc3': the count and the
  scopes (the first `depth` name components, in order; `at_most` named)."""
  scopes = []
  for v in variables:
    scope = '/'.join(v.op.name.split('/')[:depth])
    if scope not in scopes:
      scopes.append(scope)
  named = ', '.join(scopes[:at_most])
  if len(scopes) > at_most:
    named += ' and %d more scopes' % (len(scopes) - at_most)
  return '%d variable%s of %s' % (len(variables),
                                  '' if len(variables) == 1 else 's', named)


def trainable_line(trained, trainable_scopes):
  """'Training 2 of 8 variables: ...': which variables the run trains."""
  everything = tf1.trainable_variables()
  if not trainable_scopes:
    return 'Training all %s (no --trainable_scopes)' % variables_and_scopes(
        everything)
  return 'Training %d of %d variables: %s (--trainable_scopes=%s)' % (
      len(trained), len(everything), variables_and_scopes(trained),
      ','.join(trainable_scopes))


def default_labels_offset(model_name, checkpoint, dataset_classes):
  """--labels_offset left unset: 1 when `checkpoint` (a file or directory)
  has a classifier of one class fewer than the dataset's `dataset_classes`
  and the network's published checkpoints leave ImageNet's background out
  (the registry's labels_offset is 1: VGG, ResNet v1), with a line saying
  so; else 0, TF-Slim's default."""
  info = nets_factory.get_info(model_name)
  if info.labels_offset != 1 or not checkpoint or not dataset_classes:
    return 0
  checkpoint = resolve_checkpoint(checkpoint)
  classes = info.classifier_classes(dict(tf.train.list_variables(checkpoint)))
  if classes != dataset_classes - 1:
    return 0
  print('--labels_offset=1: the %s classifier of %s has %d classes, the '
        'dataset %d (its label 0, background, is left out)' % (
            model_name, checkpoint, classes, dataset_classes), flush=True)
  return 1
