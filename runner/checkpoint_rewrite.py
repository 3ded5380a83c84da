"""Rewrites a checkpoint in place, so that it is never torn, even if killed.

A TensorFlow checkpoint is two or more files (`<prefix>.index` and its
`.data-*` shards); no rename replaces them together. The `checkpoint` state
file is the one thing TensorFlow writes atomically, and what every reader
here goes by (`tf.train.latest_checkpoint`, runner/faults.py's candidates),
so it is the commit point:

1. the new checkpoint is written whole under a hidden staging directory
   beside the old one (`.rewrite-<pid>/<name>`), synced and read back;
2. the state file is pointed at the staged copy (commit 1): the old files
   are now unlisted, and an unlisted checkpoint of the newest listed step is
   no candidate (faults.checkpoint_candidates), so nobody reads them;
3. the old files are replaced by copies of the staged ones (each file by a
   rename), synced;
4. the state file is pointed back at the original name (commit 2), and the
   staging directory removed.

Killed before 2, the old checkpoint stands and the staging directory is left
over; killed after 2, the staged copy is the latest and `finish_interrupted`
(called before every rewrite) completes steps 3 and 4.
"""
import glob
import os
import shutil

import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint_management
from tensorflow.python.training import py_checkpoint_reader

import tf_compat  # noqa: F401
from runner import faults

tf1 = tf.compat.v1

STAGING_PREFIX = '.rewrite-'
STATE_FILE = 'checkpoint'


def read_tensors(prefix):
  """{name: numpy value} of every tensor of checkpoint `prefix`."""
  reader = py_checkpoint_reader.NewCheckpointReader(prefix)
  return {name: reader.get_tensor(name)
          for name in reader.get_variable_to_dtype_map()}


def write_tensors(prefix, tensors):
  """Writes {name: numpy value} as the checkpoint `prefix` (one shard)."""
  names = sorted(tensors)
  with tf.Graph().as_default():
    placeholders = [tf1.placeholder(tf.as_dtype(tensors[n].dtype), name='t%d' % i)
                    for i, n in enumerate(names)]
    save = tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                             shape_and_slices=[''] * len(names),
                             tensors=placeholders)
    with tf1.Session() as session:
      session.run(save, dict(zip(placeholders, [tensors[n] for n in names])))


def _files(prefix):
  """The index and data shards of checkpoint `prefix` (its .meta graph, which
  a rewrite of the values leaves as it is, is not among them)."""
  return sorted(glob.glob(glob.escape(prefix) + '.index') +
                glob.glob(glob.escape(prefix) + '.data-*'))


def _fsync(path):
  fd = os.open(path, os.O_RDONLY)
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def _state(directory):
  """The state's (latest, [all listed]), as absolute paths."""
  state = tf.train.get_checkpoint_state(directory)
  if state is None:
    return None, []
  return state.model_checkpoint_path, list(state.all_model_checkpoint_paths)


def _point_state(directory, old, new):
  """Rewrites the state file (atomically) with checkpoint `old` as `new`;
  the other listed checkpoints, their order and the latest stay."""
  state = tf.train.get_checkpoint_state(directory)
  latest = state.model_checkpoint_path if state else old
  listed = list(state.all_model_checkpoint_paths) if state else [old]
  if old not in listed:
    listed.append(old)
  listed = [new if p == old else p for p in listed]
  timestamps = list(state.all_model_checkpoint_timestamps) if state else None
  if timestamps is not None and len(timestamps) != len(listed):
    timestamps = None
  # Relative names: the directory stays movable. The public
  # tf1.train.update_checkpoint_state is this call behind a deprecation
  # notice (for CheckpointManager, which cannot list a checkpoint it did
  # not write); Saver itself still calls the internal one.
  checkpoint_management.update_checkpoint_state_internal(
      directory, os.path.relpath(new if latest == old else latest, directory),
      [os.path.relpath(p, directory) for p in listed],
      all_model_checkpoint_timestamps=timestamps,
      last_preserved_timestamp=(state.last_preserved_timestamp
                                if state else None))
  _fsync(directory)


def _move_into_place(staged, prefix):
  """Steps 3 and 4: the files of `staged` become `prefix`'s, then the state
  names `prefix` again and the staging directory goes."""
  directory = os.path.dirname(prefix)
  for path in _files(prefix):  # e.g. the shards of a parameter server's save
    os.remove(path)
  for path in _files(staged):
    target = prefix + path[len(staged):]
    temporary = os.path.join(directory, '.%s.tmp' % os.path.basename(target))
    shutil.copyfile(path, temporary)
    _fsync(temporary)
    os.replace(temporary, target)
  _fsync(directory)
  _point_state(directory, staged, prefix)
  shutil.rmtree(os.path.dirname(staged), ignore_errors=True)


def finish_interrupted(directory):
  """Completes a rewrite of `directory` that was killed after its commit,
  and removes the staging directories of rewrites killed before it."""
  latest, listed = _state(directory)
  for path in listed + ([latest] if latest else []):
    parent = os.path.basename(os.path.dirname(path))
    if parent.startswith(STAGING_PREFIX) and os.path.exists(path + '.index'):
      _move_into_place(path, os.path.join(directory, os.path.basename(path)))
  for path in glob.glob(os.path.join(glob.escape(directory),
                                     STAGING_PREFIX + '*')):
    shutil.rmtree(path, ignore_errors=True)


def rewrite(prefix, tensors):
  """Replaces checkpoint `prefix` (listed in its directory's state file) by
  one holding `tensors` ({name: numpy value}), at the same name, never torn
  (see the module's doc)."""
  prefix = os.path.abspath(prefix)
  directory = os.path.dirname(prefix)
  finish_interrupted(directory)
  staging = os.path.join(directory, '%s%d' % (STAGING_PREFIX, os.getpid()))
  os.makedirs(staging)
  staged = os.path.join(staging, os.path.basename(prefix))
  try:
    write_tensors(staged, tensors)
    for path in _files(staged):
      _fsync(path)
    _fsync(staging)
    problem = faults.checkpoint_problem(staged)
    if problem:
      raise ValueError('the rewritten checkpoint %s does not read back: %s'
                       % (staged, problem))
  except BaseException:
    shutil.rmtree(staging, ignore_errors=True)
    raise
  _point_state(directory, prefix, staged)  # commit 1
  _move_into_place(staged, prefix)  # commit 2
  return prefix
