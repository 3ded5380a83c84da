"""TF-Slim's own way of exporting, on this project's packages.

Written as TF-Slim's export_inference_graph.py and its test are (their
calls, our code): `get_dataset(dataset_name, 'train', dataset_dir)`, asked
only for num_classes -> `get_network_fn(model_name, num_classes -
labels_offset, is_training)` -> a float placeholder named `input` of
[batch_size, image_size, image_size, channels] (clips [batch_size,
num_frames, ...] with its --is_video_model) -> the GraphDef written. Then
TensorFlow's freeze_graph, as TF-Slim's README freezes that graph, against a
checkpoint of this project's train script: the frozen graph classifies the
digits as the project's own export does. On TF 2 freeze_graph restores
reference variables only, so the graph is built with the line
docs/migrating.md adds to TF-Slim's script for it,
`tf.compat.v1.disable_resource_variables()`.
"""
import contextlib
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from classification import classifier
from datasets import dataset_factory
from nets import nets_factory
import scripts

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def export_tf_slim_style(output_file, model_name='inception_v3',
                         dataset_name='imagenet', dataset_dir='',
                         is_training=False, image_size=None, batch_size=None,
                         labels_offset=0, use_grayscale=False, num_frames=None):
  """TF-Slim's export script's calls, its flags' defaults as defaults;
  returns the network's logits tensor (its graph is written)."""
  with tf.Graph().as_default() as graph:
    dataset = dataset_factory.get_dataset(dataset_name, 'train', dataset_dir)
    network_fn = nets_factory.get_network_fn(
        model_name, num_classes=dataset.num_classes - labels_offset,
        is_training=is_training)
    image_size = image_size or network_fn.default_image_size
    channels = 1 if use_grayscale else 3
    shape = ([batch_size] + ([num_frames] if num_frames else []) +
             [image_size, image_size, channels])
    placeholder = tf1.placeholder(name='input', dtype=tf.float32, shape=shape)
    logits, _ = network_fn(placeholder)
    with tf.io.gfile.GFile(output_file, 'wb') as f:
      f.write(graph.as_graph_def().SerializeToString())
  return logits


@contextlib.contextmanager
def reference_variables():
  """What `tf.compat.v1.disable_resource_variables()` at the top of TF-Slim's
  script does to the graphs it builds, undone afterwards (the test process
  keeps TF 2's resource variables)."""
  assert tf1.resource_variables_enabled()
  tf1.disable_resource_variables()
  try:
    yield
  finally:
    tf1.enable_resource_variables()


def freeze_graph(graph, checkpoint, output_graph, output_node):
  """TF-Slim's README's freeze step: TensorFlow's freeze_graph tool."""
  return run_python('-m', 'tensorflow.python.tools.freeze_graph',
                    '--input_graph=%s' % graph, '--input_binary=true',
                    '--input_checkpoint=%s' % checkpoint,
                    '--output_graph=%s' % output_graph,
                    '--output_node_names=%s' % output_node, check=False)


def read_graph_def(path):
  graph_def = tf1.GraphDef()
  with open(path, 'rb') as f:
    graph_def.ParseFromString(f.read())
  return graph_def


def run_python(*args, timeout=600, check=True):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  if args[0].endswith('.py'):
    result = scripts.run(*args, env=env, timeout=timeout)
  else:  # python -m: TensorFlow's own module, run as it is
    result = subprocess.run([sys.executable] + list(args), cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=timeout)
  if check:
    assert result.returncode == 0, (result.stdout[-2000:] +
                                    result.stderr[-3000:])
  return result


def test_tf_slim_export_test_passes_with_an_empty_dataset_dir(tmp_path):
  """TF-Slim's export_inference_graph_test: --dataset_dir is a fresh
  temporary directory, holding no ImageNet records."""
  output_file = str(tmp_path / 'inception_v3.pb')
  export_tf_slim_style(output_file, model_name='inception_v3',
                       dataset_dir=str(tmp_path))
  nodes = {n.name: n for n in read_graph_def(output_file).node}
  assert nodes['input'].op == 'Placeholder'
  assert 'InceptionV3/Predictions/Reshape_1' in nodes


def test_tf_slim_readme_export_command_needs_no_dataset_dir(tmp_path,
                                                           monkeypatch):
  """`export_inference_graph.py --model_name=inception_v3
  --output_file=inception_v3_inf_graph.pb`: --dataset_dir is '', and the
  network gets ImageNet's 1001 classes."""
  monkeypatch.chdir(tmp_path)
  logits = export_tf_slim_style('inception_v3_inf_graph.pb')
  assert logits.shape.as_list() == [None, 1001]
  assert os.listdir(str(tmp_path)) == ['inception_v3_inf_graph.pb']


@pytest.mark.slow
@pytest.mark.parametrize('name', nets_factory.list_models())
def test_tf_slim_export_builds_every_network_of_the_zoo(name, tmp_path):
  """Its default flags (imagenet, default size, unknown batch); the video
  networks with its --is_video_model --num_frames."""
  frames = nets_factory.get_info(name).num_frames or None
  output_file = str(tmp_path / 'graph.pb')
  logits = export_tf_slim_style(output_file, model_name=name,
                                dataset_dir=str(tmp_path), num_frames=frames)
  assert logits.shape.as_list() == [None, 1001]
  nodes = {n.name: n for n in read_graph_def(output_file).node}
  size = nets_factory.get_network_fn(name, 1001).default_image_size
  assert [d.size for d in nodes['input'].attr['shape'].shape.dim] == (
      [-1] + ([frames] if frames else []) + [size, size, 3])


def validation_images(digits_dir):
  """The 360 validation images preprocessed for LeNet as
  eval_image_classifier.py reads them, and their labels."""
  dataset = dataset_factory.get_dataset('digits', 'validation', digits_dir)
  input_fn = classifier.make_input_fn(dataset, 'lenet', dataset.num_samples,
                                      is_training=False, num_epochs=1,
                                      deterministic=True)
  with tf.Graph().as_default():
    batch = tf1.data.make_one_shot_iterator(input_fn()).get_next()
    with tf1.Session() as session:
      return session.run(batch)


def frozen_probabilities(path, output, images):
  with tf.Graph().as_default():
    tf.import_graph_def(read_graph_def(path), name='')
    with tf1.Session() as session:
      return session.run(output + ':0', {'input:0': images})


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_frozen_tf_slim_graph_classifies_as_the_projects_export(digits,
                                                               tmp_path):
  """LeNet trained by train_image_classifier.py; TF-Slim's graph (its
  --use_grayscale: the digits are gray; reference variables) frozen by
  freeze_graph, TF-Slim's README's command; the project's export_inference_graph.py frozen in one
  step. The two give the same probabilities on the validation images."""
  train_dir = str(tmp_path / 'train')
  run_python('train_image_classifier.py', '--model_name=lenet',
             '--dataset_name=digits', '--dataset_dir=%s' % digits,
             '--train_dir=%s' % train_dir, '--batch_size=50',
             '--max_number_of_steps=400', '--optimizer=sgd',
             '--learning_rate=0.01', '--learning_rate_decay_type=fixed',
             '--weight_decay=0', '--random_seed=1')
  # lr 0.01, 400 steps, seeded: docs/cluster.md "Safe learning rates" (0.05
  # is the edge: an unseeded run once stopped at 0.60).
  checkpoint = tf.train.latest_checkpoint(train_dir)
  graph = str(tmp_path / 'lenet_inf_graph.pb')
  with reference_variables():
    export_tf_slim_style(graph, model_name='lenet', dataset_name='digits',
                         dataset_dir=str(digits), use_grayscale=True)
  tf_slim_frozen = str(tmp_path / 'frozen_lenet.pb')
  frozen = freeze_graph(graph, checkpoint, tf_slim_frozen,
                        'Predictions/Reshape_1')
  assert frozen.returncode == 0, frozen.stderr[-3000:]
  own_frozen = str(tmp_path / 'own_frozen.pb')
  run_python('export_inference_graph.py', '--model_name=lenet',
             '--dataset_name=digits', '--dataset_dir=%s' % digits,
             '--checkpoint_path=%s' % train_dir, '--output_file=%s' % own_frozen)

  images, labels = validation_images(str(digits))
  theirs = frozen_probabilities(tf_slim_frozen, 'Predictions/Reshape_1', images)
  ours = frozen_probabilities(own_frozen, 'probabilities', images)
  accuracy = np.mean(np.argmax(theirs, 1) == labels)
  print('validation accuracy: TF-Slim frozen graph %.4f, project export %.4f'
        % (accuracy, np.mean(np.argmax(ours, 1) == labels)))
  assert theirs.shape == (360, 10) and accuracy > 0.9
  np.testing.assert_array_equal(np.argmax(theirs, 1), np.argmax(ours, 1))
  np.testing.assert_allclose(theirs, ours, rtol=0, atol=1e-5)


@pytest.mark.timeout(300)
def test_freeze_graph_fails_on_a_graph_of_resource_variables(tmp_path):
  """Why docs/migrating.md adds disable_resource_variables() to TF-Slim's
  script: TF 2's freeze_graph restores a GraphDef's variables with a Saver
  that takes a resource variable's handle for its value
  (tensorflow/tensorflow#24591). The control: the same graph with
  reference variables freezes."""
  network_fn = nets_factory.get_network_fn('lenet', 10)
  with tf.Graph().as_default():
    network_fn(tf1.placeholder(tf.float32, [None, 28, 28, 1]))
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      checkpoint = tf1.train.Saver().save(session, str(tmp_path / 'model.ckpt'))
  resource_graph = str(tmp_path / 'resource.pb')
  export_tf_slim_style(resource_graph, model_name='lenet',
                       dataset_name='digits', use_grayscale=True)
  failed = freeze_graph(resource_graph, checkpoint, str(tmp_path / 'a.pb'),
                        'Predictions/Reshape_1')
  assert failed.returncode == 1
  assert failed.stderr.strip().splitlines()[-1] == (
      'IndexError: tuple index out of range')
  reference_graph = str(tmp_path / 'reference.pb')
  with reference_variables():
    export_tf_slim_style(reference_graph, model_name='lenet',
                         dataset_name='digits', use_grayscale=True)
  frozen = freeze_graph(reference_graph, checkpoint, str(tmp_path / 'b.pb'),
                        'Predictions/Reshape_1')
  assert frozen.returncode == 0, frozen.stderr[-3000:]
