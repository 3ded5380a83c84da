"""How a train_dir's checkpoints were trained: a small JSON file beside them.

Training writes `training.json` (network, input size, preprocessing,
grayscale, classes, labels offset, dataset) when it saves a checkpoint, so
the record describes the checkpoints that exist: a run that fails before it
has trained a step leaves the previous record as it was (RecordWriter). The file
is written under a temporary name and renamed, so a reader never sees half
of one. Evaluation, export and classification read it from the checkpoint's
directory and use it where their flags are not given.
"""
import json
import os
import tempfile

import tensorflow as tf

from classification import moving_statistics

tf1 = tf.compat.v1

FILENAME = 'training.json'
# What a record holds; each is the resolved value (never None for the first
# five), so a reader needs no network defaults.
FIELDS = ('model_name', 'image_size', 'preprocessing_name', 'use_grayscale',
          'num_classes', 'labels_offset', 'dataset_name', 'dataset_dir',
          # How far the batch-norm statistics of a checkpoint have moved from
          # their initial values depends on these (classification/precise_bn):
          # the decay found in the training graph (None: no batch norm).
          'batch_norm_decay', 'moving_average_decay',
          # Quantization-aware training: its --quantize_delay (None: float).
          # Evaluation and every export of its checkpoints quantize then.
          'quantize_delay')


def path_for(checkpoint):
  """The record of a checkpoint file prefix or of a train_dir."""
  directory = (checkpoint if tf.io.gfile.isdir(checkpoint)
               else os.path.dirname(checkpoint) or '.')
  return os.path.join(directory, FILENAME)


def write(train_dir, record):
  """Writes `record` ({field: value}, FIELDS) into train_dir atomically;
  an identical record is left alone."""
  unknown = set(record) - set(FIELDS)
  if unknown:
    raise ValueError('unknown training record field(s): %s' %
                     ', '.join(sorted(unknown)))
  path = os.path.join(train_dir, FILENAME)
  text = json.dumps(record, indent=1, sort_keys=True) + '\n'
  try:
    with open(path) as f:
      if f.read() == text:
        return path
  except OSError:
    pass
  handle, temporary = tempfile.mkstemp(prefix='.' + FILENAME, dir=train_dir)
  try:
    with os.fdopen(handle, 'w') as f:
      f.write(text)
    os.replace(temporary, path)
  except BaseException:
    os.unlink(temporary)
    raise
  return path


def read(checkpoint):
  """(record, its path) of a checkpoint file prefix or train_dir; (None,
  path) when there is none (a checkpoint trained elsewhere, e.g. TF-Slim's).
  Raises ValueError naming a record that cannot be read."""
  path = path_for(checkpoint)
  if not os.path.exists(path):
    return None, path
  try:
    with open(path) as f:
      record = json.load(f)
  except (OSError, ValueError) as e:
    raise ValueError("cannot read the training record '%s': %s; delete it "
                     'to use the flags alone' % (path, e)) from None
  if not isinstance(record, dict):
    raise ValueError("the training record '%s' is not a JSON object" % path)
  return {k: v for k, v in record.items() if k in FIELDS}, path


class RecordWriter(tf1.train.CheckpointSaverListener):
  """Writes the record after each checkpoint the run saves past
  `start_step` (the step it resumed from): the save of the restored step
  comes before any step ran, so a resumed run whose flags do not fit the
  checkpoint fails without replacing the record. A train_dir without a
  record gets one at its first save."""

  def __init__(self, train_dir, record, start_step=0):
    self._train_dir, self._record = train_dir, dict(record)
    self._start_step = start_step

  def after_save(self, session, global_step_value):
    if 'batch_norm_decay' not in self._record:  # of the graph being trained
      self._record['batch_norm_decay'] = moving_statistics.batch_norm_decay(
          session.graph, session)
    if (global_step_value > self._start_step or
        not os.path.exists(os.path.join(self._train_dir, FILENAME))):
      write(self._train_dir, self._record)
