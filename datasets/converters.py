"""Writes a dataset as sharded TFRecords: atomically, resumably, in parallel.

One mechanism for every dataset. A dataset module's `convert(options)` reads
what the user has and returns a registry.Conversion: per split, the ordered
items and the number of shards, plus `to_example(item) -> tf.train.Example`.
This module then

- writes each shard under a hidden temporary name, flushes and fsyncs it and
  renames it into place (os.replace) when complete, so no record file is ever
  half-written, even after a power cut;
- skips shards that already exist when rerun with the same inputs and settings
  (recorded as a fingerprint in .<name>-conversion.json), so an interrupted
  conversion resumes (a kept shard is counted again first); other records
  matching the dataset's pattern are refused;
- fsyncs the directory, then writes <name>_dataset.json (sizes, classes, label
  names, and every shard's byte size, record count and digest, which readers
  check) and labels.txt (TF-Slim's file). <name>_dataset.json marks completion
  and belongs to that dataset alone: other datasets in the directory, and their
  metadata, are never touched, so a failed conversion leaves them readable;
- removes scratch directories and temporaries left by interrupted conversions.
"""
import concurrent.futures
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading

import numpy as np

import tf_compat  # noqa: F401
import tensorflow as tf

from datasets import dataset_factory
from datasets import dataset_utils
from datasets.registry import SourceOptions


def convert(dataset_name, dataset_dir, source_dir=None, download=False,
            num_shards=None, validation_fraction=0.1, seed=0, num_threads=None,
            stream=None, **source_options):
  """Converts `dataset_name` from `source_dir` (default `dataset_dir`) into
  `dataset_dir`; returns {split: num_samples}. `source_options` are the
  other fields of registry.SourceOptions (e.g. foreground_class_of_interest)."""
  try:
    info = dataset_factory.get_info(dataset_name)
  except ValueError as e:
    raise dataset_utils.ConversionError(str(e)) from None
  if info.convert is None:
    raise dataset_utils.ConversionError(
        "dataset '%s' is read by %s.get_split (a TF-Slim dataset module): its "
        'records are made by its own converter, not here' % (info.name, info.module))
  if num_shards is not None and num_shards < 1:
    raise dataset_utils.ConversionError('num_shards must be at least 1')
  unknown = set(source_options) - {f.name for f in dataclasses.fields(SourceOptions)}
  if unknown:
    raise TypeError('convert() got unknown source options: %s'
                    % ', '.join(sorted(unknown)))
  if not 0 <= validation_fraction < 1:
    raise dataset_utils.ConversionError(
        'validation_fraction must be in [0, 1), got %r' % validation_fraction)
  dataset_dir = os.path.abspath(dataset_utils.expand_path(dataset_dir))
  source_dir = os.path.abspath(dataset_utils.expand_path(source_dir) or dataset_dir)
  os.makedirs(dataset_dir, exist_ok=True)
  remove_abandoned_work_dirs(dataset_dir)
  # The pid in the name tells a later run whether its owner is still alive.
  with tempfile.TemporaryDirectory(prefix='%s%d-' % (WORK_PREFIX, os.getpid()),
                                   dir=dataset_dir) as work_dir:
    options = SourceOptions(
        source_dir=source_dir, work_dir=work_dir,
        download=download, num_shards=num_shards,
        validation_fraction=validation_fraction, seed=seed, **source_options)
    conversion = info.convert(options)
    return write(conversion, dataset_dir, num_threads=num_threads, stream=stream)


WORK_PREFIX = '.work-'


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except OSError:  # exists, owned by someone else
    return True
  return True


def remove_abandoned_work_dirs(dataset_dir):
  """Deletes the scratch directories (e.g. an extracted archive) of
  conversions that were killed; those of running conversions stay."""
  for name in os.listdir(dataset_dir):
    path = os.path.join(dataset_dir, name)
    if not name.startswith(WORK_PREFIX) or not os.path.isdir(path):
      continue
    pid = name[len(WORK_PREFIX):].split('-', 1)[0]
    if not pid.isdigit() or not _alive(int(pid)):
      shutil.rmtree(path, ignore_errors=True)


def write(conversion, dataset_dir, num_threads=None, stream=None):
  """Writes `conversion` into `dataset_dir`; returns {split: num_samples}."""
  info = dataset_factory.get_info(conversion.dataset_name)
  shard_paths = {
      split.name: [os.path.join(dataset_dir, info.shard_filename(
          split.name, shard, split.num_shards)) for shard in range(split.num_shards)]
      for split in conversion.splits}
  _claim(conversion, dataset_dir, shard_paths)
  for paths in shard_paths.values():  # temporaries of a killed run
    for path in paths:
      if os.path.exists(dataset_utils.temporary_path(path)):
        os.remove(dataset_utils.temporary_path(path))

  num_threads = num_threads or min(4, os.cpu_count() or 1)
  shards = {}
  for split in conversion.splits:
    shards[split.name] = _write_split(conversion, split, shard_paths[split.name],
                                      num_threads, stream or sys.stderr)
  # The renames must be on disk before the metadata that vouches for them.
  dataset_utils.fsync_directory(dataset_dir)
  dataset_utils.write_metadata(dataset_dir, conversion.dataset_name, shards,
                               conversion.num_classes, conversion.labels_to_names)
  dataset_utils.write_label_file(conversion.labels_to_names, dataset_dir)
  dataset_utils.fsync_directory(dataset_dir)
  return {split.name: len(split.items) for split in conversion.splits}


def _fingerprint(conversion):
  digest = hashlib.sha256()
  digest.update(repr((conversion.dataset_name, conversion.source_id,
                      conversion.num_classes,
                      sorted(conversion.labels_to_names.items()))).encode())
  for split in conversion.splits:
    digest.update(repr((split.name, split.num_shards, len(split.items))).encode())
    for item in split.items:
      digest.update(repr(item).encode())
  return digest.hexdigest()


def _claim(conversion, dataset_dir, shard_paths):
  """Refuses record files this conversion would not write (or would not reuse),
  then records its fingerprint so a rerun knows which shards it may skip."""
  name = conversion.dataset_name
  existing = set()
  for split in conversion.splits:
    existing.update(tf.io.gfile.glob(dataset_factory.split_file_pattern(
        name, split.name, dataset_dir)))
  foreign = existing - {p for paths in shard_paths.values() for p in paths}
  if foreign:
    raise dataset_utils.ConversionError(
        '%s already holds %s records this conversion does not write: %s; delete '
        'them or choose another --dataset_dir'
        % (dataset_dir, name, ', '.join(sorted(os.path.basename(p) for p in foreign))))

  fingerprint = _fingerprint(conversion)
  claim_path = os.path.join(dataset_dir, '.%s-conversion.json' % name)
  previous = None
  if os.path.exists(claim_path):
    with open(claim_path, encoding='utf-8') as f:
      previous = json.load(f).get('fingerprint')
  if previous == fingerprint:
    return
  if existing:
    raise dataset_utils.ConversionError(
        '%s already holds %s records from a conversion of other inputs or settings '
        '(%s); delete them or choose another --dataset_dir'
        % (dataset_dir, name, ', '.join(sorted(os.path.basename(p) for p in existing))))
  # A new conversion of this dataset; other datasets' files stay untouched.
  dataset_utils.atomic_write_text(
      claim_path, json.dumps({'dataset_name': name, 'fingerprint': fingerprint}) + '\n')


def _write_split(conversion, split, paths, num_threads, stream):
  """Writes the missing shards of `split`; returns every shard's metadata."""
  bounds = np.linspace(0, len(split.items), split.num_shards + 1).astype(int)
  expected = [int(bounds[i + 1] - bounds[i]) for i in range(len(paths))]
  todo = [(path, split.items[bounds[i]:bounds[i + 1]])
          for i, path in enumerate(paths) if not os.path.exists(path)]
  what = '%s %s' % (conversion.dataset_name, split.name)
  entries = {}
  for path, count in zip(paths, expected):
    if os.path.exists(path):  # kept from an interrupted run: check it
      entry = dataset_utils.shard_entry(path)
      if entry['records'] != count:
        raise dataset_utils.ConversionError(
            '%s holds %d records, this conversion puts %d there; delete it and '
            'run again' % (path, entry['records'], count))
      entries[path] = entry
  if len(todo) < len(paths):
    stream.write('%s: %d of %d shards already complete, skipped\n'
                 % (what, len(paths) - len(todo), len(paths)))
  if todo:
    progress = dataset_utils.Progress(what, sum(len(items) for _, items in todo),
                                      stream=stream)
    stop = threading.Event()
    pool = concurrent.futures.ThreadPoolExecutor(num_threads)
    futures = [pool.submit(_write_shard, path, items, conversion.to_example,
                           progress, stop) for path, items in todo]
    try:
      for future in concurrent.futures.as_completed(futures):
        entry = future.result()  # re-raises the first failure
        entries[os.path.join(os.path.dirname(paths[0]), entry['file'])] = entry
    except BaseException:
      # Abandon the other shards (also on Ctrl-C): they remove their temporaries.
      stop.set()
      for future in futures:
        future.cancel()
      raise
    finally:
      pool.shutdown(wait=True)
    progress.done()
  return [entries[path] for path in paths]


class _Stopped(Exception):
  """Another shard failed; this one gives up without writing its file."""


def _write_shard(path, items, to_example, progress, stop):
  """Writes one shard durably; returns its metadata entry."""
  tmp = dataset_utils.temporary_path(path)
  try:
    with tf.io.TFRecordWriter(tmp) as writer:
      for item in items:
        if stop.is_set():
          raise _Stopped()
        writer.write(to_example(item).SerializeToString())
        progress.add(1)
      writer.flush()
    with open(tmp, 'rb+') as f:  # the writer cannot fsync; its file is closed
      os.fsync(f.fileno())
    entry = dataset_utils.shard_entry(tmp, records=len(items))
    entry['file'] = os.path.basename(path)
    os.replace(tmp, path)
    return entry
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)
