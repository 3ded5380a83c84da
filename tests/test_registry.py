"""The registry is the one table: what it records, the fine-tuning rule that
reads it, and the zoo table of docs/zoo.md written from it."""
import json
import os
import re
import sys

import numpy as np
import PIL.Image
import pytest
import tensorflow as tf

import write_zoo_table
from classification import fine_tuning
from datasets import converters, dataset_factory
from nets import lenet, nets_factory, registry
import scripts

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, 'train_image_classifier.py')
SPEC_DIR = os.path.join(ROOT, 'tests', 'data', 'checkpoint_specs')
# Networks whose TF-Slim checkpoint has 1000 classes: on TF-Slim's ImageNet
# records (1001, 'background' at 0) they take --labels_offset=1.
THOUSAND_CLASS = ('vgg_16', 'vgg_19', 'resnet_v1_50', 'resnet_v1_101',
                  'resnet_v1_152')


@pytest.fixture
def scratch_registry(monkeypatch):
  monkeypatch.setattr(registry, '_NETWORKS', dict(registry._NETWORKS))  # pylint: disable=protected-access


# -- what the registry records -------------------------------------------------
@pytest.mark.parametrize('name', nets_factory.list_models())
def test_published_checkpoints_fit_imagenet_records_after_the_labels_offset(
    name):
  info = nets_factory.get_info(name)
  if info.published is None:
    pytest.skip('TF-Slim publishes no checkpoint of %s' % name)
  imagenet_classes = dataset_factory.get_info('imagenet').num_classes
  assert imagenet_classes - info.labels_offset == info.num_classes
  assert info.labels_offset == (1 if name in THOUSAND_CLASS else 0)
  assert 0 < info.published.top1 < info.published.top5 < 100
  assert re.fullmatch(r'[\w.-]+\.(tar\.gz|tgz)', info.published.file_name)


def test_published_checkpoints_are_tf_slims():
  got = {n: nets_factory.get_info(n).published
         for n in nets_factory.list_models()}
  assert got['resnet_v1_50'] == registry.PublishedCheckpoint(
      'resnet_v1_50_2016_08_28.tar.gz', 75.2, 92.2)
  assert got['inception_v3'].file_name == 'inception_v3_2016_08_28.tar.gz'
  none = ('lenet', 'cifarnet', 'nasnet_cifar', 'alexnet_v2', 'overfeat',
          'vgg_a', 'resnet_v2_200', 'i3d', 's3dg')
  assert [n for n in none if got[n] is not None] == []
  assert sum(p is not None for p in got.values()) == 22


def test_the_registration_writes_the_functions_default_image_size(
    scratch_registry):
  def net(images, num_classes=10, is_training=False):
    return images, {}

  registry.register_network('probe_net', net, lambda **_: {}, 96)
  assert net.default_image_size == 96
  for name in nets_factory.list_models():
    info = nets_factory.get_info(name)
    assert info.network_fn.default_image_size == info.default_image_size, name
  assert lenet.lenet.default_image_size == 28


def test_a_function_saying_another_image_size_is_refused(scratch_registry):
  with pytest.raises(ValueError, match=r"'lenet_32' is registered with "
                     r"default_image_size 32 but its function says 28"):
    registry.register_network('lenet_32', lenet.lenet, lenet.lenet_arg_scope,
                              32)
  assert lenet.lenet.default_image_size == 28
  assert 'lenet_32' not in nets_factory.list_models()


# -- the fine-tuning rule -----------------------------------------------------
def test_fine_tuning_for_other_classes_leaves_the_classifier_out():
  scopes, why = nets_factory.get_info('inception_v3').fine_tuning_exclusions(5)
  assert scopes == ('InceptionV3/Logits', 'InceptionV3/AuxLogits')
  assert why == ('Fine-tuning inception_v3 for 5 classes (the checkpoint has '
                 '1001): not restoring InceptionV3/Logits, '
                 'InceptionV3/AuxLogits')


def test_a_checkpoint_with_the_networks_classes_is_restored_whole():
  """A checkpoint of one's own 5-class fine-tuning keeps its classifier."""
  info = nets_factory.get_info('inception_v3')
  own = {'InceptionV3/Conv2d_1a_3x3/weights': [3, 3, 3, 32],
         'InceptionV3/AuxLogits/Conv2d_2b_1x1/biases': [5],
         'InceptionV3/Logits/Conv2d_1c_1x1/biases': [5]}
  assert info.fine_tuning_exclusions(5, (), own) == ((), '')
  scopes, why = info.fine_tuning_exclusions(7, (), own)
  assert scopes == info.logits_scopes and '(the checkpoint has 5)' in why


@pytest.mark.parametrize('name', nets_factory.list_models())
def test_the_classifier_classes_of_each_published_checkpoint_are_read(name):
  path = os.path.join(SPEC_DIR, name + '.json')
  if not os.path.exists(path):
    pytest.skip('no published-checkpoint spec for %s' % name)
  with open(path) as f:
    spec = json.load(f)
  shapes = {n: s for n, s, _ in spec['variables']}
  info = nets_factory.get_info(name)
  assert info.classifier_classes(shapes) == spec['num_classes']
  features_only = {n: s for n, s in shapes.items()
                   if not any(n.startswith(scope + '/')
                              for scope in info.logits_scopes)}
  assert info.classifier_classes(features_only) is None


def test_fine_tuning_for_the_checkpoints_classes_restores_everything():
  assert nets_factory.get_info('inception_v3').fine_tuning_exclusions(
      1001) == ((), '')
  assert nets_factory.get_info('resnet_v1_50').fine_tuning_exclusions(
      1000) == ((), '')


def test_the_users_exclude_scopes_win():
  info = nets_factory.get_info('inception_v3')
  assert info.fine_tuning_exclusions(5, ['InceptionV3/Mixed_7c']) == (
      ('InceptionV3/Mixed_7c',), '')


def test_a_forgotten_labels_offset_is_named():
  scopes, why = nets_factory.get_info('resnet_v1_50').fine_tuning_exclusions(
      1001)
  assert scopes == ('resnet_v1_50/logits',)
  assert why.endswith("; on ImageNet records, --labels_offset=1 keeps the "
                      "checkpoint's classifier")


def _classifier_only_checkpoint(path, bias_name, classes):
  """A checkpoint holding just a classifier's bias: all the labels_offset
  rule reads."""
  with tf.Graph().as_default():
    tf1.get_variable(bias_name, [classes])
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      return tf1.train.Saver().save(session, path)


@pytest.mark.parametrize('name,bias,classes,dataset_classes,offset', [
    ('vgg_16', 'vgg_16/fc8/biases', 1000, 1001, 1),  # published, on ImageNet
    ('resnet_v1_50', 'resnet_v1_50/logits/biases', 4, 5, 1),
    ('vgg_16', 'vgg_16/fc8/biases', 1001, 1001, 0),  # trained here
    ('inception_v3', 'InceptionV3/Logits/Conv2d_1c_1x1/biases', 1000, 1001,
     0),  # the registry's labels_offset is 0
])
def test_an_unset_labels_offset_is_the_checkpoints(tmp_path, capsys, name,
                                                   bias, classes,
                                                   dataset_classes, offset):
  checkpoint = _classifier_only_checkpoint(str(tmp_path / 'model.ckpt'), bias,
                                           classes)
  assert fine_tuning.default_labels_offset(name, str(tmp_path),
                                           dataset_classes) == offset
  printed = capsys.readouterr().out.splitlines()
  assert printed == ([
      '--labels_offset=1: the %s classifier of %s has %d classes, the '
      'dataset %d (its label 0, background, is left out)' % (
          name, checkpoint, classes, dataset_classes)] if offset else [])


def _lenet_checkpoint(path, num_classes):
  """A lenet checkpoint for RGB images with `num_classes` outputs."""
  with tf.Graph().as_default():
    fn = nets_factory.get_network_fn('lenet', num_classes)
    fn(tf1.placeholder(tf.float32, [1, 28, 28, 3]))
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      tf1.train.Saver().save(sess, os.path.join(path, 'model.ckpt'))
  return {name: tf.train.load_variable(path, name)
          for name, _ in tf.train.list_variables(path)}


def test_train_script_fine_tunes_a_10_class_checkpoint_on_3_classes(tmp_path):
  source = _lenet_checkpoint(str(tmp_path / 'source'), 10)
  images = tmp_path / 'images'
  rng = np.random.RandomState(0)
  for name in ('a', 'b', 'c'):
    os.makedirs(images / name)
    for i in range(2):
      PIL.Image.fromarray(rng.randint(0, 255, (28, 28, 3)).astype(
          np.uint8)).save(str(images / name / ('%d.png' % i)))
  converters.convert('image_folder', str(tmp_path / 'data'),
                     source_dir=str(images), validation_fraction=0,
                     stream=open(os.devnull, 'w'))
  train_dir = str(tmp_path / 'tuned')
  result = scripts.run(
      TRAIN, '--model_name=lenet', '--dataset_name=image_folder',
      '--dataset_dir=' + str(tmp_path / 'data'), '--train_dir=' + train_dir,
      '--checkpoint_path=' + str(tmp_path / 'source'),
      '--trainable_scopes=LeNet/fc4', '--max_number_of_steps=1',
      '--batch_size=2', '--num_readers=1', '--num_preprocessing_threads=1',
      timeout=600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
  assert result.returncode == 0, result.stderr[-3000:]
  assert ('Fine-tuning lenet for 3 classes (the checkpoint has 10): not '
          'restoring LeNet/fc4\n') in result.stdout
  tuned = tf.train.latest_checkpoint(train_dir)
  assert tf.train.load_variable(tuned, 'LeNet/fc4/biases').shape == (3,)
  np.testing.assert_array_equal(  # restored, not trained
      tf.train.load_variable(tuned, 'LeNet/conv1/weights'),
      source['LeNet/conv1/weights'])


# -- the zoo table of docs/zoo.md ---------------------------------------------
def test_docs_zoo_table_is_current():
  with open(os.path.join(ROOT, 'docs', 'zoo.md')) as f:
    text = f.read()
  assert write_zoo_table.replace_table(text, write_zoo_table.table()) == text, (
      "docs/zoo.md's zoo table is stale: run python write_zoo_table.py")


def test_zoo_table_has_one_row_per_network_from_its_registration():
  rows = write_zoo_table.table().splitlines()[2:]
  assert len(rows) == len(nets_factory.list_models())
  assert ('| `resnet_v1_50` | 224 | 1000 | 1 | vgg | `resnet_v1_50/logits` | '
          '`resnet_v1_50_2016_08_28.tar.gz` | 75.2 | 92.2 |') in rows
  assert any(row.startswith('| `s3dg` | 224 x 64 frames | 1000 | 0 |')
             for row in rows)


def test_zoo_table_refuses_a_readme_without_its_markers():
  with pytest.raises(ValueError, match=r"^notes.md has no zoo table section"):
    write_zoo_table.replace_table('# notes\n', '| x |\n', 'notes.md')


def test_the_registration_reads_the_functions_size_and_needs_one(
    scratch_registry):
  def sized(images, num_classes=10, is_training=False):
    return images, {}
  sized.default_image_size = 64
  registry.register_network('sized_net', sized, lambda **_: {})
  assert nets_factory.get_info('sized_net').default_image_size == 64

  def unsized(images, num_classes=10, is_training=False):
    return images, {}
  with pytest.raises(ValueError, match=r"'unsized_net' has no "
                     r"default_image_size: set it on the function or pass it"):
    registry.register_network('unsized_net', unsized, lambda **_: {})
  assert 'unsized_net' not in nets_factory.list_models()


# -- a user's network module, found as datasets and preprocessings are --------
def test_model_name_imports_a_users_module_that_registers_one_network(
    scratch_registry, tmp_path, monkeypatch):
  (tmp_path / 'my_tiny_net.py').write_text(
      'import tf_slim as slim\n'
      'from nets.registry import register_network\n'
      'def my_tiny_net(images, num_classes=3, is_training=False, scope="MyTiny"):\n'
      '  net = slim.flatten(images)\n'
      '  return slim.fully_connected(net, num_classes, scope=scope + "/logits"), {}\n'
      'register_network("my_tiny_net", my_tiny_net, lambda weight_decay=0.0: {},\n'
      '                 default_image_size=8, num_classes=3, preprocessing_name="lenet")\n')
  (tmp_path / 'not_a_net.py').write_text('X = 1\n')
  monkeypatch.chdir(tmp_path)
  monkeypatch.delitem(sys.modules, 'my_tiny_net', raising=False)
  info = nets_factory.get_info('my_tiny_net')
  assert (info.name, info.default_image_size, info.num_classes) == (
      'my_tiny_net', 8, 3)
  assert 'my_tiny_net' in nets_factory.list_models()
  with pytest.raises(ValueError, match=r"^module 'not_a_net' registers no "
                     r'network: pass one registered name as --model_name$'):
    nets_factory.get_info('not_a_net')
  with pytest.raises(ValueError, match=r"^unknown model_name 'no_such_net'"):
    nets_factory.get_info('no_such_net')
