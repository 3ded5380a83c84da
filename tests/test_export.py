"""From a checkpoint to deployment: frozen graphs, SavedModels, TFLite, and
the scripts that make and use them, checked against the checkpoint itself."""
import csv
import ctypes
import io
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import PIL.Image
import pytest
import tensorflow as tf

from classification import classifier
from classification import optimization
from datasets import dataset_factory, dataset_utils
from nets import nets_factory
from runner import estimator as est
from serving import exporter, inference
import scripts

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(script, *args, cwd=ROOT, timeout=600):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  return scripts.run(script, *args, cwd=cwd, env=env, timeout=timeout)


def error_line(result):
  lines = [l for l in result.stderr.splitlines() if 'error:' in l]
  assert result.returncode == 1 and len(lines) == 1, result.stderr[-3000:]
  return lines[0]


def train_lenet(digits_dir, train_dir, steps=300, **overrides):
  """LeNet on digits, as demo.sh trains it but faster (about 0.97)."""
  params = classifier.ClassifierParams(
      model_name='lenet', num_classes=10, num_samples_per_epoch=1437,
      batch_size=50, weight_decay=0.0, log_every_n_steps=1000,
      optimizer=optimization.OptimizerParams(
          optimizer='sgd', learning_rate=0.05,
          learning_rate_decay_type='fixed'), **overrides)
  estimator = est.Estimator(
      classifier.model_fn, train_dir,
      config=est.RunConfig(tf_random_seed=0, log_step_count_steps=None,
                           save_summary_steps=None),
      params={'classifier': params})
  dataset = dataset_factory.get_dataset('digits', 'train', digits_dir)
  estimator.train(classifier.make_input_fn(dataset, 'lenet', 50,
                                           is_training=True, seed=0),
                  max_steps=steps)
  return estimator.latest_checkpoint()


@pytest.fixture(scope='module')
def lenet(digits_dir, tmp_path_factory):
  """(checkpoint, spec) of a LeNet trained on digits."""
  train_dir = str(tmp_path_factory.mktemp('lenet'))
  checkpoint = train_lenet(digits_dir, train_dir)
  return checkpoint, exporter.make_spec('lenet', 'digits', digits_dir)


@pytest.fixture(scope='module')
def validation(digits_dir):
  """(preprocessed float images, labels, uint8 images) of 40 validation
  images, read as eval_image_classifier.py reads them."""
  dataset = dataset_factory.get_dataset('digits', 'validation', digits_dir)
  input_fn = classifier.make_input_fn(dataset, 'lenet', 40, is_training=False,
                                      num_epochs=1, deterministic=True)
  with tf.Graph().as_default():
    images, labels = tf1.data.make_one_shot_iterator(input_fn()).get_next()
    raw = tf1.data.make_one_shot_iterator(
        tf.data.TFRecordDataset(list(dataset.files)).map(dataset.decode)
        .batch(40)).get_next()[0]
    with tf1.Session() as session:
      return session.run([images, labels, raw])


@pytest.fixture(scope='module')
def checkpoint_logits(lenet, validation):
  model = inference.CheckpointModel(lenet[0], lenet[1])
  try:
    return model.logits(validation[0])
  finally:
    model.close()


@pytest.fixture(scope='module')
def saved_model(lenet, tmp_path_factory, digits_dir):
  """A SavedModel written by export_model.py."""
  export_dir = str(tmp_path_factory.mktemp('exports') / 'saved_model')
  result = run('export_model.py', '--checkpoint_path=' + lenet[0],
               '--model_name=lenet', '--dataset_name=digits',
               '--dataset_dir=' + digits_dir, '--export_dir=' + export_dir,
               '--format=saved_model')
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'as a SavedModel' in result.stdout
  return export_dir


def png(image):
  return dataset_utils.encode_png(image)


# -- the exports compute what the checkpoint computes ---------------------------
def test_frozen_graph_gives_the_checkpoints_logits(lenet, digits_dir, validation,
                                                   checkpoint_logits, tmp_path):
  output = str(tmp_path / 'frozen.pb')
  result = run('export_inference_graph.py', '--model_name=lenet',
               '--dataset_name=digits', '--dataset_dir=' + digits_dir,
               '--checkpoint_path=' + os.path.dirname(lenet[0]),
               '--output_file=' + output)
  assert result.returncode == 0, result.stderr[-3000:]
  graph_def = tf1.GraphDef()
  with open(output, 'rb') as f:
    graph_def.ParseFromString(f.read())
  assert not [n.name for n in graph_def.node
              if n.op in ('VarHandleOp', 'VariableV2', 'ReadVariableOp')]
  with tf.Graph().as_default() as graph:
    tf.import_graph_def(graph_def, name='')
    assert graph.get_tensor_by_name('input:0').shape.as_list() == [
        None, 28, 28, 1]
    with tf1.Session() as session:
      logits = session.run('logits:0', {'input:0': validation[0]})
  np.testing.assert_allclose(logits, checkpoint_logits, rtol=0, atol=1e-4)


def test_inference_graph_has_tf_slims_input_and_text_format(tmp_path):
  output = str(tmp_path / 'graph.pbtxt')
  result = run('export_inference_graph.py', '--model_name=mobilenet_v1_025',
               '--batch_size=2', '--image_size=128', '--write_text_graphdef',
               '--output_file=' + output)
  assert result.returncode == 0, result.stderr[-3000:]
  from google.protobuf import text_format
  graph_def = text_format.Parse(open(output).read(), tf1.GraphDef())
  nodes = {n.name: n for n in graph_def.node}
  assert [d.size for d in nodes['input'].attr['shape'].shape.dim] == [
      2, 128, 128, 3]
  assert nodes['logits'].op == 'Identity'
  assert any(n.op in ('VarHandleOp', 'VariableV2')  # not frozen
             for n in graph_def.node)
  with tf.Graph().as_default() as graph:
    tf.import_graph_def(graph_def, name='')
    assert graph.get_tensor_by_name('logits:0').shape.as_list() == [2, 1001]


@pytest.mark.timeout(300)
def test_inference_graph_of_a_video_network_takes_tf_slims_clips(tmp_path):
  output = str(tmp_path / 'i3d.pb')
  result = run('export_inference_graph.py', '--model_name=i3d',
               '--is_video_model', '--num_frames=8', '--batch_size=1',
               '--output_file=' + output)
  assert result.returncode == 0, result.stderr[-3000:]
  graph_def = tf1.GraphDef()
  with open(output, 'rb') as f:
    graph_def.ParseFromString(f.read())
  nodes = {n.name: n for n in graph_def.node}
  assert [d.size for d in nodes['input'].attr['shape'].shape.dim] == [
      1, 8, 224, 224, 3]
  with tf.Graph().as_default() as graph:
    tf.import_graph_def(graph_def, name='')
    assert graph.get_tensor_by_name('logits:0').shape.as_list() == [1, 1001]


@pytest.mark.timeout(300)
@pytest.mark.parametrize('flag, message', [
    ('--is_video_model', "--is_video_model: model_name 'inception_v3' takes "
     'images, not clips (the video networks: i3d, s3dg)'),
])
def test_tf_slim_export_flags_this_script_cannot_honour_are_one_line(
    flag, message, tmp_path):
  result = run('export_inference_graph.py', '--model_name=inception_v3', flag,
               '--output_file=' + str(tmp_path / 'graph.pb'))
  assert error_line(result) == 'export_inference_graph: error: ' + message
  assert not os.listdir(str(tmp_path))


def test_saved_model_images_signature_gives_the_checkpoints_logits(
    saved_model, validation, checkpoint_logits):
  model = inference.open_model(saved_model=saved_model)
  try:
    logits = model.logits(validation[0])
  finally:
    model.close()
  np.testing.assert_allclose(logits, checkpoint_logits, rtol=0, atol=1e-4)


def test_saved_model_bytes_signature_decodes_png_as_the_records_are(
    saved_model, validation, checkpoint_logits):
  model = inference.open_model(saved_model=saved_model)
  try:
    logits = model.logits_of_encoded([png(image) for image in validation[2]])
  finally:
    model.close()
  np.testing.assert_allclose(logits, checkpoint_logits, rtol=0, atol=1e-4)


def test_saved_model_bytes_signature_decodes_jpeg_as_python_does(
    saved_model, lenet, validation):
  """The serving graph decodes as the training records are decoded
  (tf.io.decode_image: libjpeg-turbo's fast integer IDCT); PIL uses the
  accurate one, a few levels apart at edges. The bytes signature equals the
  checkpoint on TF's decoding, and on PIL's within what those levels move."""
  jpegs, decoded_by_pil = [], []
  for image in validation[2][:20]:
    big = np.kron(image[..., 0], np.ones((4, 4), np.uint8))  # 32x32
    buffer = io.BytesIO()
    PIL.Image.fromarray(big).save(buffer, format='JPEG', quality=90)
    jpegs.append(buffer.getvalue())
    decoded_by_pil.append(np.asarray(PIL.Image.open(io.BytesIO(jpegs[-1]))))
  with tf.Graph().as_default(), tf1.Session() as session:
    decoded_by_tf = session.run([
        tf.io.decode_image(j, channels=1, expand_animations=False)[..., 0]
        for j in jpegs])
  levels = np.abs(np.array(decoded_by_tf, int) - np.array(decoded_by_pil, int))
  assert levels.max() <= 8 and levels.mean() < 1, (levels.max(), levels.mean())
  exported = inference.open_model(saved_model=saved_model)
  reference = inference.CheckpointModel(lenet[0], lenet[1])
  try:
    got = exported.logits_of_encoded(jpegs)
    want = reference.logits_of_encoded([png(d) for d in decoded_by_pil])
    exact = reference.logits_of_encoded([png(d) for d in decoded_by_tf])
  finally:
    exported.close()
    reference.close()
  np.testing.assert_allclose(got, exact, rtol=0, atol=1e-4)
  assert np.max(np.abs(got - want)) < 0.05 * np.max(np.abs(want))
  assert np.array_equal(np.argmax(got, 1), np.argmax(want, 1))


def test_tflite_float_gives_the_checkpoints_logits(lenet, validation,
                                                   checkpoint_logits, tmp_path):
  graph = exporter.RestoredGraph(lenet[1], lenet[0])
  try:
    path = exporter.write_tflite(graph, str(tmp_path / 'float'))
  finally:
    graph.close()
  model = inference.open_model(tflite_model=path)
  assert model.spec == lenet[1]
  logits = model.logits(validation[0])
  np.testing.assert_allclose(logits, checkpoint_logits, rtol=0, atol=1e-4)


def test_saved_model_loads_in_a_fresh_eager_process_without_the_project(
    saved_model, validation, checkpoint_logits, tmp_path):
  np.savez(str(tmp_path / 'expected.npz'), images=validation[0],
           logits=checkpoint_logits,
           encoded=np.array([png(i) for i in validation[2]], dtype=object))
  script = textwrap.dedent('''
      import sys
      import numpy as np
      import tensorflow as tf
      assert tf.executing_eagerly()
      try:
        import tf_compat
        sys.exit('the project is importable')
      except ImportError:
        pass
      expected = np.load('expected.npz', allow_pickle=True)
      model = tf.saved_model.load(%r)
      serving = model.signatures['serving_default']
      spec = serving.structured_input_signature[1]['image_bytes']
      assert spec.dtype == tf.string and spec.shape.as_list() == [None], spec
      out = serving(image_bytes=tf.constant(list(expected['encoded'])))
      np.testing.assert_allclose(out['logits'].numpy(), expected['logits'],
                                 atol=1e-4, rtol=0)
      out = model.signatures['images'](images=tf.constant(expected['images']))
      np.testing.assert_allclose(out['logits'].numpy(), expected['logits'],
                                 atol=1e-4, rtol=0)
      best = np.argmax(expected['logits'], 1)
      assert (out['classes'].numpy() == best).all()
      assert (out['top_5_classes'].numpy()[:, 0] == best).all()
      names = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven',
               'eight', 'nine']
      assert [l.decode() for l in out['top_5_labels'].numpy()[:, 0]] == [
          names[i] for i in best]
      np.testing.assert_allclose(out['probabilities'].numpy().sum(1), 1,
                                 atol=1e-5)
      print('OK', sorted(m for m in sys.modules if m.split('.')[0] in
                         ('classification', 'serving', 'nets', 'deployment',
                          'runner', 'datasets')))
      ''' % saved_model)
  env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
  env['TF_CPP_MIN_LOG_LEVEL'] = '3'
  result = subprocess.run([sys.executable, '-I', '-c', script],
                          cwd=str(tmp_path), env=env, capture_output=True,
                          text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip().endswith('OK []'), result.stdout


def test_saved_model_follows_tf_serving_conventions(saved_model):
  with tf.Graph().as_default(), tf1.Session() as session:
    meta_graph = tf1.saved_model.loader.load(session, ['serve'], saved_model)
  signature = meta_graph.signature_def['serving_default']
  assert signature.method_name == 'tensorflow/serving/predict'
  assert list(signature.inputs) == ['image_bytes']  # *_bytes: base64 in JSON
  assert signature.inputs['image_bytes'].dtype == tf.string.as_datatype_enum
  assert sorted(signature.outputs) == sorted(exporter.OUTPUTS)
  info = json.load(open(os.path.join(saved_model, 'assets.extra',
                                     'export.json')))
  assert (info['model_name'], info['global_step'], info['format']) == (
      'lenet', 300, 'saved_model')
  assert open(os.path.join(saved_model, 'assets.extra', 'labels.txt')
              ).read().splitlines()[:2] == ['0:zero', '1:one']


def test_moving_averages_are_exported_when_trained_with_them(
    digits_dir, validation, tmp_path):
  checkpoint = train_lenet(digits_dir, str(tmp_path / 'ema'), steps=20,
                           moving_average_decay=0.5)
  spec = exporter.make_spec('lenet', 'digits', digits_dir)
  graph = exporter.RestoredGraph(spec, checkpoint)
  try:
    assert graph.moving_averages
    with graph.graph.as_default():
      for variable in tf1.global_variables():
        averaged = tf.train.load_variable(
            checkpoint, variable.op.name + '/ExponentialMovingAverage')
        raw = tf.train.load_variable(checkpoint, variable.op.name)
        value = graph.session.run(variable)
        np.testing.assert_array_equal(value, averaged)
        assert not np.array_equal(value, raw), variable.op.name
  finally:
    graph.close()


# -- int8 and classification ------------------------------------------------------
@pytest.mark.slow
def test_int8_tflite_accuracy_is_within_two_points_of_the_float_checkpoint(
    lenet, digits_dir, tmp_path):
  export_dir = str(tmp_path / 'int8')
  exported = run('export_model.py', '--checkpoint_path=' + lenet[0],
                 '--model_name=lenet', '--dataset_name=digits',
                 '--dataset_dir=' + digits_dir, '--export_dir=' + export_dir,
                 '--format=tflite', '--quantize=int8')
  assert exported.returncode == 0, exported.stderr[-3000:]
  interpreter = tf.lite.Interpreter(
      model_path=os.path.join(export_dir, 'model.tflite'))
  assert interpreter.get_input_details()[0]['dtype'] == np.int8
  results = {}
  for flag in ('--checkpoint_path=' + lenet[0], '--tflite_model=' + export_dir):
    evaluated = run('eval_image_classifier.py', '--dataset_name=digits',
                    '--dataset_dir=' + digits_dir, '--model_name=lenet',
                    '--dataset_split_name=validation', flag,
                    '--eval_dir=' + str(tmp_path / flag[2:8]))
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    lines = re.findall(r'^(\w+) = ([\d.]+)$', evaluated.stdout, re.M)
    assert [name for name, _ in lines] == ['Accuracy', 'Recall_5']
    assert re.search(r'^Evaluated .* \(step 300\) on digits/validation$',
                     evaluated.stdout, re.M), evaluated.stdout
    assert re.search(r'^eval: batch 4/4 \(100%\), ETA 0s$', evaluated.stdout,
                     re.M), evaluated.stdout
    # The same per-class report as a checkpoint's: table and CSV files.
    table = re.findall(r'^(\d+) \w+ +(\d+) +[\d.]+ +(?:[ .\d]+)$',
                       evaluated.stdout, re.M)
    assert [int(label) for label, _ in table] == list(range(10))
    with open(str(tmp_path / flag[2:8] / 'confusion_matrix-300.csv')) as f:
      matrix = np.array([[int(c) for c in row[2:]]
                         for row in list(csv.reader(f))[1:]])
    assert matrix.sum() == sum(int(n) for _, n in table) == 360
    results[flag.split('=')[0]] = float(lines[0][1])
    assert round(np.trace(matrix) / 360, 4) == results[flag.split('=')[0]]
  assert results['--checkpoint_path'] >= 0.95
  assert abs(results['--tflite_model'] - results['--checkpoint_path']) <= 0.02


def test_classify_image_prints_the_right_top1(lenet, saved_model, digits_dir,
                                              validation, tmp_path):
  images, labels, raw = validation
  folder = tmp_path / 'images'
  folder.mkdir()
  names = lenet[1].label_names
  for i in range(10):
    (folder / ('%02d.png' % i)).write_bytes(png(raw[i]))
  result = run('classify_image.py', '--saved_model=' + saved_model,
               str(folder))
  assert result.returncode == 0, result.stderr[-3000:]
  blocks = re.findall(r'^(\S+)\n((?:  [\d.]+  \S+\n){5})', result.stdout, re.M)
  assert [os.path.basename(path) for path, _ in blocks] == [
      '%02d.png' % i for i in range(10)]
  top1 = [block.split()[1] for _, block in blocks]
  probabilities = [float(block.split()[0]) for _, block in blocks]
  assert sum(t == names[l] for t, l in zip(top1, labels[:10])) >= 9
  reference = inference.CheckpointModel(lenet[0], lenet[1])
  tflite = exporter.RestoredGraph(lenet[1], lenet[0])
  try:
    want = inference.top_k(reference.logits(images[:10]))
    path = exporter.write_tflite(tflite, str(tmp_path / 'tflite'))
  finally:
    reference.close()
    tflite.close()
  assert top1 == [names[row[0][0]] for row in want]
  np.testing.assert_allclose(probabilities, [row[0][1] for row in want],
                             atol=1e-4)
  from_tflite = inference.open_model(tflite_model=path).logits_of_encoded(
      [png(i) for i in raw[:10]])
  assert [names[i] for i in np.argmax(from_tflite, 1)] == top1


# -- bad input --------------------------------------------------------------------
def test_unknown_model_is_one_line_naming_it(lenet, tmp_path):
  result = run('export_model.py', '--checkpoint_path=' + lenet[0],
               '--model_name=lenett', '--num_classes=10',
               '--export_dir=' + str(tmp_path / 'x'))
  assert re.search(r"error: unknown model_name 'lenett'; did you mean "
                   r"'lenet'\? \(known: ", error_line(result))
  assert not os.path.exists(tmp_path / 'x')


def test_checkpoint_of_another_network_is_refused(lenet, tmp_path):
  spec = exporter.make_spec('cifarnet', num_classes=10)
  with pytest.raises(ValueError, match=r"checkpoint '.*' does not match the "
                     r'network cifarnet: \d+ of its \d+ variable\(s\) missing, '
                     r'first: CifarNet/'):
    exporter.RestoredGraph(spec, lenet[0])
  spec = exporter.make_spec('lenet', num_classes=7, use_grayscale=True)
  with pytest.raises(ValueError, match=r"^7 classes do not fit checkpoint "
                     r"'.*': LeNet/fc4/weights is \[1024, 10\] there, "
                     r'\[1024, 7\] here; check --dataset_name/--num_classes '
                     r'and --labels_offset$'):
    exporter.RestoredGraph(spec, lenet[0])


def test_existing_export_is_kept_unless_overwrite(lenet, digits_dir, tmp_path):
  export_dir = tmp_path / 'export'
  export_dir.mkdir()
  (export_dir / 'keep.txt').write_text('mine')
  result = run('export_model.py', '--checkpoint_path=' + lenet[0],
               '--model_name=lenet', '--dataset_name=digits',
               '--dataset_dir=' + digits_dir, '--export_dir=' + str(export_dir),
               '--format=tflite')
  assert ("--export_dir '%s' exists; pass --overwrite" % export_dir
          in error_line(result))
  assert os.listdir(export_dir) == ['keep.txt']
  graph = exporter.RestoredGraph(lenet[1], lenet[0])
  try:
    with pytest.raises(ValueError, match='exists; pass --overwrite'):
      exporter.write_saved_model(graph, str(export_dir))
    exporter.write_tflite(graph, str(export_dir), overwrite=True)
  finally:
    graph.close()
  assert sorted(os.listdir(export_dir)) == ['export.json', 'labels.txt',
                                            'model.tflite']
  assert sorted(os.listdir(tmp_path)) == ['export']  # no temporaries left


def test_failed_export_leaves_nothing_behind(lenet, tmp_path):
  graph = exporter.RestoredGraph(lenet[1], lenet[0])
  try:
    with pytest.raises(ValueError, match='--quantize=int8 needs calibration'):
      exporter.write_tflite(graph, str(tmp_path / 'int8'), quantize='int8')
  finally:
    graph.close()
  assert os.listdir(tmp_path) == []


def test_image_that_is_missing_or_not_an_image_is_one_line_naming_it(
    saved_model, tmp_path):
  text = tmp_path / 'notes.png'
  text.write_text('not an image')
  result = run('classify_image.py', '--saved_model=' + saved_model, str(text))
  assert ("error: '%s' is not an image" % text) in error_line(result)
  result = run('classify_image.py', '--saved_model=' + saved_model,
               str(tmp_path / 'missing.png'))
  assert ("error: image '%s' does not exist" % (tmp_path / 'missing.png')
          in error_line(result))


# -- every network of the zoo ---------------------------------------------------
# Networks TFLite cannot convert, with the converter's reason (README lists
# them too). None today: every network converts.
NOT_CONVERTIBLE = {}


def randomize_variables(graph):
  """Variance-preserving random weights and batch-norm statistics, so each
  network's logits are O(1) and differ between classes (fresh initialisers
  give some networks zero logits and others 1e12). One run of the
  variables' own initializers, their initial values fed: no op is added
  (Variable.load adds an op and a run per variable: minutes for the zoo)."""
  rng = np.random.default_rng(0)  # float32 draws: vgg's 138M in 1 s, not 5
  feeds, initializers = {}, []
  with graph.graph.as_default():
    for variable in tf1.global_variables():
      shape = variable.shape.as_list()
      name = variable.op.name.split('/')[-1]
      if name in ('moving_variance', 'gamma'):
        value = rng.uniform(0.5, 1.5, shape).astype(np.float32)
      elif len(shape) >= 2:  # weights: fan-in of one output
        fan_in = np.prod(shape[:-1]) if 'depthwise' not in name else np.prod(
            shape[:2])
        value = rng.standard_normal(shape, np.float32)
        value *= np.float32(1 / np.sqrt(fan_in))
      else:
        value = rng.normal(0, 0.1, shape).astype(np.float32)
      initializers.append(variable.initializer)
      feeds[variable.initializer.inputs[1]] = value  # the initial value
    graph.session.run(initializers, feed_dict=feeds)


IMAGE_NETWORKS = [name for name in nets_factory.list_models()
                  if not nets_factory.get_info(name).num_frames]


def test_video_networks_are_refused_with_one_line():
  video = sorted(set(nets_factory.list_models()) - set(IMAGE_NETWORKS))
  assert video == ['i3d', 's3dg']
  for name in video:
    with pytest.raises(ValueError, match="model_name '%s' is a video network"
                       % name):
      exporter.make_spec(name, num_classes=10)


@pytest.fixture
def without_grappler():
  """The sessions made meanwhile (the export's graph, the SavedModel's) run
  without Grappler's rewrites: the per-network test checks each network's
  graph through the export paths, not how TensorFlow optimises it, and
  rewriting a large graph in each of its sessions costs a quarter of the
  test (nasnet_mobile: 18.7 -> 12.8 CPU-s). The converter's own passes are
  unchanged, and every other test here exports and serves as users do."""
  before = tf.config.optimizer.get_experimental_options().get(
      'disable_meta_optimizer', False)
  tf.config.optimizer.set_experimental_options({'disable_meta_optimizer': True})
  yield
  tf.config.optimizer.set_experimental_options(
      {'disable_meta_optimizer': before})


@pytest.fixture
def freed_memory_kept():
  """glibc's malloc gives every large block (32 MB or more at most) back
  to the kernel when it is freed, and the next one is faulted in again page
  by page: TFLite's converter copies a network's weights dozens of times
  (vgg_16: 9.5 million page faults, 22 of 43 CPU-s in the kernel).
  Meanwhile every block comes from the heap and freed memory stays in it
  (the seven largest networks' exports 282 -> 201 s); then glibc's defaults
  are back and the heap is trimmed. What the export computes is unchanged;
  docs/deploying.md gives users the same setting."""
  libc = ctypes.CDLL(None)
  if not hasattr(libc, 'malloc_trim'):  # not glibc: nothing to tune
    yield
    return
  m_trim_threshold, m_mmap_max = -1, -4  # malloc.h
  assert libc.mallopt(m_mmap_max, 0) == 1
  assert libc.mallopt(m_trim_threshold, -1) == 1  # never trimmed (mallopt(3))
  yield
  libc.mallopt(m_mmap_max, 65536)  # glibc's defaults
  libc.mallopt(m_trim_threshold, 128 << 10)
  libc.malloc_trim(0)


@pytest.mark.slow
@pytest.mark.parametrize('name', IMAGE_NETWORKS)
def test_every_network_exports_a_saved_model_and_tflite_float(
    name, tmp_path, without_grappler, freed_memory_kept):
  """Batch 1 at the network's default size, 10 classes, one random image:
  the SavedModel and the TFLite model give the graph's own logits."""
  spec = exporter.make_spec(name, num_classes=10)
  graph = exporter.RestoredGraph(spec, checkpoint=None)
  try:
    randomize_variables(graph)
    image = np.random.RandomState(1).uniform(
        -1, 1, (1,) + spec.image_shape).astype(np.float32)
    want = graph.run(images=image)['logits']
    exporter.write_saved_model(graph, str(tmp_path / 'saved_model'))
    if name in NOT_CONVERTIBLE:
      with pytest.raises(ValueError, match=re.escape(NOT_CONVERTIBLE[name])):
        exporter.write_tflite(graph, str(tmp_path / 'tflite'))
      tflite = None
    else:
      tflite = exporter.write_tflite(graph, str(tmp_path / 'tflite'))
  finally:
    graph.close()
  scale = np.max(np.abs(want))
  assert np.isfinite(scale) and scale > 0.1 and np.std(want) > 0.01, want
  models = [inference.open_model(saved_model=str(tmp_path / 'saved_model'))]
  if tflite:
    models.append(inference.open_model(tflite_model=tflite))
  for model in models:
    got = model.logits(image)
    model.close()
    assert np.max(np.abs(got - want)) <= 1e-4 * max(1.0, scale), model.kind


# -- the README's commands ----------------------------------------------------
def readme_commands(section):
  """The commands of the ```sh block of README's `section`, continuation
  lines joined."""
  readme = open(os.path.join(ROOT, 'README.md')).read()
  text = readme[readme.index('## ' + section + '\n'):]
  block = text[text.index('```sh\n') + 6:]
  block = block[:block.index('```')].replace('\\\n', ' ')
  return [line.split() for line in block.splitlines() if line.strip()]


@pytest.mark.slow
def test_readme_deploying_commands_run_as_written_after_the_demo(
    lenet, digits_dir, tmp_path):
  """In a directory laid out as demo.sh leaves it (data/digits, a trained
  runs/lenet_digits), each `python <script>` line of the README section runs
  with this Python and succeeds."""
  (tmp_path / 'data').mkdir()
  (tmp_path / 'runs').mkdir()
  os.symlink(digits_dir, str(tmp_path / 'data' / 'digits'))
  os.symlink(os.path.dirname(lenet[0]), str(tmp_path / 'runs' / 'lenet_digits'))
  commands = readme_commands('Deploying a trained network')
  assert commands[0] == ['.', './setup_env.sh']  # the venv this test runs in
  outputs = {}
  for command in commands[1:]:
    assert command[0] == 'python', command
    result = run(command[1], *command[2:], cwd=str(tmp_path))
    assert result.returncode == 0, (command, result.stderr[-3000:])
    assert not result.stderr.strip(), (command, result.stderr[-3000:])
    outputs[command[1]] = result.stdout
  accuracy = float(re.search(r'^Accuracy = ([\d.]+)$',
                             outputs['eval_image_classifier.py'], re.M).group(1))
  assert accuracy >= 0.9
  classified = re.findall(r'^samples/digits/\d+_(\w+)\.png\n +[\d.]+  (\w+)$',
                          outputs['classify_image.py'], re.M)
  assert len(classified) == 5
  assert sum(true == top for true, top in classified) >= 4, classified
  assert (tmp_path / 'exports' / 'lenet_digits' / 'frozen_graph.pb').is_file()
