"""int8 for microcontrollers: the C array TensorFlow Lite Micro compiles, and
the person detector's network (mobilenet_v1_025 on 96x96 grayscale images)
trained on digits, exported, and run by TFLM's own interpreter in the
person_detection example's tensor arena, against TFLite's interpreter and
the float checkpoint."""
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from classification import classifier
from datasets import dataset_factory
from serving import exporter, inference, micro
import scripts

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# tflite-micro's person_detection example: kTensorArenaSize and the ops its
# MicroMutableOpResolver<5> registers.
PERSON_DETECTION_ARENA = 136 * 1024
PERSON_DETECTION_OPS = ['AddAveragePool2D', 'AddConv2D', 'AddDepthwiseConv2D',
                        'AddReshape', 'AddSoftmax']
PERSON_DETECTOR = ['--model_name=mobilenet_v1_025', '--train_image_size=96',
                   '--use_grayscale', '--preprocessing_name=mobilenet_v1']
# Reads back what a C++ compiler makes of model_data.cc: the bytes, where
# they lie and how many model_data.h says there are.
CHECK_CC = r'''
#include <cstdint>
#include <cstdio>
#include "model_data.h"
int main(int, char** argv) {
  if (reinterpret_cast<std::uintptr_t>(g_model_data) % 16 != 0) return 2;
  std::FILE* f = std::fopen(argv[1], "wb");
  std::fwrite(g_model_data, 1, g_model_data_len, f);
  return std::fclose(f);
}
'''


def run(script, *args, timeout=600):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  return scripts.run(script, *args, env=env, timeout=timeout)


def array_of(source):
  """(bytes, alignment, length constant) of model_data.cc's text."""
  match = re.search(r'^alignas\((\d+)\) const unsigned char g_model_data\[\] '
                    r'= \{\n(.*?)\n\};\nconst int g_model_data_len = (\d+);\n'
                    r'\Z', source, re.M | re.S)
  assert match, source[-500:]
  values = [int(v, 16) for v in re.findall(r'0x([0-9a-f]{2}),',
                                           match.group(2))]
  assert len(values) == match.group(2).count(',')
  return bytes(values), int(match.group(1)), int(match.group(3))


def compiled_bytes(directory, tmp_path):
  """The bytes g++ links from `directory`'s model_data.cc, read back by a
  program that includes model_data.h (None when there is no g++)."""
  if not shutil.which('g++'):
    return None
  (tmp_path / 'check.cc').write_text(CHECK_CC)
  subprocess.run(['g++', '-std=c++11', '-Wall', '-Wextra', '-Werror',
                  '-I', directory, str(tmp_path / 'check.cc'),
                  os.path.join(directory, micro.CC_FILENAME),
                  '-o', str(tmp_path / 'check')],
                 check=True, capture_output=True, timeout=300)
  subprocess.run([str(tmp_path / 'check'), str(tmp_path / 'read.bin')],
                 check=True, timeout=60)
  return (tmp_path / 'read.bin').read_bytes()


def tflm_version():
  from importlib import metadata
  return metadata.version('tflite-micro')


# -- the C array -----------------------------------------------------------------
def test_c_array_holds_the_bytes_aligned_with_their_length(tmp_path):
  data = b'\x1c\x00\x00\x00TFL3\x00\xff\x7f\x80' * 3 + b'\x01'
  paths = micro.write_c_sources(str(tmp_path), data, 'a tiny model\nline two')
  assert sorted(os.path.basename(p) for p in paths) == ['model_data.cc',
                                                         'model_data.h']
  header = (tmp_path / 'model_data.h').read_text()
  assert header == ('// a tiny model\n// line two\n'
                    '#ifndef MODEL_DATA_H_\n#define MODEL_DATA_H_\n\n'
                    'extern const unsigned char g_model_data[];\n'
                    'extern const int g_model_data_len;\n\n'
                    '#endif  // MODEL_DATA_H_\n')
  source = (tmp_path / 'model_data.cc').read_text()
  assert source.startswith('// a tiny model\n// line two\n'
                           '#include "model_data.h"\n\n')
  assert array_of(source) == (data, 16, 37)
  assert compiled_bytes(str(tmp_path), tmp_path) in (data, None)


def test_export_without_tflite_micro_writes_the_c_files_and_says_why_no_arena(
    monkeypatch, tmp_path):
  """A deploy machine may lack the dev requirement tflite-micro: the int8
  export still writes its C array, and says in one line that the arena was
  not measured."""
  monkeypatch.setattr(micro, 'available', lambda: False)
  spec = exporter.make_spec('lenet', num_classes=10)
  graph = exporter.RestoredGraph(spec, checkpoint=None)
  images = np.random.RandomState(0).uniform(-1, 1, (10,) + spec.image_shape)
  try:
    path = exporter.write_tflite(graph, str(tmp_path / 'int8'), 'int8', images)
  finally:
    graph.close()
  assert sorted(os.listdir(tmp_path / 'int8')) == [
      'export.json', 'labels.txt', 'model.tflite', 'model_data.cc',
      'model_data.h']
  model = open(path, 'rb').read()
  assert array_of((tmp_path / 'int8' / 'model_data.cc').read_text())[0] == model
  facts = exporter.read_info(str(tmp_path / 'int8'))['micro']
  assert facts['model_bytes'] == len(model)
  assert facts['tensor_arena_bytes'] is None
  line = micro.summary(str(tmp_path / 'int8'), facts)
  assert line == (
      'For TensorFlow Lite Micro: %s, %s (g_model_data, %d bytes); tensor '
      'arena not measured: tflite-micro is not installed (a dev requirement: '
      'pip install -r requirements.txt)' % (
          tmp_path / 'int8' / 'model_data.cc',
          tmp_path / 'int8' / 'model_data.h', len(model)))


def test_export_failing_while_writing_the_c_files_leaves_nothing_behind(
    monkeypatch, tmp_path):
  def disk_full(*args):
    raise OSError(28, 'No space left on device')

  monkeypatch.setattr(micro, 'write_c_sources', disk_full)
  spec = exporter.make_spec('lenet', num_classes=10)
  graph = exporter.RestoredGraph(spec, checkpoint=None)
  images = np.random.RandomState(0).uniform(-1, 1, (10,) + spec.image_shape)
  try:
    with pytest.raises(OSError, match='No space left'):
      exporter.write_tflite(graph, str(tmp_path / 'int8'), 'int8', images)
  finally:
    graph.close()
  assert os.listdir(tmp_path) == []


# -- the person detector's network on digits ---------------------------------------
@pytest.fixture(scope='module')
def person_detector(digits, tmp_path_factory):
  """The train_dir of mobilenet_v1_025 at 96x96 grayscale trained on digits,
  its batch-norm statistics recomputed after the last step."""
  train_dir = str(tmp_path_factory.mktemp('mobilenet_v1_025'))
  trained = run('train_image_classifier.py', *PERSON_DETECTOR,
                '--dataset_name=digits', '--dataset_dir=%s' % digits,
                '--train_dir=' + train_dir, '--max_number_of_steps=1000',
                '--batch_size=32', '--optimizer=momentum',
                '--learning_rate=0.01', '--learning_rate_decay_type=fixed',
                '--random_seed=0', '--log_every_n_steps=500',
                '--precise_bn_batches=20', timeout=900)
  assert trained.returncode == 0, trained.stderr[-3000:]
  return train_dir


@pytest.fixture(scope='module')
def int8_export(person_detector, digits, tmp_path_factory):
  """(export_dir, stdout) of export_model.py --quantize=int8."""
  export_dir = str(tmp_path_factory.mktemp('exports') / 'int8')
  exported = run('export_model.py', '--checkpoint_path=' + person_detector,
                 '--dataset_dir=%s' % digits, '--export_dir=' + export_dir,
                 '--format=tflite', '--quantize=int8')
  assert exported.returncode == 0, exported.stderr[-3000:]
  return export_dir, exported.stdout


@pytest.fixture(scope='module')
def validation(digits, int8_export):
  """(float images, labels) of the 360 validation images, preprocessed as
  the export's network takes them."""
  spec = exporter.ModelSpec.from_json(exporter.read_info(int8_export[0]))
  assert (spec.image_shape, spec.preprocessing_name) == ((96, 96, 1),
                                                         'mobilenet_v1')
  dataset = dataset_factory.get_dataset('digits', 'validation', str(digits))
  input_fn = classifier.make_input_fn(
      dataset, spec.model_name, 360, is_training=False,
      preprocessing_name=spec.preprocessing_name, image_size=spec.image_size,
      use_grayscale=spec.use_grayscale, num_epochs=1, deterministic=True)
  with tf.Graph().as_default():
    batch = tf1.data.make_one_shot_iterator(input_fn()).get_next()
    with tf1.Session() as session:
      images, labels = session.run(batch)
  assert len(labels) == 360
  return images, labels


def tflite_outputs(path, images, kernels):
  """TFLite's interpreter's outputs (one array per model output) for int8
  `images`, with its `kernels` (a tf.lite.experimental.OpResolverType)."""
  interpreter = tf.lite.Interpreter(model_path=path,
                                    experimental_op_resolver_type=kernels)
  interpreter.allocate_tensors()
  detail = interpreter.get_input_details()[0]
  rows = [[] for _ in interpreter.get_output_details()]
  for image in images:
    interpreter.set_tensor(detail['index'], image[np.newaxis])
    interpreter.invoke()
    for row, output in zip(rows, interpreter.get_output_details()):
      row.append(interpreter.get_tensor(output['index']))
  return [np.concatenate(row) for row in rows]


@pytest.fixture(scope='module')
def outputs(person_detector, int8_export, validation):
  """The 360 validation images through: 'float', the checkpoint (logits);
  'tflm', TFLM's interpreter in the person_detection arena; 'tflite' and
  'tflite_reference', TFLite's interpreter with its built-in and its
  reference kernels. The int8 ones: [logits, probabilities], int8 [360, 10]
  each."""
  images, _ = validation
  spec = exporter.ModelSpec.from_json(exporter.read_info(int8_export[0]))
  checkpoint = inference.CheckpointModel(
      tf.train.latest_checkpoint(person_detector), spec)
  try:
    float_logits = checkpoint.logits(images)
  finally:
    checkpoint.close()
  path = os.path.join(int8_export[0], 'model.tflite')
  detail = tf.lite.Interpreter(model_path=path).get_input_details()[0]
  assert detail['dtype'] == np.int8
  scale, zero_point = detail['quantization']
  quantized = np.clip(np.round(images / scale + zero_point), -128,
                      127).astype(np.int8)
  kernels = tf.lite.experimental.OpResolverType
  return {
      'float': float_logits,
      'tflm': micro.run_micro(open(path, 'rb').read(), quantized,
                              PERSON_DETECTION_ARENA),
      # Without the XNNPACK delegate TFLite adds by default: its int8
      # kernels round otherwise (a few units apart, the same top-1).
      'tflite': tflite_outputs(
          path, quantized, kernels.BUILTIN_WITHOUT_DEFAULT_DELEGATES),
      'tflite_reference': tflite_outputs(path, quantized, kernels.BUILTIN_REF),
  }


@pytest.mark.slow
def test_export_writes_model_tflite_as_the_c_array_tflm_compiles(int8_export,
                                                                 tmp_path):
  export_dir, _ = int8_export
  model = open(os.path.join(export_dir, 'model.tflite'), 'rb').read()
  source = open(os.path.join(export_dir, 'model_data.cc')).read()
  assert array_of(source) == (model, 16, len(model))
  assert '#include "model_data.h"\n' in source
  header = open(os.path.join(export_dir, 'model_data.h')).read()
  assert header.endswith('#ifndef MODEL_DATA_H_\n#define MODEL_DATA_H_\n\n'
                         'extern const unsigned char g_model_data[];\n'
                         'extern const int g_model_data_len;\n\n'
                         '#endif  // MODEL_DATA_H_\n')
  assert compiled_bytes(export_dir, tmp_path) in (model, None)


@pytest.mark.slow
def test_export_prints_and_records_the_bytes_and_the_measured_arena(
    int8_export):
  export_dir, stdout = int8_export
  info = exporter.read_info(export_dir)
  facts = info['micro']
  size = os.path.getsize(os.path.join(export_dir, 'model.tflite'))
  assert info['model_bytes'] == facts['model_bytes'] == size
  arena = facts['tensor_arena_bytes']
  assert isinstance(arena, int) and 0 < arena <= PERSON_DETECTION_ARENA
  assert facts['measured_with'] == 'tflite-micro ' + tflm_version()
  assert re.search(
      r'^For TensorFlow Lite Micro: %s, %s \(g_model_data, %d bytes\); '
      r'tensor arena %d bytes \([\d.]+ KB; measured with tflite-micro %s\)$'
      % (re.escape(os.path.join(export_dir, 'model_data.cc')),
         re.escape(os.path.join(export_dir, 'model_data.h')), size, arena,
         re.escape(tflm_version())), stdout, re.M), stdout
  header = open(os.path.join(export_dir, 'model_data.h')).read()
  assert "tensor arena measured with TFLM's interpreter: %d bytes." % arena in (
      header.replace('\n// ', ' '))


@pytest.mark.slow
def test_measured_arena_is_the_smallest_tflm_runs_the_model_in(int8_export):
  export_dir, _ = int8_export
  model = open(os.path.join(export_dir, 'model.tflite'), 'rb').read()
  arena = exporter.read_info(export_dir)['micro']['tensor_arena_bytes']
  image = np.zeros((1, 96, 96, 1), np.int8)
  assert len(micro.run_micro(model, image, arena)) == 2  # logits, probabilities
  with pytest.raises(micro.MicroError, match=(
      r"^TFLM's interpreter cannot run the model in a %d-byte arena: Failed "
      r'to allocate' % (arena - 16))):
    micro.run_micro(model, image, arena - 16)  # TFLM aligns to 16 bytes


@pytest.mark.slow
def test_int8_input_is_the_uint8_pixel_minus_128_as_the_example_feeds_it(
    int8_export):
  """mobilenet_v1's preprocessing maps pixels to [-1, 1]; the quantization
  export.json records (the model's own) makes that the person_detection
  image provider's `pixel - 128`, within the rounding of one unit."""
  export_dir, _ = int8_export
  facts = exporter.read_info(export_dir)['micro']
  detail = tf.lite.Interpreter(model_path=os.path.join(
      export_dir, 'model.tflite')).get_input_details()[0]
  assert (facts['input_scale'], facts['input_zero_point']) == (
      pytest.approx(detail['quantization'][0], rel=1e-6),
      detail['quantization'][1])
  pixels = np.arange(256)
  preprocessed = pixels / 127.5 - 1
  quantized = np.clip(np.round(preprocessed / facts['input_scale']) +
                      facts['input_zero_point'], -128, 127)
  assert np.max(np.abs(quantized - (pixels - 128))) <= 1


@pytest.mark.slow
def test_network_needs_only_the_person_detection_examples_ops(int8_export):
  assert exporter.read_info(int8_export[0])['micro']['ops'] == (
      PERSON_DETECTION_OPS)


@pytest.mark.slow
def test_tflm_in_the_person_detection_arena_gives_tflites_outputs_within_one(
    outputs):
  assert [o.shape for o in outputs['tflm']] == [(360, 10), (360, 10)]
  for tflm, tflite in zip(outputs['tflm'], outputs['tflite']):
    assert tflm.dtype == tflite.dtype == np.int8
    assert np.max(np.abs(tflm.astype(int) - tflite.astype(int))) <= 1


@pytest.mark.slow
def test_tflm_equals_tflites_reference_kernels(outputs):
  for tflm, reference in zip(outputs['tflm'], outputs['tflite_reference']):
    np.testing.assert_array_equal(tflm, reference)


@pytest.mark.slow
def test_tflm_accuracy_is_within_two_points_of_the_float_checkpoint(
    outputs, validation):
  labels = validation[1]
  accuracy = {name: np.mean(np.argmax(
      logits if name == 'float' else logits[0], 1) == labels)
              for name, logits in outputs.items()}
  assert accuracy['float'] > 0.8, accuracy  # far above chance (0.1)
  assert abs(accuracy['tflm'] - accuracy['float']) <= 0.02, accuracy
  assert abs(accuracy['tflite'] - accuracy['float']) <= 0.02, accuracy
