"""The parallel input pipeline: TF-Slim's queue readers, written with tf.data.

Pipeline: shard names (sorted; shuffled when shuffling) -> interleave over
`num_readers` shards -> shuffle serialized records -> repeat(num_epochs) ->
decode, check label, preprocess on `num_preprocessing_threads` -> batch ->
prefetch. Records are shuffled before decoding, so the buffer holds compact
encoded images: its default size is min(num_samples, 10000) records (about
1 GB for ImageNet JPEGs; pass shuffle_buffer_size to trade memory for mixing).
"""
import tf_compat  # noqa: F401
import tensorflow as tf

DEFAULT_SHUFFLE_BUFFER = 10000


def make_dataset(descriptor, batch_size, preprocess_fn=None, is_training=True,
                 num_readers=4, num_preprocessing_threads=4, num_epochs=None,
                 shuffle=None, seed=None, deterministic=False, labels_offset=0,
                 drop_remainder=False, shuffle_buffer_size=None):
  """A tf.data.Dataset of (images, labels) batches for one dataset split.

  Args:
    descriptor: a dataset_factory.DatasetDescriptor.
    batch_size: images per batch.
    preprocess_fn: image (uint8 [H, W, C]) -> image; closes over the output size
      and casts. None casts to float32 and keeps the size.
    is_training: the default for `shuffle`.
    num_readers: shards read in parallel (interleave cycle length).
    num_preprocessing_threads: parallel calls of decode + preprocess.
    num_epochs: passes over the data; None repeats forever.
    shuffle: shuffle shard order and records; defaults to `is_training`.
    seed: shuffle seed; deterministic=True uses 0 when it is None.
    deterministic: same order on every run (parallel stages keep their order).
      Random ops inside preprocess_fn are the caller's to seed.
    labels_offset: subtracted from every label (e.g. 1 to drop ImageNet's
      'background' class); a label outside [0, num_classes - labels_offset)
      fails at run time with a message naming it.
    drop_remainder: drop a final partial batch (static batch dimension).
    shuffle_buffer_size: records in the shuffle buffer (see module doc).
  """
  for arg, value in (('batch_size', batch_size), ('num_readers', num_readers),
                     ('num_preprocessing_threads', num_preprocessing_threads)):
    if int(value) < 1:
      raise ValueError('%s must be at least 1, got %r' % (arg, value))
  num_labels = descriptor.num_classes - labels_offset
  if labels_offset < 0 or num_labels < 1:
    raise ValueError('labels_offset %d leaves no classes of the %d of %s'
                     % (labels_offset, descriptor.num_classes, descriptor.name))
  if shuffle is None:
    shuffle = is_training
  if deterministic and seed is None:
    seed = 0
  files = sorted(tf.io.gfile.glob(descriptor.file_pattern))
  if not files:
    raise ValueError("no files match '%s'" % descriptor.file_pattern)

  dataset = tf.data.Dataset.from_tensor_slices(files)
  if shuffle:
    dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
  dataset = dataset.interleave(
      tf.data.TFRecordDataset, cycle_length=min(num_readers, len(files)),
      block_length=1, num_parallel_calls=min(num_readers, len(files)))
  if shuffle:
    buffer_size = shuffle_buffer_size or min(descriptor.num_samples,
                                             DEFAULT_SHUFFLE_BUFFER)
    dataset = dataset.shuffle(max(int(buffer_size), 1), seed=seed,
                              reshuffle_each_iteration=True)
  dataset = dataset.repeat(num_epochs)

  def decode_and_preprocess(serialized):
    image, label = descriptor.decoder(serialized)
    label = label - labels_offset
    in_range = tf.logical_and(label >= 0, label < num_labels)
    check = tf.debugging.Assert(
        in_range, [tf.strings.format('label {} outside [0, {})', (label, num_labels))])
    with tf.control_dependencies([check]):
      label = tf.identity(label)
    if preprocess_fn is None:
      image = tf.cast(image, tf.float32)
    else:
      image = preprocess_fn(image)
    return image, label

  dataset = dataset.map(decode_and_preprocess,
                        num_parallel_calls=num_preprocessing_threads)
  dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
  dataset = dataset.prefetch(tf.data.AUTOTUNE)
  options = tf.data.Options()
  options.deterministic = bool(deterministic)
  return dataset.with_options(options)
