"""Writes a few images of a converted dataset split as PNG files, to try
classify_image.py on images a network was not trained on.

    python sample_images.py --dataset_name=digits --dataset_dir=data/digits \
        --dataset_split_name=validation --num_images=5 --output_dir=samples/digits

Files are named <record index>_<label name>.png and hold the images as the
reader decodes them (lossless), so a network classifies a file exactly as
it classifies its record. --output_dir is written under a temporary name and
renamed into place; an existing one is replaced only with --overwrite.
"""
import os
import re
import sys

from absl import app
from absl import flags

import quiet_tensorflow  # noqa: F401  (first: TensorFlow's noise off the terminal)
import tf_compat  # noqa: F401
import zoo_errors
import tensorflow as tf

from classification import classifier
from datasets import dataset_factory
from datasets import dataset_utils
from serving import exporter

tf1 = tf.compat.v1
F = flags.FLAGS

flags.DEFINE_string('dataset_name', 'digits', 'Dataset to take images from.')
flags.DEFINE_string('dataset_dir', None, 'Directory of the converted dataset.')
flags.DEFINE_string('dataset_split_name', 'validation', 'Split to sample.')
flags.DEFINE_integer('num_images', 10, 'Images to write (the first ones).')
flags.DEFINE_string('output_dir', None, 'Directory to write.')
flags.DEFINE_bool('overwrite', False, 'Replace an existing --output_dir.')


def file_name(index, label, labels_to_names):
  name = re.sub(r'[^A-Za-z0-9]+', '_', labels_to_names.get(label, str(label)))
  return '%05d_%s.png' % (index, name.strip('_') or label)


def main(_):
  tf.compat.v1.disable_eager_execution()  # a TF 1 program: graph mode
  try:
    if not F.dataset_dir or not F.output_dir:
      raise ValueError('--dataset_dir and --output_dir are required')
    if F.num_images < 1:
      raise ValueError('--num_images must be at least 1')
    output_dir = dataset_utils.expand_path(F.output_dir)
    dataset = dataset_factory.get_dataset(
        F.dataset_name, F.dataset_split_name,
        dataset_utils.expand_path(F.dataset_dir))
    files = list(dataset.check_files())
    exporter.check_destination(output_dir, F.overwrite, '--output_dir')
    with tf.Graph().as_default():
      records = tf.data.TFRecordDataset(files).take(F.num_images).map(
          dataset.decode)
      image, label = tf1.data.make_one_shot_iterator(records).get_next()
      png = tf.io.encode_png(image)
      with tf1.Session() as session, exporter.staged_path(
          output_dir, F.overwrite, '--output_dir') as staged:
        os.makedirs(staged)
        index = 0
        while True:
          try:
            data, label_value = session.run([png, label])
          except tf.errors.OutOfRangeError:
            break
          name = file_name(index, int(label_value), dataset.labels_to_names)
          with open(os.path.join(staged, name), 'wb') as f:
            f.write(data)
          index += 1
  except (ValueError, tf.errors.OpError) as e:
    print('sample_images: error: %s' % zoo_errors.one_line(e), file=sys.stderr)
    return 1
  print('Wrote %d images of %s/%s to %s' % (index, F.dataset_name,
                                          F.dataset_split_name, F.output_dir))
  return 0


if __name__ == '__main__':
  app.run(lambda argv: sys.exit(main(argv)))
