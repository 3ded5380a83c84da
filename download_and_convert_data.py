r"""Converts a dataset to sharded TFRecords that datasets.dataset_factory reads.

Offline by default: sources are taken from --source_dir (default --dataset_dir);
--download fetches missing archives from their original URLs.

  # bundled with scikit-learn, needs nothing:
  python download_and_convert_data.py --dataset_name=digits --dataset_dir=/tmp/digits
  # mnist idx .gz files, cifar-10-python.tar.gz, flower_photos.tgz:
  python download_and_convert_data.py --dataset_name=flowers --dataset_dir=/tmp/flowers \
      --source_dir=~/Downloads [--download]
  # ImageNet train/ and validation/ folders of synset sub-folders:
  python download_and_convert_data.py --dataset_name=imagenet \
      --dataset_dir=/data/imagenet --source_dir=/data/ILSVRC2012
  # Visual Wake Words from a COCO 2014 tree (annotations/, train2014/, val2014/):
  python download_and_convert_data.py --dataset_name=visualwakewords \
      --dataset_dir=/data/vww --source_dir=/data/coco [--download]
  # your own images, one sub-folder per class:
  python download_and_convert_data.py --dataset_name=image_folder \
      --dataset_dir=/tmp/pets --source_dir=~/pets --validation_fraction=0.1

Rerunning after an interruption keeps the shards already written.
"""
import sys

from absl import app
from absl import flags

import quiet_tensorflow  # noqa: F401  (first: TensorFlow's noise off the terminal)
import tf_compat  # noqa: F401
from datasets import converters
from datasets import dataset_factory
from datasets import dataset_utils


def define_flags(flag_values=flags.FLAGS):
  """Defines the script's flags (in `flag_values`, so tests can use their own)."""
  fv = dict(flag_values=flag_values)
  flags.DEFINE_string('dataset_name', None,
                      'One of: %s; or the import path of your dataset module '
                      '(README: Adding a dataset).'
                      % ', '.join(dataset_factory.list_datasets()), **fv)
  flags.DEFINE_string('dataset_dir', None, 'Where the TFRecords, labels.txt and '
                      '<dataset_name>_dataset.json are written (~ and $VARS '
                      'expanded).', **fv)
  flags.DEFINE_string('source_dir', None, 'Where the source files are; default '
                      '--dataset_dir.', **fv)
  flags.DEFINE_boolean('download', False, 'Download missing source archives from '
                       'their original URLs.', **fv)
  flags.DEFINE_integer('num_shards', None, 'Shards per split; default: per dataset.',
                       **fv)
  flags.DEFINE_float('validation_fraction', 0.1, 'image_folder: the fraction of '
                     'each class held out for the validation split.', **fv)
  flags.DEFINE_integer('seed', 0, 'Seed of the shuffles and splits.', **fv)
  # TF-Slim's visualwakewords flags (docs/datasets.md: Visual Wake Words).
  flags.DEFINE_string('foreground_class_of_interest', 'person', 'visualwakewords: '
                      'the COCO category whose images are label 1.', **fv)
  flags.DEFINE_float('small_object_area_threshold', 0.005, 'visualwakewords: '
                     'an object counts when its area exceeds this fraction of '
                     "the image's.", **fv)
  flags.DEFINE_string('coco_dirname', 'coco_dataset', 'visualwakewords: the '
                      'COCO tree is <source_dir>/<coco_dirname> if it exists, '
                      'else <source_dir> itself; --download puts it in the '
                      'former.', **fv)
  flags.DEFINE_integer('num_threads', None, 'Shards written in parallel; default '
                       'min(4, CPUs).', **fv)
  flags.mark_flags_as_required(['dataset_name', 'dataset_dir'], **fv)


def run(flag_values):
  """Converts as `flag_values` say; returns the exit code (errors in one line)."""
  f = flag_values
  dataset_dir = dataset_utils.expand_path(f.dataset_dir)
  try:
    sizes = converters.convert(
        f.dataset_name, dataset_dir, source_dir=dataset_utils.expand_path(f.source_dir),
        download=f.download,
        num_shards=f.num_shards, validation_fraction=f.validation_fraction,
        seed=f.seed, num_threads=f.num_threads,
        foreground_class_of_interest=f.foreground_class_of_interest,
        small_object_area_threshold=f.small_object_area_threshold,
        coco_dirname=f.coco_dirname)
  except dataset_utils.ConversionError as e:
    print('error: %s' % e, file=sys.stderr)
    return 1
  print('converted %s into %s: %s' % (
      f.dataset_name, dataset_dir,
      ', '.join('%s %d' % item for item in sorted(sizes.items()))))
  return 0


def main(argv):
  del argv
  return run(flags.FLAGS)


if __name__ == '__main__':
  define_flags()
  app.run(main)
