"""dataset_factory descriptors and the tf.data reader, on small converted datasets."""
import dataclasses
import fnmatch
import inspect
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from datasets import converters
from datasets import dataset_factory
from datasets import dataset_utils
from datasets import reader

tf1 = tf.compat.v1


@pytest.fixture(scope='module')
def digits_dir(tmp_path_factory):
  """digits converted into 3 shards per split (1,437 train, 360 validation)."""
  path = str(tmp_path_factory.mktemp('digits'))
  converters.convert('digits', path, num_shards=3)
  return path


def write_records(dataset_dir, name, split, labels, num_classes, size=(4, 5),
                  num_shards=1):
  """Records of gray images whose first pixel is the record's index, with
  `labels`; plus their metadata, as our converters write them."""
  spec = dataset_factory.get_info(name)
  os.makedirs(dataset_dir, exist_ok=True)
  bounds = np.linspace(0, len(labels), num_shards + 1).astype(int)
  paths = []
  for shard in range(num_shards):
    path = os.path.join(dataset_dir, spec.shard_filename(split, shard, num_shards))
    paths.append(path)
    with tf.io.TFRecordWriter(path) as writer:
      for index in range(bounds[shard], bounds[shard + 1]):
        pixels = np.zeros(size, np.uint8)
        pixels[0, 0] = index
        writer.write(dataset_utils.image_to_tfexample(
            dataset_utils.encode_png(pixels), b'png', size[0], size[1],
            labels[index]).SerializeToString())
  dataset_utils.describe_records(dataset_dir, name, {split: paths}, num_classes)


def run(dataset, max_batches=None):
  """The batches of `dataset` (built in the current graph) as numpy arrays."""
  next_batch = tf1.data.make_one_shot_iterator(dataset).get_next()
  batches = []
  with tf1.Session() as sess:
    while max_batches is None or len(batches) < max_batches:
      try:
        batches.append(sess.run(next_batch))
      except tf.errors.OutOfRangeError:
        break
  return batches


def read(descriptor, max_batches=None, **kwargs):
  with tf.Graph().as_default():
    return run(reader.make_dataset(descriptor, **kwargs), max_batches)


# --- descriptors ----------------------------------------------------------------

def test_descriptor_of_converted_digits(digits_dir):
  descriptor = dataset_factory.get_dataset('digits', 'validation', digits_dir)
  assert descriptor.num_samples == 360
  assert descriptor.num_classes == 10
  assert descriptor.channels == 1
  assert descriptor.labels_to_names[3] == 'three'
  assert descriptor.file_pattern == os.path.join(
      os.path.abspath(digits_dir), 'digits_validation-*.tfrecord')
  with pytest.raises(dataclasses.FrozenInstanceError):
    descriptor.num_samples = 1


def test_every_shard_name_matches_its_pattern_and_temporaries_do_not():
  for name in dataset_factory.list_datasets():
    spec = dataset_factory.get_info(name)
    for split in spec.splits:
      shard = spec.shard_filename(split, 3, 10)
      assert fnmatch.fnmatch(shard, spec.read_pattern % split), name
      temporary = os.path.basename(dataset_utils.temporary_path('/d/' + shard))
      assert not fnmatch.fnmatch(temporary, spec.read_pattern % split), name
      for other in spec.splits:
        if other != split:
          assert not fnmatch.fnmatch(shard, spec.read_pattern % other), name


@pytest.mark.parametrize('name, split, filename, num_samples, num_classes', [
    ('mnist', 'train', 'mnist_train.tfrecord', 60000, 10),
    ('cifar10', 'test', 'cifar10_test.tfrecord', 10000, 10),
    ('flowers', 'validation', 'flowers_validation_00000-of-00005.tfrecord', 350, 5),
    ('imagenet', 'train', 'train-00000-of-01024', 1281167, 1001),
])
def test_tf_slim_records_get_the_published_sizes(tmp_path, name, split, filename,
                                                 num_samples, num_classes):
  open(os.path.join(str(tmp_path), filename), 'w').close()
  descriptor = dataset_factory.get_dataset(name, split, str(tmp_path))
  assert (descriptor.num_samples, descriptor.num_classes) == (num_samples, num_classes)
  assert descriptor.labels_to_names == {}


def test_unknown_dataset_name_suggests_the_closest(tmp_path):
  with pytest.raises(ValueError, match=r"unknown dataset_name 'cifar'; did you mean "
                     r"'cifar10'\? \(known: cifar10, digits, flowers, image_folder"):
    dataset_factory.get_dataset('cifar', 'train', str(tmp_path))


def test_unknown_split_names_the_valid_ones(digits_dir):
  with pytest.raises(ValueError, match="unknown split_name 'test' for dataset 'digits' "
                     r"\(valid: train, validation\)"):
    dataset_factory.get_dataset('digits', 'test', digits_dir)


def start_reading(descriptor, how):
  """Builds, in a graph of its own, what reads `descriptor` first: the
  tf.data reader's pipeline or TF-Slim's DatasetDataProvider."""
  import tf_slim as slim  # pylint: disable=import-outside-toplevel
  with tf.Graph().as_default():
    if how == 'tf.data':
      reader.make_dataset(descriptor, batch_size=1)
    else:
      slim.dataset_data_provider.DatasetDataProvider(descriptor, num_readers=1)


READERS = ('tf.data', 'DatasetDataProvider')


def test_get_dataset_reads_only_the_metadata(digits_dir, tmp_path, monkeypatch):
  """As TF-Slim's get_dataset: sizes, classes and names from the metadata
  (digits_dataset.json, alone here: the records stayed behind), no record
  listed, measured or opened."""
  shutil.copy(os.path.join(digits_dir, 'digits_dataset.json'), str(tmp_path))

  def refused(*args, **kwargs):
    raise AssertionError('get_dataset read the records: %r' % (args,))

  monkeypatch.setattr(tf.io.gfile, 'glob', refused)
  monkeypatch.setattr(tf.io.gfile, 'stat', refused)
  monkeypatch.setattr(dataset_utils, 'shard_digest', refused)
  dataset = dataset_factory.get_dataset('digits', 'train', str(tmp_path))
  assert (dataset.num_samples, dataset.num_classes) == (1437, 10)
  assert dataset.labels_to_names[3] == 'three'
  assert len(dataset.shards) == 3


def test_imagenet_classes_are_known_without_its_records(tmp_path):
  """TF-Slim's export_inference_graph.py asks get_dataset('imagenet',
  'train', FLAGS.dataset_dir) only for num_classes, '' by default."""
  for dataset_dir in ('', str(tmp_path), str(tmp_path / 'nowhere')):
    dataset = dataset_factory.get_dataset('imagenet', 'train', dataset_dir)
    assert (dataset.num_classes, dataset.num_samples) == (1001, 1281167)


@pytest.mark.parametrize('how', READERS)
def test_missing_dataset_dir_says_how_to_create_it_when_read(tmp_path, how):
  missing = str(tmp_path / 'nowhere')
  dataset = dataset_factory.get_dataset('mnist', 'train', missing)
  with pytest.raises(ValueError, match=re.escape(
      "dataset_dir '%s' does not exist; run download_and_convert_data.py "
      "--dataset_name=mnist --dataset_dir=%s first" % (missing, missing))):
    start_reading(dataset, how)


@pytest.mark.parametrize('how', READERS)
def test_no_matching_files_names_the_pattern_when_read(tmp_path, how):
  pattern = os.path.join(str(tmp_path), 'flowers_train_*.tfrecord')
  dataset = dataset_factory.get_dataset('flowers', 'train', str(tmp_path))
  with pytest.raises(ValueError, match=re.escape("no files match '%s'" % pattern)):
    start_reading(dataset, how)


def test_image_folder_without_metadata_is_an_error(tmp_path):
  records = os.path.join(str(tmp_path), 'image_folder_train-00000-of-00001.tfrecord')
  open(records, 'w').close()
  with pytest.raises(ValueError, match='image_folder_dataset.json is missing'):
    dataset_factory.get_dataset('image_folder', 'train', str(tmp_path))


def test_custom_file_pattern_takes_the_split_name(digits_dir):
  descriptor = dataset_factory.get_dataset('digits', 'train', digits_dir,
                                           file_pattern='digits_%s-00001-*')
  assert descriptor.file_pattern.endswith('digits_train-00001-*')


# --- reader ---------------------------------------------------------------------

def test_reader_yields_float_images_and_int64_labels(digits_dir):
  descriptor = dataset_factory.get_dataset('digits', 'train', digits_dir)
  with tf.Graph().as_default():
    dataset = reader.make_dataset(descriptor, batch_size=32, drop_remainder=True)
    images, labels = tf1.data.get_output_shapes(dataset)
    assert images.as_list() == [32, 8, 8, 1] and labels.as_list() == [32]
    (images, labels), = run(dataset, max_batches=1)
  assert images.dtype == np.float32 and images.shape == (32, 8, 8, 1)
  assert labels.dtype == np.int64 and set(labels) <= set(range(10))
  assert 0 <= images.min() and images.max() <= 255 and images.max() > 16


def _under_autograph():
  return any('__autograph_generated' in frame.filename
             for frame in inspect.stack(0))


def test_the_pipeline_traces_its_functions_as_written(digits_dir):
  """Without AutoGraph's source rewrite (reader.graph_code): the
  preprocessing is traced as written. The control: tf.data's own map
  rewrites the same function."""
  descriptor = dataset_factory.get_dataset('digits', 'train', digits_dir)
  seen = []

  def preprocess(image):
    seen.append(_under_autograph())
    return tf.cast(image, tf.float32)

  with tf.Graph().as_default():
    reader.make_dataset(descriptor, batch_size=2, preprocess_fn=preprocess)
    tf.data.Dataset.range(2).map(lambda x: preprocess(x))
  assert seen == [False, True]


def test_preprocess_fn_maps_each_image(digits_dir):
  descriptor = dataset_factory.get_dataset('digits', 'train', digits_dir)

  def preprocess(image):
    return tf.image.resize(tf.cast(image, tf.float32) / 255.0, [4, 6])

  (images, _), = read(descriptor, max_batches=1, batch_size=5,
                      preprocess_fn=preprocess)
  assert images.shape == (5, 4, 6, 1) and images.max() <= 1.0


def test_one_epoch_yields_every_record_once_for_any_parallelism(digits_dir):
  descriptor = dataset_factory.get_dataset('digits', 'validation', digits_dir)
  contents = []
  for readers, threads, shuffle in ((1, 1, False), (3, 2, True), (8, 4, True)):
    batches = read(descriptor, batch_size=100, num_readers=readers,
                   num_preprocessing_threads=threads, num_epochs=1, shuffle=shuffle)
    assert [len(b[1]) for b in batches] == [100, 100, 100, 60]
    images = np.concatenate([b[0] for b in batches])
    labels = np.concatenate([b[1] for b in batches])
    contents.append(sorted(zip(labels.tolist(), map(bytes, images.astype(np.uint8)))))
  assert contents[0] == contents[1] == contents[2]


def test_deterministic_mode_repeats_the_same_shuffled_order(digits_dir):
  descriptor = dataset_factory.get_dataset('digits', 'train', digits_dir)
  runs = [read(descriptor, max_batches=6, batch_size=50, num_readers=3,
               num_preprocessing_threads=3, deterministic=True) for _ in range(2)]
  for (images_a, labels_a), (images_b, labels_b) in zip(*runs):
    np.testing.assert_array_equal(images_a, images_b)
    np.testing.assert_array_equal(labels_a, labels_b)
  unshuffled = read(descriptor, max_batches=1, batch_size=50, num_readers=3,
                    deterministic=True, shuffle=False)
  assert not np.array_equal(runs[0][0][1], unshuffled[0][1])  # it did shuffle


def test_evaluation_order_is_the_record_order(tmp_path):
  write_records(str(tmp_path), 'image_folder', 'validation', [0, 1, 0, 1, 1, 0, 1],
                num_classes=2, num_shards=3)
  descriptor = dataset_factory.get_dataset('image_folder', 'validation', str(tmp_path))
  batches = read(descriptor, batch_size=7, is_training=False, num_readers=1,
                 num_epochs=1, deterministic=True)
  assert batches[0][0][:, 0, 0, 0].tolist() == list(range(7))


def test_num_epochs_repeats_the_data(tmp_path):
  write_records(str(tmp_path), 'image_folder', 'train', [0, 1, 1], num_classes=2)
  descriptor = dataset_factory.get_dataset('image_folder', 'train', str(tmp_path))
  batches = read(descriptor, batch_size=2, num_epochs=2)
  assert sum(len(labels) for _, labels in batches) == 6


def test_labels_offset_is_subtracted(tmp_path):
  # ImageNet-style labels: 0 is background, classes are 1..3.
  write_records(str(tmp_path), 'image_folder', 'train', [1, 2, 3, 3], num_classes=4)
  descriptor = dataset_factory.get_dataset('image_folder', 'train', str(tmp_path))
  (_, labels), = read(descriptor, batch_size=4, labels_offset=1, shuffle=False,
                      num_readers=1, num_epochs=1)
  assert labels.tolist() == [0, 1, 2, 2]


@pytest.mark.parametrize('labels, offset, message', [
    ([3, 12, 4], 0, r'label 12 outside \[0, 10\)'),
    ([0, 5], 1, r'label -1 outside \[0, 9\)'),
])
def test_label_out_of_range_fails_naming_it(tmp_path, labels, offset, message):
  write_records(str(tmp_path), 'image_folder', 'train', labels, num_classes=10)
  descriptor = dataset_factory.get_dataset('image_folder', 'train', str(tmp_path))
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    read(descriptor, batch_size=1, labels_offset=offset, shuffle=False, num_epochs=1)


def test_bad_arguments_are_refused_early(digits_dir):
  descriptor = dataset_factory.get_dataset('digits', 'train', digits_dir)
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='batch_size must be at least 1'):
      reader.make_dataset(descriptor, batch_size=0)
    with pytest.raises(ValueError, match='num_readers must be at least 1'):
      reader.make_dataset(descriptor, batch_size=1, num_readers=0)
    with pytest.raises(ValueError, match='labels_offset 10 leaves no classes'):
      reader.make_dataset(descriptor, batch_size=1, labels_offset=10)


# --- one Dataset, read by TF-Slim's queues and by the tf.data reader ----------

def _queue_read(dataset, count):
  """`count` (image, label) pairs through TF-Slim's own path, as its scripts
  read: DatasetDataProvider (parallel_reader's queues) unshuffled, one reader."""
  import tf_slim as slim  # pylint: disable=import-outside-toplevel
  with tf.Graph().as_default():
    provider = slim.dataset_data_provider.DatasetDataProvider(
        dataset, num_readers=1, shuffle=False, common_queue_capacity=32,
        common_queue_min=1)
    image, label = provider.get(['image', 'label'])
    pairs = []
    with tf1.Session() as sess:
      coordinator = tf1.train.Coordinator()
      threads = tf1.train.start_queue_runners(sess, coord=coordinator)
      for _ in range(count):
        pairs.append(sess.run([image, label]))
      coordinator.request_stop()
      coordinator.join(threads, stop_grace_period_secs=5)
  return pairs


def test_get_dataset_is_a_tf_slim_dataset_with_tf_slim_items(digits_dir):
  import tf_slim as slim  # pylint: disable=import-outside-toplevel
  dataset = dataset_factory.get_dataset('digits', 'validation', digits_dir)
  assert isinstance(dataset, slim.dataset.Dataset)
  assert dataset.data_sources == list(dataset.files) and len(dataset.files) == 3
  assert dataset.reader is tf1.TFRecordReader
  assert sorted(dataset.decoder.list_items()) == ['image', 'label']
  assert sorted(dataset.items_to_descriptions) == ['image', 'label']
  assert (dataset.num_samples, dataset.num_classes) == (360, 10)
  assert dataset.labels_to_names[7] == 'seven'


def test_tf_slim_queues_and_the_reader_give_the_same_images_and_labels(digits_dir):
  """One shard, read in order both ways: the same records decode to the same
  pixels and labels (TF-Slim's DatasetDataProvider against reader.py)."""
  shard = os.path.basename(dataset_factory.get_dataset(
      'digits', 'validation', digits_dir).files[0])
  dataset = dataset_factory.get_dataset('digits', 'validation', digits_dir,
                                        file_pattern=shard)
  theirs = _queue_read(dataset, dataset.num_samples)
  ours = read(dataset, batch_size=1, num_epochs=1, shuffle=False,
              deterministic=True, image_summaries=False)
  assert len(ours) == dataset.num_samples == len(theirs) == 120
  for (their_image, their_label), (our_images, our_labels) in zip(theirs, ours):
    assert their_image.dtype == np.uint8 and their_image.shape == (8, 8, 1)
    np.testing.assert_array_equal(their_image.astype(np.float32), our_images[0])
    assert their_label == our_labels[0]
  assert len({int(label) for _, label in theirs}) == 10


def _first_record(dataset):
  return tf1.data.make_one_shot_iterator(
      tf.data.TFRecordDataset(list(dataset.files)).take(1)).get_next()


def test_decoder_is_tf_slims_example_decoder(digits_dir):
  import tf_slim as slim  # pylint: disable=import-outside-toplevel
  dataset = dataset_factory.get_dataset('digits', 'validation', digits_dir)
  assert isinstance(dataset.decoder, slim.tfexample_decoder.TFExampleDecoder)
  assert type(dataset.decoder).__name__ == 'TFExampleDecoder'
  with tf.Graph().as_default():
    image, label = dataset.decoder.decode(_first_record(dataset),
                                          ['image', 'label'])
    with tf1.Session() as sess:
      image, label = sess.run([image, label])
  assert image.shape == (8, 8, 1) and 0 <= label < 10


def test_decoder_called_as_before_gives_the_image_and_label_of_decode(digits_dir):
  """This project's earlier API: `image, label = dataset.decoder(serialized)`."""
  dataset = dataset_factory.get_dataset('digits', 'validation', digits_dir)
  with tf.Graph().as_default():
    serialized = _first_record(dataset)
    called = dataset.decoder(serialized)
    decoded = dataset.decode(serialized)
    assert [t.dtype for t in called] == [tf.uint8, tf.int64]
    assert called[1].shape.rank == 0
    with tf1.Session() as sess:
      called, decoded = sess.run([called, decoded])
  np.testing.assert_array_equal(called[0], decoded[0])
  assert called[1] == decoded[1]
