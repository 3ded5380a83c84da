"""The parallel input pipeline: TF-Slim's queue readers, written with tf.data.

Pipeline: shard names (sorted; shuffled when shuffling) -> interleave over
`num_readers` shards -> shuffle serialized records -> repeat(num_epochs) ->
decode, check label, preprocess on `num_preprocessing_threads` -> batch ->
prefetch. JPEG records reach a preprocessing function that takes encoded
images undecoded (its attribute `takes_encoded_images` is the class to wrap
the bytes in, preprocessing/encoded_image.py; inception, vgg and cifarnet do),
so it decodes only the crop it keeps; other records, other functions and
`fused_decoding=False` (TF-Slim's order: decode all, then crop) get the
decoded uint8 image. Records are shuffled before decoding, so the buffer holds compact
encoded images: its default size is min(num_samples, 10000) records (about
1 GB for ImageNet JPEGs; pass shuffle_buffer_size to trade memory for mixing).
"""
import inspect

import tf_compat  # noqa: F401
import tensorflow as tf


# tf.data hands every map function to AutoGraph, which reads the source of
# each Python function it calls (decoding, the label check, the whole
# preprocessing) and rewrites Python control flow on tensors. Ours is graph
# code (tf.cond, no Python `if` on a tensor), so the rewrite changes nothing
# and costs every training and evaluation process about half a second of its
# start-up: the pipeline's functions are traced as written.
graph_code = tf.autograph.experimental.do_not_convert

DEFAULT_SHUFFLE_BUFFER = 10000
# TF-Slim's --num_readers and --num_preprocessing_threads, the defaults of
# every reading function and of the flags.
NUM_READERS = 4
NUM_PREPROCESSING_THREADS = 4


def make_dataset(descriptor, batch_size, preprocess_fn=None, is_training=True,
                 num_readers=NUM_READERS,
                 num_preprocessing_threads=NUM_PREPROCESSING_THREADS,
                 num_epochs=None,
                 shuffle=None, seed=None, deterministic=False, labels_offset=0,
                 drop_remainder=False, shuffle_buffer_size=None,
                 image_summaries=True, fused_decoding=True):
  """A tf.data.Dataset of (images, labels) batches for one dataset split.

  Args:
    descriptor: a dataset_factory.Dataset (what get_dataset returns).
    batch_size: images per batch.
    preprocess_fn: image (uint8 [H, W, C]) -> image; closes over the output size
      and casts. None casts to float32 and keeps the size. When the dataset
      has bounding boxes (ImageNet) and preprocess_fn takes a `bbox` keyword
      (or **kwargs), it gets the image's [1, N, 4] boxes.
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
    image_summaries: when preprocess_fn writes image summaries (TF-Slim's
      add_image_summaries), add them to the graph's summaries: a small
      pipeline of its own preprocesses one record each time the summary op
      runs (summaries made inside tf.data functions cannot leave them).
    fused_decoding: JPEGs go to a preprocess_fn that takes encoded images
      undecoded (see the module doc); False decodes every image whole first,
      TF-Slim's order, the reference the benchmark measures against.
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
  # The records are checked here, where they are first read (get_dataset
  # reads none): the metadata's shard list, not a glob, so files that merely
  # match the pattern (another conversion's, a stray copy) are never read.
  files = list(descriptor.check_files())
  use_boxes = bool(descriptor.has_boxes
                   and preprocess_fn is not None and _takes_bbox(preprocess_fn))

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

  encoded_type = getattr(preprocess_fn, 'takes_encoded_images', None)
  fused = bool(fused_decoding and encoded_type is not None
               and _decodes_examples(descriptor))

  def decode_and_preprocess(serialized, summaries=None, fused=fused):
    before = len(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES))
    boxes = None
    if fused:
      image, label, boxes = _parse_encoded(serialized, descriptor, use_boxes)
    elif use_boxes:
      image, label, boxes = descriptor.decode(serialized, with_boxes=True)
    else:
      image, label = descriptor.decode(serialized)
    label = label - labels_offset
    in_range = tf.logical_and(label >= 0, label < num_labels)
    check = tf.debugging.Assert(
        in_range, [tf.strings.format('label {} outside [0, {})', (label, num_labels))])
    with tf.control_dependencies([check]):
      label = tf.identity(label)
    kwargs = {'bbox': boxes} if use_boxes else {}
    if preprocess_fn is None:
      image = tf.cast(image, tf.float32)
    elif fused:
      contents, is_jpeg = image
      # Both branches preprocess: a PNG (or raw) record is decoded whole.
      image = tf.cond(
          is_jpeg,
          lambda: preprocess_fn(encoded_type(contents, descriptor.channels),
                                **kwargs),
          lambda: preprocess_fn(descriptor.decode(serialized)[0], **kwargs))
    else:
      image = preprocess_fn(image, **kwargs)
    if summaries is not None:
      summaries.extend(tf.compat.v1.get_collection(
          tf.compat.v1.GraphKeys.SUMMARIES)[before:])
    return image, label

  traced = []
  dataset = dataset.map(graph_code(lambda s: decode_and_preprocess(s, traced)),
                        num_parallel_calls=num_preprocessing_threads)
  if image_summaries and (traced or fused):
    # Summaries made in the fused pipeline's tf.cond branches stay there:
    # the summary pipeline preprocesses in TF-Slim's order (and adds
    # nothing if that makes no summaries).
    _add_summary_pipeline(
        files, lambda s, made: decode_and_preprocess(s, made, fused=False),
        seed)
  dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
  dataset = dataset.prefetch(tf.data.AUTOTUNE)
  # Only training may take elements as they finish: evaluation and
  # prediction keep the records' order.
  return dataset.with_options(pipeline_options(
      deterministic or not is_training, num_preprocessing_threads))


def pipeline_options(deterministic, num_preprocessing_threads):
  """tf.data options, set on purpose rather than left to the defaults.

  In a session the pipeline's functions otherwise run on the session's
  inter-op pool (as many threads as cores), queued behind the network's ops:
  a private pool of num_preprocessing_threads threads lets decoding and
  preprocessing run beside the network, and one thread per element (the
  parallel map is the parallelism) keeps each decode off the intra-op pool
  the network's convolutions use. Autotuning stays on for prefetch and
  interleave buffer sizes.
  """
  options = tf.data.Options()
  options.deterministic = bool(deterministic)
  options.autotune.enabled = True
  options.threading.private_threadpool_size = int(num_preprocessing_threads)
  options.threading.max_intra_op_parallelism = 1
  return options


def _takes_bbox(fn):
  try:
    parameters = inspect.signature(fn).parameters.values()
  except (TypeError, ValueError):
    return False
  return any(p.name == 'bbox' or p.kind == p.VAR_KEYWORD for p in parameters)


def _add_summary_pipeline(files, decode_and_preprocess, seed):
  """Adds to the graph's SUMMARIES the image summaries of one freshly
  preprocessed record per evaluation (what TF-Slim's in-graph preprocessing
  wrote at every summary step)."""
  any_made = []

  def summarize(serialized):
    made = []
    decode_and_preprocess(serialized, made)
    any_made.extend(made)
    if not made:
      return tf.constant(b'')
    return tf.compat.v1.summary.merge(made)

  records = tf.data.TFRecordDataset(files).repeat().shuffle(64, seed=seed)
  summaries = records.map(graph_code(summarize))  # traced: any_made is known
  if not any_made:
    return
  summary = tf.compat.v1.data.make_one_shot_iterator(summaries).get_next()
  tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.SUMMARIES, summary)


def _decodes_examples(descriptor):
  """True when the descriptor's records hold TF-Slim's keys, read by
  dataset_factory.example_decoder (our converters' and TF-Slim's), whose
  image bytes the fused path can read itself. Fixed-size datasets keep
  their decoder: it gives the static shape."""
  return (getattr(descriptor, 'tf_slim_records', False)
          and not descriptor.image_size)


def _parse_encoded(serialized, descriptor, with_boxes):
  """((image bytes, is a JPEG), label, [1, N, 4] boxes or None) of one
  record, undecoded."""
  parsed = descriptor.parse_encoded(serialized, with_boxes)
  contents = parsed['image/encoded']
  # 'raw' pixels could begin like a JPEG: the format decides for them.
  is_jpeg = tf.logical_and(
      tf.not_equal(tf.strings.lower(parsed['image/format']), 'raw'),
      tf.io.is_jpeg(contents))
  return (contents, is_jpeg), parsed['image/class/label'], parsed.get('boxes')
