"""ImageNet as TF-Slim built it: canonical labels, boxes, flat validation."""
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from datasets import imagenet
from datasets import converters
from datasets import dataset_factory
from datasets import dataset_utils
from datasets import reader
from test_converters import random_image, record_files, save_image

tf1 = tf.compat.v1
TENCH, GOLDFISH, TISSUE = 'n01440764', 'n01443537', 'n15075141'


def make_source(root, train=None, validation=None):
  """train/<synset>/<synset>_<i>.JPEG (and validation/ likewise); returns root."""
  defaults = {'train': {TENCH: 2, GOLDFISH: 2}, 'validation': {TENCH: 1}}
  for split, synsets in (('train', train), ('validation', validation)):
    if synsets is None:
      synsets = defaults[split]
    os.makedirs(os.path.join(root, split), exist_ok=True)
    for synset, count in synsets.items():
      for i in range(count):
        save_image(os.path.join(root, split, synset, '%s_%d.JPEG' % (synset, i)),
                   random_image(20, 40), 'JPEG')
  return root


def examples(split, dataset_dir):
  """{image/filename: tf.train.Example} of a converted split."""
  found = {}
  for path in record_files('imagenet', split, dataset_dir):
    for record in tf1.io.tf_record_iterator(path):
      example = tf.train.Example.FromString(record)
      name = example.features.feature['image/filename'].bytes_list.value[0].decode()
      found[name] = example.features.feature
  return found


def label_of(feature):
  return feature['image/class/label'].int64_list.value[0]


def boxes_of(feature):
  return [list(feature['image/object/bbox/%s' % k].float_list.value)
          for k in ('xmin', 'ymin', 'xmax', 'ymax')]


def test_shipped_synset_list_is_the_canonical_1000():
  synsets = imagenet.canonical_synsets()
  assert len(synsets) == 1000 and len({s for s, _ in synsets}) == 1000
  assert [s for s, _ in synsets] == sorted(s for s, _ in synsets)
  assert all(re.fullmatch(r'n\d{8}', s) and name for s, name in synsets)
  assert synsets[0] == (TENCH, 'tench, Tinca tinca')
  assert synsets[1] == (GOLDFISH, 'goldfish, Carassius auratus')
  assert synsets[999] == (TISSUE, 'toilet tissue, toilet paper, bathroom tissue')
  names = imagenet.labels_to_names()
  assert len(names) == 1001 and names[0] == 'background'


def test_labels_follow_the_canonical_list_and_missing_synsets_only_warn(
    tmp_path, capsys):
  src = make_source(str(tmp_path / 'src'), train={GOLDFISH: 1, TISSUE: 2},
                    validation={TISSUE: 1})
  out = str(tmp_path / 'out')
  assert converters.convert('imagenet', out, source_dir=src) == {
      'train': 3, 'validation': 1}
  warning = [l for l in capsys.readouterr().err.splitlines() if 'warning' in l]
  assert warning[0] == ('warning: %s lacks 998 of the 1,000 synsets (first: %s); '
                        'their labels stay reserved, the others keep their '
                        'canonical labels' % (os.path.join(src, 'train'), TENCH))
  train = examples('train', out)
  assert {n: label_of(f) for n, f in train.items()} == {
      '%s_0.JPEG' % GOLDFISH: 2, '%s_0.JPEG' % TISSUE: 1000, '%s_1.JPEG' % TISSUE: 1000}
  feature = train['%s_0.JPEG' % TISSUE]
  assert feature['image/class/synset'].bytes_list.value == [TISSUE.encode()]
  assert feature['image/class/text'].bytes_list.value == [
      b'toilet tissue, toilet paper, bathroom tissue']
  assert feature['image/format'].bytes_list.value == [b'JPEG']  # TF-Slim's spelling
  descriptor = dataset_factory.get_dataset('imagenet', 'train', out)
  assert descriptor.num_classes == 1001
  with open(os.path.join(out, 'labels.txt')) as f:
    lines = f.read().splitlines()
  assert lines[:2] == ['0:background', '1:tench, Tinca tinca'] and len(lines) == 1001


@pytest.mark.parametrize('split', ['train', 'validation'])
def test_stray_folder_is_refused_naming_it(tmp_path, split):
  src = make_source(str(tmp_path / 'src'))
  stray = os.path.join(src, split, 'n99999999')
  save_image(os.path.join(stray, 'x.JPEG'), random_image(4, 4), 'JPEG')
  with pytest.raises(dataset_utils.ConversionError, match=re.escape(
      '%s is not one of the 1,000 ILSVRC-2012 synsets' % stray)):
    converters.convert('imagenet', str(tmp_path / 'out'), source_dir=src)
  assert not os.path.exists(str(tmp_path / 'out' / 'imagenet_dataset.json'))


def test_flat_validation_is_labelled_by_the_ground_truth_file(tmp_path):
  src = make_source(str(tmp_path / 'src'))
  for i in range(1, 4):
    save_image(os.path.join(src, 'validation_flat', 'ILSVRC2012_val_%08d.JPEG' % i),
               random_image(6, 6), 'JPEG')
  os.rename(os.path.join(src, 'validation'), os.path.join(src, 'validation_folders'))
  os.rename(os.path.join(src, 'validation_flat'), os.path.join(src, 'validation'))
  with open(os.path.join(src, 'imagenet_2012_validation_synset_labels.txt'), 'w') as f:
    f.write('%s\n%s\n%s\n' % (TISSUE, TENCH, GOLDFISH))
  out = str(tmp_path / 'out')
  assert converters.convert('imagenet', out, source_dir=src)['validation'] == 3
  assert {n: label_of(f) for n, f in examples('validation', out).items()} == {
      'ILSVRC2012_val_00000001.JPEG': 1000, 'ILSVRC2012_val_00000002.JPEG': 1,
      'ILSVRC2012_val_00000003.JPEG': 2}


def test_flat_validation_without_ground_truth_says_what_is_missing(tmp_path):
  src = make_source(str(tmp_path / 'src'), validation={})
  save_image(os.path.join(src, 'validation', 'ILSVRC2012_val_00000001.JPEG'),
             random_image(6, 6), 'JPEG')
  with pytest.raises(dataset_utils.ConversionError,
                     match='imagenet_2012_validation_synset_labels.txt is missing'):
    converters.convert('imagenet', str(tmp_path / 'out'), source_dir=src)


XML = '''<annotation>
  <filename>%s</filename>
  <size><width>40</width><height>20</height><depth>3</depth></size>
  %s
</annotation>'''
OBJECT = ('<object><name>%s</name><bndbox><xmin>%s</xmin><ymin>%s</ymin>'
          '<xmax>%s</xmax><ymax>%s</ymax></bndbox></object>')


def test_boxes_from_annotation_xml_and_csv_are_stored_relative(tmp_path):
  src = make_source(str(tmp_path / 'src'))
  xml_dir = os.path.join(src, 'bounding_boxes', TENCH)
  os.makedirs(xml_dir)
  with open(os.path.join(xml_dir, '%s_0.xml' % TENCH), 'w') as f:
    f.write(XML % ('%s_0' % TENCH, ''.join([
        OBJECT % (TENCH, 4, 2, 24, 18),      # -> x 0.1..0.6, y 0.1..0.9
        OBJECT % (TENCH, 30, 25, 50, 10),    # beyond the image: clipped
        OBJECT % (GOLDFISH, 0, 0, 40, 20),   # another synset's box: not this label
    ])))
  with open(os.path.join(src, 'imagenet_2012_bounding_boxes.csv'), 'w') as f:
    f.write('%s_1.JPEG,0.2500,0.0000,0.7500,0.5000\n' % GOLDFISH)
  out = str(tmp_path / 'out')
  converters.convert('imagenet', out, source_dir=src)
  train = examples('train', out)
  np.testing.assert_allclose(boxes_of(train['%s_0.JPEG' % TENCH]), [
      [0.1, 0.75], [0.1, 0.5], [0.6, 1.0], [0.9, 1.0]], rtol=1e-6)
  assert list(train['%s_0.JPEG' % TENCH]['image/object/bbox/label'].int64_list.value) \
      == [1, 1]
  np.testing.assert_allclose(boxes_of(train['%s_1.JPEG' % GOLDFISH]),
                             [[0.25], [0.0], [0.75], [0.5]])
  assert boxes_of(train['%s_1.JPEG' % TENCH]) == [[], [], [], []]


def test_reader_hands_each_records_boxes_to_preprocessing(tmp_path):
  src = make_source(str(tmp_path / 'src'), train={TENCH: 1}, validation={TENCH: 1})
  with open(os.path.join(src, 'imagenet_2012_bounding_boxes.csv'), 'w') as f:
    f.write('%s_0.JPEG,0.1,0.2,0.3,0.4\n%s_0.JPEG,0.5,0.6,0.7,0.8\n' % (TENCH, TENCH))
  out = str(tmp_path / 'out')
  converters.convert('imagenet', out, source_dir=src)
  descriptor = dataset_factory.get_dataset('imagenet', 'train', out)
  received = []

  def preprocess(image, bbox):
    received.append(bbox.shape.as_list())
    return tf.reshape(bbox, [2, 4])  # [ymin, xmin, ymax, xmax] per box

  with tf.Graph().as_default():
    dataset = reader.make_dataset(descriptor, batch_size=1, preprocess_fn=preprocess,
                                  num_epochs=1, shuffle=False)
    boxes, _ = tf1.data.make_one_shot_iterator(dataset).get_next()
    with tf1.Session() as sess:
      value = sess.run(boxes)
  assert received == [[1, None, 4]]
  np.testing.assert_allclose(value[0], [[0.2, 0.1, 0.4, 0.3], [0.6, 0.5, 0.8, 0.7]],
                             rtol=1e-6)


def test_boxes_steer_inception_training_crops():
  from preprocessing import inception_preprocessing
  # Left half black, right half white; the only box is in the white half, so
  # every crop covers part of it (min_object_covered=0.1) and holds white.
  image = np.zeros([64, 64, 3], np.uint8)
  image[:, 32:] = 255
  with tf.Graph().as_default():
    tf1.set_random_seed(1)
    crop, _ = inception_preprocessing.distorted_bounding_box_crop(
        tf.constant(image), tf.constant([[[0.0, 0.75, 1.0, 1.0]]]),
        area_range=(0.05, 0.1))
    with tf1.Session() as sess:
      crops = [sess.run(crop) for _ in range(20)]
  assert all(c.max() == 255 for c in crops)


def test_default_shard_counts_are_tf_slims():
  assert imagenet.DEFAULT_SHARDS == {'train': 1024, 'validation': 128}
  spec = dataset_factory.get_info('imagenet')
  assert spec.shard_filename('train', 0, 1024) == 'train-00000-of-01024'
  assert spec.shard_filename('validation', 127, 128) == 'validation-00127-of-00128'
