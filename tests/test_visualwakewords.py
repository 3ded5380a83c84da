"""Visual Wake Words from a COCO tree, as TF-Slim builds it and reads it.

The COCO trees are synthetic (tests/coco_tree.py): real JPEGs, COCO's
annotation files with COCO's quirks. Labels are checked against TF-Slim's
rule written plainly (coco_tree.tf_slim_labels) and against what each
special image was drawn to be.
"""
import hashlib
import http.server
import io
import json
import os
import re
import shutil
import threading
import zipfile

import numpy as np
import PIL.Image
import pytest
import tensorflow as tf
import tf_slim as slim
from absl import flags as absl_flags

import download_and_convert_data
from coco_tree import tf_slim_labels, write_coco_tree
from datasets import coco
from datasets import converters
from datasets import dataset_factory
from datasets import dataset_utils
from datasets import reader
from datasets import visualwakewords

tf1 = tf.compat.v1
NAME = 'visualwakewords'
NUM_TRAIN, NUM_VAL = 16, 8
FEATURES = {
    'image/height', 'image/width', 'image/filename', 'image/source_id',
    'image/key/sha256', 'image/encoded', 'image/format', 'image/class/label',
    'image/class/text', 'image/object/bbox/xmin', 'image/object/bbox/xmax',
    'image/object/bbox/ymin', 'image/object/bbox/ymax', 'image/object/area'}


@pytest.fixture(scope='module')
def tree(tmp_path_factory):
  """A COCO 2014 tree: 16 train images (the special cases first), 8 val."""
  root = str(tmp_path_factory.mktemp('coco'))
  return write_coco_tree(root, num_train=NUM_TRAIN, num_val=NUM_VAL)


@pytest.fixture(scope='module')
def converted(tree, tmp_path_factory):
  """The tree converted with TF-Slim's defaults (person, 0.005)."""
  out = str(tmp_path_factory.mktemp('vww'))
  sizes = converters.convert(NAME, out, source_dir=tree['root'])
  return out, sizes


def copy_tree(tree, destination):
  shutil.copytree(tree['root'], str(destination))
  return str(destination)


def examples(dataset_dir, split):
  """{file name: tf.train.Example} of a split's records, and the shard names."""
  files = sorted(tf.io.gfile.glob(os.path.join(dataset_dir, '%s.record-*' % split)))
  found = {}
  for path in files:
    for record in tf1.io.tf_record_iterator(path):
      example = tf.train.Example.FromString(record)
      found[feature(example, 'image/filename').decode()] = example
  return found, [os.path.basename(p) for p in files]


def feature(example, key):
  value = example.features.feature[key]
  kind = value.WhichOneof('kind')
  values = list(getattr(value, kind).value) if kind else []
  if key.startswith('image/object/'):
    return values
  return values[0]


def load_json(path):
  with open(path, encoding='utf-8') as f:
    return json.load(f)


def labels_of(dataset_dir, split):
  found, _ = examples(dataset_dir, split)
  return {name: feature(e, 'image/class/label') for name, e in found.items()}


# --- labels -----------------------------------------------------------------------

def test_labels_follow_tf_slims_rule(tree, converted):
  out, sizes = converted
  assert sizes == {'train': NUM_TRAIN, 'val': NUM_VAL}
  for split in ('train', 'val'):
    assert labels_of(out, split) == tf_slim_labels(tree['annotations'][split]) == (
        tree['labels'][split])
  special = tree['special']
  expected = {'no_annotations': 0, 'person': 1, 'crowd_person': 1, 'tiny_person': 0,
              'at_threshold': 0, 'above_threshold': 1, 'dog_only': 0,
              'grayscale': 1, 'cmyk': 0}
  train = labels_of(out, 'train')
  assert {case: train[special[case]] for case in expected} == expected
  val = labels_of(out, 'val')
  assert (val[special['val_no_annotations']], val[special['val_person']]) == (0, 1)


def test_threshold_is_strict_and_counts_relative_area(tree):
  path = tree['annotations']['train']
  special = tree['special']
  names = dict(enumerate(coco.load_index(path, 'person', 0.005).file_names))

  def labels(threshold):
    index = coco.load_index(path, 'person', threshold, stream=io.StringIO())
    return {names[i]: int(label) for i, label in enumerate(index.labels)}

  assert labels(0.005)[special['at_threshold']] == 0  # area / (h * w) == 0.005
  assert labels(0.0049)[special['at_threshold']] == 1
  assert labels(0.005)[special['tiny_person']] == 0  # 0.2% of the image
  assert labels(0.0)[special['tiny_person']] == 1
  assert labels(0.5)[special['person']] == 0
  for threshold in (0.0, 0.0049, 0.005, 0.05):
    assert labels(threshold) == tf_slim_labels(path, 'person', threshold)


def test_another_category_of_interest(tree, tmp_path):
  out = str(tmp_path)
  converters.convert(NAME, out, source_dir=tree['root'],
                     foreground_class_of_interest='dog')
  for split in ('train', 'val'):
    assert labels_of(out, split) == tf_slim_labels(tree['annotations'][split], 'dog')
  assert labels_of(out, 'train')[tree['special']['dog_only']] == 1
  with open(os.path.join(out, 'labels.txt')) as f:
    assert f.read() == '0:background\n1:dog\n'
  assert dataset_factory.get_dataset(NAME, 'val', out).labels_to_names == {
      0: 'background', 1: 'dog'}


def test_index_keeps_only_numbers_per_image(tree):
  index = coco.load_index(tree['annotations']['train'], 'person', 0.005,
                          stream=io.StringIO())
  assert len(index) == NUM_TRAIN and index.category_id == 1
  assert index.num_annotations == len(load_json(tree['annotations']['train'])['annotations'])
  for array in (index.image_ids, index.heights, index.widths, index.labels,
                index.box_offsets):
    assert array.dtype == np.int64
  assert index.boxes.dtype == np.float64 and index.boxes.shape[1] == 4
  assert index.box_offsets[-1] == len(index.boxes) == len(index.areas)
  # An image has boxes exactly when it is labelled 1.
  np.testing.assert_array_equal(np.diff(index.box_offsets) > 0, index.labels == 1)


# --- records ----------------------------------------------------------------------

def test_records_hold_tf_slims_features_and_the_files_bytes(tree, converted):
  out, _ = converted
  found, _ = examples(out, 'train')
  content = load_json(tree['annotations']['train'])
  images = {image['file_name']: image for image in content['images']}
  for name, example in found.items():
    assert set(example.features.feature) == FEATURES
    with open(os.path.join(tree['image_dirs']['train'], name), 'rb') as f:
      data = f.read()
    assert feature(example, 'image/encoded') == data  # not re-encoded
    assert feature(example, 'image/format') == b'jpeg'
    assert feature(example, 'image/key/sha256') == hashlib.sha256(data).hexdigest().encode()
    assert feature(example, 'image/source_id') == str(images[name]['id']).encode()
    assert (feature(example, 'image/height'), feature(example, 'image/width')) == (
        tree['sizes'][name])
    label = feature(example, 'image/class/label')
    assert feature(example, 'image/class/text') == (b'person' if label else b'background')


def test_records_hold_the_boxes_and_areas_that_count(tree, converted):
  out, _ = converted
  found, _ = examples(out, 'train')
  content = load_json(tree['annotations']['train'])
  image = next(i for i in content['images']
               if i['file_name'] == tree['special']['person'])
  persons = [a for a in content['annotations']
             if a['image_id'] == image['id'] and a['category_id'] == 1]
  assert len(persons) == 2  # a big one and a tiny one: the big one counts
  big = max(persons, key=lambda a: a['area'])
  x, y, w, h = big['bbox']
  height, width = image['height'], image['width']
  example = found[image['file_name']]
  for key, value in (('xmin', x / width), ('xmax', (x + w) / width),
                     ('ymin', y / height), ('ymax', (y + h) / height)):
    np.testing.assert_allclose(feature(example, 'image/object/bbox/' + key),
                               [value], rtol=1e-6)
  np.testing.assert_allclose(feature(example, 'image/object/area'), [big['area']],
                             rtol=1e-6)
  for case in ('no_annotations', 'tiny_person', 'dog_only'):
    assert feature(found[tree['special'][case]], 'image/object/bbox/xmin') == []
  assert len(feature(found[tree['special']['crowd_person']],
                     'image/object/area')) == 1


def test_file_names_and_metadata(converted):
  out, _ = converted
  info = dataset_factory.get_info(NAME)
  assert info.shard_filename('train', 0, 100) == 'train.record-00000-of-00100'
  assert info.shard_filename('val', 9, 10) == 'val.record-00009-of-00010'
  assert visualwakewords.DEFAULT_SHARDS == {'train': 100, 'val': 10}  # TF-Slim's
  _, train_files = examples(out, 'train')
  _, val_files = examples(out, 'val')
  # TF-Slim's 100 and 10, capped at one image per shard.
  assert train_files == ['train.record-%05d-of-00016' % i for i in range(16)]
  assert val_files == ['val.record-%05d-of-00008' % i for i in range(8)]
  metadata = dataset_utils.read_metadata(out, NAME)
  assert metadata['num_classes'] == 2
  assert metadata['labels_to_names'] == {'0': 'background', '1': 'person'}
  assert {s: v['num_samples'] for s, v in metadata['splits'].items()} == {
      'train': NUM_TRAIN, 'val': NUM_VAL}
  with open(os.path.join(out, 'labels.txt')) as f:
    assert f.read() == '0:background\n1:person\n'


def test_num_shards_flag_sets_the_shard_count(tree, tmp_path):
  converters.convert(NAME, str(tmp_path), source_dir=tree['root'], num_shards=3)
  assert examples(str(tmp_path), 'train')[1] == [
      'train.record-0000%d-of-00003' % i for i in range(3)]


# --- reading ----------------------------------------------------------------------

def provider_read(dataset, count, items=('image', 'label', 'object/bbox')):
  """`count` records through TF-Slim's DatasetDataProvider (its queues)."""
  with tf.Graph().as_default():
    provider = slim.dataset_data_provider.DatasetDataProvider(
        dataset, num_readers=1, shuffle=False, common_queue_capacity=32,
        common_queue_min=1)
    tensors = provider.get(list(items))
    results = []
    with tf1.Session() as sess:
      coordinator = tf1.train.Coordinator()
      threads = tf1.train.start_queue_runners(sess, coord=coordinator)
      for _ in range(count):
        results.append(sess.run(tensors))
      coordinator.request_stop()
      coordinator.join(threads, stop_grace_period_secs=5)
  return results


def test_tf_slims_dataset_data_provider_reads_it(tree, converted):
  out, _ = converted
  dataset = dataset_factory.get_dataset(NAME, 'train', out)
  assert isinstance(dataset, slim.dataset.Dataset)
  assert (dataset.num_samples, dataset.num_classes) == (NUM_TRAIN, 2)
  assert sorted(dataset.decoder.list_items()) == ['image', 'label', 'object/bbox']
  results = provider_read(dataset, NUM_TRAIN)
  sizes = sorted(image.shape for image, _, _ in results)
  assert sizes == sorted(tree['sizes'][n] + (3,) for n in tree['labels']['train'])
  assert sorted(int(label) for _, label, _ in results) == sorted(
      tree['labels']['train'].values())
  for image, label, boxes in results:
    assert image.dtype == np.uint8 and boxes.shape[1] == 4
    assert (len(boxes) > 0) == (label == 1)


def test_tf_slims_own_decoder_reads_our_records(converted):
  """TF-Slim's visualwakewords.get_split: its pattern ('%s.record-*'), keys
  (format defaulting to 'jpeg', label to -1, the four box coordinates) and
  handlers (Image, Tensor, BoundingBox)."""
  out, _ = converted
  keys_to_features = {
      'image/encoded': tf.io.FixedLenFeature((), tf.string, default_value=''),
      'image/format': tf.io.FixedLenFeature((), tf.string, default_value='jpeg'),
      'image/class/label': tf.io.FixedLenFeature([], tf.int64, default_value=-1),
  }
  keys_to_features.update({'image/object/bbox/%s' % k: tf.io.VarLenFeature(tf.float32)
                           for k in ('xmin', 'ymin', 'xmax', 'ymax')})
  decoder = slim.tfexample_decoder.TFExampleDecoder(keys_to_features, {
      'image': slim.tfexample_decoder.Image('image/encoded', 'image/format'),
      'label': slim.tfexample_decoder.Tensor('image/class/label'),
      'object/bbox': slim.tfexample_decoder.BoundingBox(
          ['ymin', 'xmin', 'ymax', 'xmax'], 'image/object/bbox/')})
  dataset = slim.dataset.Dataset(
      data_sources=os.path.join(out, '%s.record-*' % 'val'),
      reader=tf1.TFRecordReader, decoder=decoder, num_samples=NUM_VAL,
      items_to_descriptions={}, num_classes=2)
  results = provider_read(dataset, NUM_VAL)
  assert sorted(int(label) for _, label, _ in results) == sorted(
      labels_of(out, 'val').values())
  assert all(image.ndim == 3 and image.shape[-1] == 3 for image, _, _ in results)


def read_all(descriptor):
  with tf.Graph().as_default():
    dataset = reader.make_dataset(descriptor, batch_size=1, preprocess_fn=lambda x: x,
                                  is_training=False, num_readers=1, num_epochs=1,
                                  deterministic=True)
    next_batch = tf1.data.make_one_shot_iterator(dataset).get_next()
    images, labels = [], []
    with tf1.Session() as sess:
      while True:
        try:
          image, label = sess.run(next_batch)
        except tf.errors.OutOfRangeError:
          break
        images.append(image[0])
        labels.append(int(label[0]))
  return images, labels


def test_reader_reads_it_in_record_order(tree, converted):
  out, _ = converted
  images, labels = read_all(dataset_factory.get_dataset(NAME, 'val', out))
  order = list(tree['labels']['val'])  # the annotation file's order
  assert labels == [tree['labels']['val'][n] for n in order]
  assert [i.shape for i in images] == [tree['sizes'][n] + (3,) for n in order]


def test_grayscale_and_cmyk_jpegs_are_kept_and_decode_to_three_channels(tree, converted):
  out, _ = converted
  found, _ = examples(out, 'train')
  images, _ = read_all(dataset_factory.get_dataset(NAME, 'train', out))
  order = list(tree['labels']['train'])
  for name, mode in ((tree['grayscale'][0], 'L'), (tree['cmyk'][0], 'CMYK')):
    data = feature(found[name], 'image/encoded')
    with PIL.Image.open(io.BytesIO(data)) as image:
      assert image.mode == mode
      expected = np.asarray(image.convert('RGB'), dtype=int)
    decoded = images[order.index(name)]
    assert decoded.shape == expected.shape
    assert np.abs(decoded.astype(int) - expected).mean() < 2
    if mode == 'L':
      assert (decoded[..., 0] == decoded[..., 1]).all()


def test_records_written_by_tf_slim_read_here(converted, tmp_path):
  """As TF-Slim's converter leaves them: its features (no image/class/text),
  record i in shard i % 10 of 'val.record-0000k-of-00010' (two empty here),
  labels.txt, no metadata: the split gets the published size and reads."""
  out, _ = converted
  theirs = str(tmp_path)
  found, _ = examples(out, 'val')
  writers = [tf.io.TFRecordWriter(os.path.join(
      theirs, 'val.record-%05d-of-00010' % k)) for k in range(10)]
  for i, example in enumerate(found.values()):
    del example.features.feature['image/class/text']
    writers[i % 10].write(example.SerializeToString())
  for writer in writers:
    writer.close()
  shutil.copy(os.path.join(out, 'labels.txt'), theirs)
  dataset = dataset_factory.get_dataset(NAME, 'val', theirs)
  assert (dataset.num_samples, dataset.num_classes) == (40504, 2)
  assert dataset.labels_to_names == {0: 'background', 1: 'person'}
  assert len(dataset.files) == 10
  _, labels = read_all(dataset)
  assert sorted(labels) == sorted(labels_of(out, 'val').values())


def test_mobilenet_training_input_reads_it_with_the_boxes(converted):
  """mobilenet_v1_025's training input at 96x96 in grayscale: inception
  preprocessing gets each record's boxes (none for background images)."""
  from classification import classifier  # pylint: disable=import-outside-toplevel
  out, _ = converted
  descriptor = dataset_factory.get_dataset(NAME, 'train', out)
  assert descriptor.has_boxes
  input_fn = classifier.make_input_fn(descriptor, 'mobilenet_v1_025', batch_size=8,
                                      is_training=True, image_size=96,
                                      use_grayscale=True, num_epochs=1, seed=0)
  with tf.Graph().as_default():
    images, labels = tf1.data.make_one_shot_iterator(input_fn()).get_next()
    with tf1.Session() as sess:
      batches = [sess.run([images, labels]) for _ in range(2)]
  assert [b[0].shape for b in batches] == [(8, 96, 96, 1)] * 2
  assert sorted(int(l) for b in batches for l in b[1]) == sorted(
      labels_of(out, 'train').values())


# --- where the tree is ------------------------------------------------------------

def test_coco_2017_layout(tmp_path):
  facts = write_coco_tree(str(tmp_path / 'coco2017'), num_train=9, num_val=3,
                          year=2017, size=(64, 80), seed=3)
  assert os.path.exists(str(tmp_path / 'coco2017' / 'annotations' /
                            'instances_train2017.json'))
  out = str(tmp_path / 'out')
  assert converters.convert(NAME, out, source_dir=facts['root']) == {
      'train': 9, 'val': 3}
  for split in ('train', 'val'):
    assert labels_of(out, split) == facts['labels'][split]
  assert all(re.match(r'\d{12}\.jpg$', n) for n in labels_of(out, 'train'))


def test_tree_in_dataset_dir_under_coco_dirname(tree, tmp_path):
  """TF-Slim's place: --dataset_dir/coco_dataset; --coco_dirname renames it."""
  out = str(tmp_path / 'vww')
  copy_tree(tree, tmp_path / 'vww' / 'coco_dataset')
  assert converters.convert(NAME, out)['train'] == NUM_TRAIN
  other = str(tmp_path / 'other')
  copy_tree(tree, tmp_path / 'other' / 'mscoco')
  assert converters.convert(NAME, other, coco_dirname='mscoco')['val'] == NUM_VAL


def test_script_takes_tf_slims_flags(tree, tmp_path, capsys):
  flag_values = absl_flags.FlagValues()
  download_and_convert_data.define_flags(flag_values)
  flag_values(['prog', '--dataset_name=visualwakewords',
               '--dataset_dir=%s' % tmp_path, '--source_dir=%s' % tree['root'],
               '--foreground_class_of_interest=dog',
               '--small_object_area_threshold=0.01'])
  assert download_and_convert_data.run(flag_values) == 0
  captured = capsys.readouterr()
  assert 'converted visualwakewords into %s: train 16, val 8' % tmp_path in captured.out
  assert re.search(r'visualwakewords train: 16/16 images, [\d.]+ images/sec',
                   captured.err)
  assert labels_of(str(tmp_path), 'train') == tf_slim_labels(
      tree['annotations']['train'], 'dog', 0.01)
  flag_values(['prog', '--dataset_name=visualwakewords',
               '--dataset_dir=%s' % (tmp_path / 'other'),
               '--source_dir=%s' % tree['root'], '--foreground_class_of_interest=cow'])
  assert download_and_convert_data.run(flag_values) == 1
  error = capsys.readouterr().err.strip().splitlines()[-1]
  assert error.startswith("error: unknown --foreground_class_of_interest 'cow'")


def test_rerun_with_another_category_is_refused(tree, converted):
  out, _ = converted
  with pytest.raises(dataset_utils.ConversionError, match='other inputs or settings'):
    converters.convert(NAME, out, source_dir=tree['root'],
                       foreground_class_of_interest='dog')


# --- bad input --------------------------------------------------------------------

def one_line_error(**kwargs):
  with pytest.raises(dataset_utils.ConversionError) as error:
    converters.convert(NAME, **kwargs)
  message = str(error.value)
  assert '\n' not in message
  return message


def test_no_tree_names_where_it_looked_and_download(tmp_path):
  out = str(tmp_path / 'vww')
  message = one_line_error(dataset_dir=out)
  assert message.startswith('no COCO tree: looked for annotations/instances_'
                            '{train,val}2014.json (or 2017), train2014/ and val2014/ '
                            'in %s and %s;' % (os.path.join(out, 'coco_dataset'), out))
  assert message.endswith('or pass --download')


def test_incomplete_tree_names_what_is_missing(tree, tmp_path):
  root = copy_tree(tree, tmp_path / 'coco')
  shutil.rmtree(os.path.join(root, 'val2014'))
  message = one_line_error(dataset_dir=str(tmp_path / 'out'), source_dir=root)
  assert message == ('incomplete COCO 2014 tree in %s: missing %s; pass --download '
                     'to fetch it' % (root, os.path.join(root, 'val2014') + os.sep))


def test_unknown_category_lists_cocos_categories(tree, tmp_path):
  message = one_line_error(dataset_dir=str(tmp_path), source_dir=tree['root'],
                           foreground_class_of_interest='persn')
  assert message == ("unknown --foreground_class_of_interest 'persn'; did you mean "
                     "'person'? (the categories of instances_train2014.json: person, "
                     'bicycle, car, cat, dog, bottle)')


def test_threshold_outside_0_1_is_refused(tree, tmp_path):
  message = one_line_error(dataset_dir=str(tmp_path), source_dir=tree['root'],
                           small_object_area_threshold=1.5)
  assert message == '--small_object_area_threshold must be in [0, 1), got 1.5'


def test_missing_image_is_named_and_nothing_is_written(tree, tmp_path):
  root = copy_tree(tree, tmp_path / 'coco')
  missing = os.path.join(root, 'val2014', tree['special']['val_person'])
  os.remove(missing)
  out = str(tmp_path / 'out')
  message = one_line_error(dataset_dir=out, source_dir=root)
  assert message == 'missing image %s (named by instances_val2014.json)' % missing
  assert not [n for n in os.listdir(out) if 'record' in n or n.endswith('.json')]


def test_undecodable_image_is_named_and_no_metadata_is_written(tree, tmp_path):
  root = copy_tree(tree, tmp_path / 'coco')
  bad = os.path.join(root, 'train2014', tree['special']['person'])
  with open(bad, 'rb') as f:
    data = f.read()
  with open(bad, 'wb') as f:
    f.write(data[:len(data) // 2])  # a truncated download
  out = str(tmp_path / 'out')
  message = one_line_error(dataset_dir=out, source_dir=root, num_threads=2)
  assert message.startswith('cannot decode image %s: ' % bad)
  assert not os.path.exists(dataset_utils.metadata_path(out, NAME))
  assert not [n for n in os.listdir(out) if n.endswith('.tmp')]
  for name in os.listdir(out):
    if '.record-' in name:  # a shard that exists is complete
      list(tf1.io.tf_record_iterator(os.path.join(out, name)))
  with pytest.raises(ValueError, match='did not finish'):
    dataset_factory.get_dataset(NAME, 'train', out).check_files()


# --- download ---------------------------------------------------------------------

class _Publisher(http.server.BaseHTTPRequestHandler):
  def do_GET(self):
    self.server.requests.append(self.path)
    body = self.server.files.get(self.path.lstrip('/'))
    if body is None:
      self.send_response(404)
      self.end_headers()
      return
    self.send_response(200)
    self.send_header('Content-Length', str(len(body)))
    self.end_headers()
    self.wfile.write(body)

  def log_message(self, *args):
    pass


@pytest.fixture()
def publisher(tree, monkeypatch):
  """127.0.0.1 serving COCO 2014's three zips, made from the tree."""
  files = {}
  for archive, folders in (('annotations_trainval2014.zip', ['annotations']),
                           ('train2014.zip', ['train2014']),
                           ('val2014.zip', ['val2014'])):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, 'w') as z:
      for folder in folders:
        for directory, _, names in os.walk(os.path.join(tree['root'], folder)):
          for name in sorted(names):
            path = os.path.join(directory, name)
            z.write(path, os.path.relpath(path, tree['root']))
    files[archive] = buffer.getvalue()
  httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Publisher)
  httpd.files, httpd.requests = files, []
  thread = threading.Thread(target=httpd.serve_forever, daemon=True)
  thread.start()
  url = 'http://127.0.0.1:%d/' % httpd.server_address[1]
  monkeypatch.setattr(visualwakewords, 'ARCHIVES', {
      name: (url + name, dataset_utils.Published(
          size=len(body), sha256=hashlib.sha256(body).hexdigest()))
      for name, body in files.items()})
  yield httpd
  httpd.shutdown()
  httpd.server_close()


def test_download_fetches_the_three_zips_into_coco_dirname(tree, publisher, tmp_path):
  out = str(tmp_path / 'vww')
  one_line_error(dataset_dir=out)  # nothing is fetched unless asked
  assert publisher.requests == []
  assert converters.convert(NAME, out, download=True) == {
      'train': NUM_TRAIN, 'val': NUM_VAL}
  assert sorted(publisher.requests) == [
      '/annotations_trainval2014.zip', '/train2014.zip', '/val2014.zip']
  root = os.path.join(out, 'coco_dataset')
  assert sorted(os.listdir(root)) == ['annotations', 'train2014', 'val2014']
  assert labels_of(out, 'train') == tree['labels']['train']
  # The tree is kept: a second conversion fetches nothing.
  converters.convert(NAME, str(tmp_path / 'again'), source_dir=out, download=True)
  assert len(publisher.requests) == 3


def test_zips_already_in_place_are_extracted_without_download(publisher, tmp_path):
  root = tmp_path / 'vww' / 'coco_dataset'
  root.mkdir(parents=True)
  for name, body in publisher.files.items():
    (root / name).write_bytes(body)
  assert converters.convert(NAME, str(tmp_path / 'vww'))['val'] == NUM_VAL
  assert publisher.requests == []
  assert (root / 'train2014.zip').exists()  # yours, kept


@pytest.mark.parametrize('member', ['../evil.jpg', '/tmp/evil.jpg',
                                    'train2014/../../evil.jpg'])
def test_zip_members_escaping_the_target_are_refused(tmp_path, member):
  archive = str(tmp_path / 'train2014.zip')
  with zipfile.ZipFile(archive, 'w') as z:
    z.writestr('train2014/a.jpg', b'x')
    z.writestr(zipfile.ZipInfo(member), b'evil')
  target = str(tmp_path / 'target')
  with pytest.raises(dataset_utils.ConversionError,
                     match=re.escape('refusing to extract %r from %s' % (member, archive))):
    coco.safe_extract_zip(archive, target)
  assert os.listdir(target) == []


def test_zip_symlinks_are_refused(tmp_path):
  archive = str(tmp_path / 'val2014.zip')
  with zipfile.ZipFile(archive, 'w') as z:
    link = zipfile.ZipInfo('val2014/link')
    link.external_attr = (0o120777 << 16)
    z.writestr(link, '/etc/passwd')
  with pytest.raises(dataset_utils.ConversionError, match='not a regular file'):
    coco.safe_extract_zip(archive, str(tmp_path / 'target'))
