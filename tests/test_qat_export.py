"""int8 TFLite from a quantization-aware training checkpoint (issue 53, item
3): export_model.py --quantize=int8 takes the ranges training learned (no
calibration), and TF-Slim's own path (export_inference_graph.py --quantize,
TensorFlow's freeze_graph, TFLiteConverter.from_frozen_graph) converts; both
agree with the fake-quant eval graph and run in TFLite Micro's interpreter
in the person detector's arena. One LeNet QAT run on digits serves them
all."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import quantization
from classification import classifier
from datasets import dataset_factory
from serving import exporter, learned_ranges, micro
import scripts
import shared

tf1 = tf.compat.v1
PERSON_DETECTION_ARENA = 136 * 1024  # tflite-micro's kTensorArenaSize
QAT_FLAGS = ['--model_name=lenet', '--dataset_name=digits', '--optimizer=sgd',
             '--learning_rate=0.01', '--learning_rate_decay_type=fixed',
             '--weight_decay=0', '--batch_size=50', '--random_seed=0',
             '--max_number_of_steps=150', '--quantize_delay=50',
             '--log_every_n_steps=150']


def run(script, *args, timeout=600):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  return scripts.run(script, *args, env=env, timeout=timeout)


def _train(digits):
  def build(directory):
    trained = run('train_image_classifier.py', *QAT_FLAGS,
                  '--dataset_dir=%s' % digits, '--train_dir=' + directory)
    assert trained.returncode == 0, trained.stderr[-3000:]
  return build


@pytest.fixture(scope='module')
def lenet_qat(digits, tmp_path_factory):
  """The train_dir of LeNet trained 150 steps on digits with
  --quantize_delay=50 (shared by the run: read it, never change it)."""
  return str(shared.artifact(tmp_path_factory, 'lenet_qat', _train(digits)))


@pytest.fixture(scope='module')
def int8_export(lenet_qat, tmp_path_factory):
  """(export_dir, stdout) of export_model.py --quantize=int8 on the QAT
  checkpoint; a calibration split that does not exist and no calibration
  images: were any read, the export would fail."""
  export_dir = str(tmp_path_factory.mktemp('qat') / 'int8')
  exported = run('export_model.py', '--checkpoint_path=' + lenet_qat,
                 '--export_dir=' + export_dir, '--format=tflite',
                 '--quantize=int8', '--calibration_split=no_such_split',
                 '--num_calibration_images=0')
  assert exported.returncode == 0, exported.stderr[-3000:]
  return export_dir, exported.stdout


@pytest.fixture(scope='module')
def validation(digits):
  """The 360 validation images as LeNet takes them, and their labels."""
  spec = exporter.make_spec('lenet', 'digits', str(digits))
  dataset = dataset_factory.get_dataset('digits', 'validation', str(digits))
  input_fn = classifier.make_input_fn(
      dataset, 'lenet', 360, is_training=False, preprocessing_name='lenet',
      image_size=spec.image_size, num_epochs=1, deterministic=True)
  with tf.Graph().as_default():
    batch = tf1.data.make_one_shot_iterator(input_fn()).get_next()
    with tf1.Session() as session:
      images, labels = session.run(batch)
  assert images.shape == (360, 28, 28, 1)
  return images, labels


def eval_graph_logits(checkpoint, images):
  """Logits of quantization-aware training's eval graph, as
  eval_image_classifier.py --quantize builds it (create_eval_graph: the
  learned ranges as they are)."""
  spec = exporter.make_spec('lenet', num_classes=10, image_size=28,
                            use_grayscale=True)
  with tf.Graph().as_default():
    inputs = tf1.placeholder(tf.float32, (None, 28, 28, 1))
    logits = exporter.network_logits(spec, inputs)
    quantization.create_eval_graph()
    logits = quantization.quantized_output(logits)
    with tf1.Session() as session:
      exporter.restore_variables(session, checkpoint, 'lenet')
      return session.run(logits, {inputs: images})


def tflite_run(model_bytes, images):
  """Every output of TFLite's built-in kernels (no delegate) for float
  `images`, quantized as the model's input says; int outputs as they are."""
  interpreter = tf.lite.Interpreter(
      model_content=model_bytes, experimental_op_resolver_type=(
          tf.lite.experimental.OpResolverType
          .BUILTIN_WITHOUT_DEFAULT_DELEGATES))
  interpreter.allocate_tensors()
  detail = interpreter.get_input_details()[0]
  outputs = interpreter.get_output_details()
  rows = [[] for _ in outputs]
  for image in quantize(images, detail):
    interpreter.set_tensor(detail['index'], image[np.newaxis])
    interpreter.invoke()
    for row, output in zip(rows, outputs):
      row.append(interpreter.get_tensor(output['index']))
  return detail, outputs, [np.concatenate(row) for row in rows]


def quantize(values, detail):
  scale, zero_point = detail['quantization']
  limits = np.iinfo(detail['dtype'])
  return np.clip(np.round(values / scale) + zero_point, limits.min,
                 limits.max).astype(detail['dtype'])


def dequantize(values, detail):
  scale, zero_point = detail['quantization']
  return (values.astype(np.float32) - zero_point) * scale


@pytest.fixture(scope='module')
def agreement(lenet_qat, int8_export, validation):
  """Logits of the 360 images: 'eval' (the fake-quant eval graph),
  'symmetric' (the exported graph: its weight ranges made symmetric),
  'int8' (export_model.py's model, dequantized, TFLite's kernels), 'tflm'
  (the same in TFLM's interpreter, raw int8); 'step': one unit of the int8
  logits."""
  images, _ = validation
  checkpoint = tf.train.latest_checkpoint(lenet_qat)
  spec = exporter.ModelSpec.from_json(exporter.read_info(int8_export[0]))
  graph = exporter.RestoredGraph(spec, checkpoint, quantize=True)
  try:
    symmetric = graph.run(images=images)['logits']
  finally:
    graph.close()
  with open(os.path.join(int8_export[0], 'model.tflite'), 'rb') as f:
    model = f.read()
  detail, outputs, (logits, _) = tflite_run(model, images)
  tflm = micro.run_micro(model, quantize(images, detail),
                         PERSON_DETECTION_ARENA)
  return {'eval': eval_graph_logits(checkpoint, images),
          'symmetric': symmetric, 'int8': dequantize(logits, outputs[0]),
          'int8_raw': logits, 'tflm': tflm[0],
          'step': outputs[0]['quantization'][0]}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_qat_int8_export_takes_the_learned_ranges_without_calibrating(
    lenet_qat, int8_export):
  export_dir, stdout = int8_export
  info = exporter.read_info(export_dir)
  assert info['int8_ranges'] == 'learned (quantization-aware training)'
  assert info['input_range'] == [-1.0, 127 / 128]  # (x - 128) / 128
  assert info['input_range_from'] == "preprocessing 'lenet'"
  assert ("the ranges quantization-aware training learned, input [-1, "
          "0.992188] from preprocessing 'lenet'") in stdout
  with open(os.path.join(export_dir, 'model.tflite'), 'rb') as f:
    model = f.read()
  interpreter = tf.lite.Interpreter(model_content=model)
  (image,) = interpreter.get_input_details()
  logits, probabilities = interpreter.get_output_details()
  assert (image['dtype'], logits['dtype'], probabilities['dtype']) == (
      np.int8, np.int8, np.int8)
  assert image['quantization'] == (1 / 128, 0)  # the int8 pixel - 128
  # The logits' range is the one training learned for fc4's activation.
  low = tf.train.load_variable(lenet_qat, 'LeNet/fc4/act_quant/min')
  high = tf.train.load_variable(lenet_qat, 'LeNet/fc4/act_quant/max')
  assert logits['quantization'][0] == pytest.approx((high - low) / 255,
                                                    rel=1e-5)
  assert logits['quantization'][1] == round(-128 - low / ((high - low) / 255))
  facts = info['micro']
  assert facts['model_bytes'] == len(model)
  assert 0 < facts['tensor_arena_bytes'] <= PERSON_DETECTION_ARENA


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_qat_int8_logits_agree_with_the_fake_quant_eval_graph(agreement,
                                                              validation):
  step = agreement['step']
  apart = {name: np.abs(agreement['int8'] - agreement[name]) / step
           for name in ('eval', 'symmetric')}
  # The exported graph computes what the int8 model computes, up to
  # TFLite's integer rounding in each layer (measured: at most 2 units, 0.30
  # on average); the eval graph's weights lie on their asymmetric grid, a
  # little further (at most 2 or 3, 0.47 to 0.52 on average: two runs).
  assert apart['symmetric'].max() <= 2.01 and apart['symmetric'].mean() < 0.4
  assert apart['eval'].max() <= 3.01 and apart['eval'].mean() < 0.7
  classes = {name: np.argmax(agreement[name], 1)
             for name in ('eval', 'symmetric', 'int8')}
  assert np.mean(classes['int8'] == classes['eval']) >= 0.99
  assert np.mean(classes['int8'] == classes['symmetric']) >= 0.99
  labels = validation[1]
  accuracy = {name: np.mean(c == labels) for name, c in classes.items()}
  assert accuracy['eval'] > 0.8 and abs(
      accuracy['int8'] - accuracy['eval']) <= 0.01, accuracy
  # TFLM's interpreter computes TFLite's int8 logits, within one unit.
  assert np.abs(agreement['tflm'].astype(int) -
                agreement['int8_raw'].astype(int)).max() <= 1


def test_weight_ranges_become_symmetric_and_activations_keep_theirs():
  with tf.Graph().as_default() as graph:
    images = tf1.placeholder(tf.float32, [1, 4, 4, 1])
    tf1.layers.conv2d(images, 2, 3, activation=tf.nn.relu, name='layer')
    quantization.create_eval_graph()
    assert learned_ranges.symmetric_weight_ranges(graph) == 1
    ranges = {v.op.name: v for v in tf1.global_variables()}
    fake_quants = {op.name: op for op in graph.get_operations()
                   if op.type == 'FakeQuantWithMinMaxVars'}
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      ranges['layer/weights_quant/min'].load(-0.25, session)
      ranges['layer/weights_quant/max'].load(0.5, session)
      ranges['layer/act_quant/min'].load(-0.1, session)
      ranges['layer/act_quant/max'].load(3.0, session)
      weights = session.run(
          fake_quants['layer/weights_quant/FakeQuantWithMinMaxVars'].inputs[
              1:])
      activations = session.run(
          fake_quants['layer/act_quant/FakeQuantWithMinMaxVars'].inputs[1:])
  assert list(weights) == [-0.5, 0.5]
  assert activations == pytest.approx([-0.1, 3.0])


def test_input_ranges_are_what_the_preprocessings_give():
  assert learned_ranges.preprocessing_range('inception') == (-1.0, 1.0)
  assert learned_ranges.preprocessing_range('mobilenet_v1') == (-1.0, 1.0)
  assert learned_ranges.preprocessing_range('lenet') == (-1.0, 127 / 128)
  assert learned_ranges.preprocessing_range('vgg') == pytest.approx(
      (-123.68, 255 - 103.94))
  assert learned_ranges.preprocessing_range('cifarnet') is None
  # [-1, 1] on int8: the person_detection example's pixel - 128, +-1
  scale, zero_point = learned_ranges.input_quantization(-1.0, 1.0)
  assert (scale, zero_point) == (2 / 255, 0)
  assert learned_ranges.quantized_input_stats(-1.0, 127 / 128) == (0.0, 128.0)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_unbounded_preprocessing_without_a_dataset_is_one_line(
    lenet_qat, tmp_path):
  export_dir = str(tmp_path / 'int8')
  refused = run('export_model.py', '--checkpoint_path=' + lenet_qat,
                '--preprocessing_name=cifarnet', '--dataset_dir=',
                '--num_classes=10', '--dataset_name=',
                '--export_dir=' + export_dir, '--format=tflite',
                '--quantize=int8')
  assert refused.returncode == 1
  assert refused.stderr.strip().splitlines()[-1] == (
      "export_model: error: --quantize=int8: preprocessing 'cifarnet' has no "
      'fixed output range for the int8 input (cifarnet: per-image '
      'standardization): pass --dataset_name and --dataset_dir to take it '
      'from --num_calibration_images images of --calibration_split')
  assert not os.path.exists(export_dir)


# -- TF-Slim's own path --------------------------------------------------------
FREEZE_TIMEOUT = 300


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_tf_slims_path_export_freeze_convert_runs_in_tflm(lenet_qat, digits,
                                                          validation,
                                                          tmp_path):
  """export_inference_graph.py --quantize (no checkpoint), TensorFlow's
  freeze_graph with TF-Slim's output node, TFLiteConverter.from_frozen_graph
  with inference_type int8 (and uint8) and quantized_input_stats, as a
  TF-Slim user runs them."""
  graph_file = str(tmp_path / 'lenet_inf_graph.pb')
  exported = run('export_inference_graph.py', '--model_name=lenet',
                 '--dataset_name=digits', '--dataset_dir=%s' % digits,
                 '--quantize', '--output_file=' + graph_file)
  assert exported.returncode == 0, exported.stderr[-3000:]
  frozen_file = str(tmp_path / 'lenet_frozen.pb')
  checkpoint = tf.train.latest_checkpoint(lenet_qat)
  frozen = subprocess.run(
      [sys.executable, '-m', 'tensorflow.python.tools.freeze_graph',
       '--input_graph=' + graph_file, '--input_checkpoint=' + checkpoint,
       '--input_binary=true', '--output_graph=' + frozen_file,
       '--output_node_names=Predictions/Reshape_1'],
      capture_output=True, text=True, timeout=FREEZE_TIMEOUT,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
  assert frozen.returncode == 0, frozen.stderr[-3000:]

  images, _ = validation
  graph_def = tf1.GraphDef()
  with open(frozen_file, 'rb') as f:
    graph_def.ParseFromString(f.read())
  assert len([n for n in graph_def.node
              if n.op == 'FakeQuantWithMinMaxVars']) == 8
  with tf.Graph().as_default():
    tf.import_graph_def(graph_def, name='')
    with tf1.Session() as session:
      probabilities = session.run('Predictions/Reshape_1:0',
                                  {'input:0': images})

  models = {}
  for inference_type, mean in ((tf.int8, 0.0), (tf.uint8, 128.0)):
    converter = tf1.lite.TFLiteConverter.from_frozen_graph(
        frozen_file, input_arrays=['input'],
        output_arrays=['Predictions/Reshape_1'])
    converter.inference_type = inference_type
    converter.quantized_input_stats = {'input': (mean, 128.0)}  # (x-128)/128
    models[inference_type.name] = converter.convert()

  for name, model in models.items():
    detail, outputs, (quantized,) = tflite_run(model, images)
    assert detail['dtype'] == outputs[0]['dtype'] == np.dtype(name)
    dequantized = dequantize(quantized, outputs[0])
    step = outputs[0]['quantization'][0]
    assert step == pytest.approx(1 / 256)  # TFLite's softmax output
    apart = np.abs(dequantized - probabilities) / step
    # Softmax turns the logits' few units of rounding into at most 0.025
    # (6.5 units of 1/256; 0.27 on average), int8 and uint8 alike, measured.
    assert apart.max() <= 8.01 and apart.mean() < 1.5, (name, apart.max())
    assert np.mean(np.argmax(dequantized, 1) ==
                   np.argmax(probabilities, 1)) >= 0.99, name

  # TFLM runs the int8 model in the person detector's arena, as TFLite does.
  detail, _, (quantized,) = tflite_run(models['int8'], images[:20])
  tflm = micro.run_micro(models['int8'], quantize(images[:20], detail),
                         PERSON_DETECTION_ARENA)
  assert np.abs(tflm[0].astype(int) - quantized.astype(int)).max() <= 1
  assert micro.measure_arena(models['int8']) <= PERSON_DETECTION_ARENA
  # TFLM has no uint8 kernels: the uint8 model is for TFLite only.
  with pytest.raises(micro.MicroError):
    micro.run_micro(models['uint8'], np.zeros((1, 28, 28, 1), np.uint8),
                    PERSON_DETECTION_ARENA)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_int8_export_leaves_out_what_tflm_never_reads(lenet_qat, int8_export,
                                                      validation):
  """model.tflite (and its C array) is the converter's model without the
  inner tensors' names, description, signature defs and the converter's
  metadata: the same outputs, fewer bytes."""
  export_dir, _ = int8_export
  spec = exporter.ModelSpec.from_json(exporter.read_info(export_dir))
  graph = exporter.RestoredGraph(spec, tf.train.latest_checkpoint(lenet_qat),
                                 quantize=True)
  try:
    converted = exporter.convert_to_tflite(
        graph, 'int8', input_range=learned_ranges.preprocessing_range('lenet'))
  finally:
    graph.close()
  with open(os.path.join(export_dir, 'model.tflite'), 'rb') as f:
    model = f.read()
  assert model == micro.slim_for_micro(converted)
  left_out = exporter.read_info(export_dir)['micro']['left_out_bytes']
  assert left_out == len(converted) - len(model) > 1000
  from tensorflow.lite.python import schema_py_generated as schema
  parsed = schema.Model.GetRootAsModel(model, 0)
  assert parsed.MetadataLength() == parsed.SignatureDefsLength() == 0
  assert parsed.Description() is None
  subgraph = parsed.Subgraphs(0)
  named = [subgraph.Tensors(i).Name() for i in range(subgraph.TensorsLength())
           if subgraph.Tensors(i).Name()]
  assert sorted(named) == [b'images', b'logits', b'probabilities']
  images = validation[0][:20]
  for kept, whole in zip(tflite_run(model, images)[2],
                         tflite_run(converted, images)[2]):
    np.testing.assert_array_equal(kept, whole)
