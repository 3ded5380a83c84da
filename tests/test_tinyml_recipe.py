"""TensorFlow Lite Micro's person detector, trained by its own recipe
(`training_a_model.md` of tflite-micro's person_detection example) on this
zoo: its commands in their order, as written but for the step count, on a
small COCO tree the test draws (tests/coco_tree.py). Convert Visual Wake
Words, train mobilenet_v1_025 at 96x96 grayscale, evaluate (the early
checkpoint's batch-norm statistics are named as unsettled), recompute them
with --precise_bn_batches, evaluate again, export the graph, freeze it with
TensorFlow's freeze_graph, quantize it with the recipe's TFLiteConverter
snippet, and classify the validation images with the int8 model, in
TFLite's interpreter and in TensorFlow Lite Micro's."""
import glob
import io
import os
import re
import shlex
import subprocess
import sys

import numpy as np
import PIL.Image
import pytest
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'tests'))
import coco_tree  # noqa: E402
import scripts  # noqa: E402

STEPS = 120  # the recipe's 1,000,000 cut short: enough to learn the drawn persons
NUM_TRAIN, NUM_VAL = 240, 60

# The recipe's representative_dataset_gen and converter, as it prints them
# (its 250 images made the shard's count; the tab of its loop made spaces).
CONVERTER_SNIPPET = '''
import tensorflow.compat.v1 as tf
import io
import PIL
import numpy as np

def representative_dataset_gen():

  record_iterator = tf.python_io.tf_record_iterator(path='person_detection_dataset/val.record-00000-of-00010')

  for _ in range(%(count)d):
    string_record = next(record_iterator)
    example = tf.train.Example()
    example.ParseFromString(string_record)
    image_stream = io.BytesIO(example.features.feature['image/encoded'].bytes_list.value[0])
    image = PIL.Image.open(image_stream)
    image = image.resize((96, 96))
    image = image.convert('L')
    array = np.array(image)
    array = np.expand_dims(array, axis=2)
    array = np.expand_dims(array, axis=0)
    array = ((array / 127.5) - 1.0).astype(np.float32)
    yield([array])

converter = tf.lite.TFLiteConverter.from_frozen_graph('person_detection_frozen_graph.pb', ['input'], ['MobilenetV1/Predictions/Reshape_1'])
converter.optimizations = [tf.lite.Optimize.DEFAULT]
converter.representative_dataset = representative_dataset_gen
converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
converter.inference_input_type = tf.int8
converter.inference_output_type = tf.int8

tflite_quant_model = converter.convert()
open("person_detection_model.tflite", "wb").write(tflite_quant_model)
'''


def _recipe(home, command, timeout=600):
  """Runs one of the recipe's shell commands in `home` (the recipe's
  `models/research/slim/` scripts are this checkout's). The commands are
  words and quotes only, so shlex splits them as the shell would; `python
  script` runs as tests/scripts.py runs every script (a fork of a warm
  interpreter, without TensorFlow's start-up), `python -m` a Python of its
  own."""
  command = command.replace('models/research/slim/', ROOT + '/')
  assert not set('$`|&;<>*?(){}') & set(command), command
  words = shlex.split(command)
  assert words[0] == 'python', command
  if words[1] == '-m':
    result = subprocess.run([sys.executable] + words[1:], cwd=str(home),
                            text=True, capture_output=True, timeout=timeout,
                            check=False)
  else:
    result = scripts.run(os.path.join(str(home), words[1]), *words[2:],
                         cwd=str(home), timeout=timeout)
  assert result.returncode == 0, (command, result.stdout[-3000:],
                                  result.stderr[-3000:])
  return result.stdout + result.stderr


def _accuracy(output):
  return float(re.search(r'^Accuracy = ([0-9.]+)$', output, re.M).group(1))


def _val_images(home):
  """(images as the recipe's snippet prepares them, labels) of every
  validation record."""
  images, labels = [], []
  for path in sorted(glob.glob(str(home / 'person_detection_dataset' / 'val.record-*'))):
    for record in tf.compat.v1.io.tf_record_iterator(path):
      example = tf.train.Example.FromString(record)
      feature = example.features.feature
      image = PIL.Image.open(io.BytesIO(feature['image/encoded'].bytes_list.value[0]))
      array = np.array(image.resize((96, 96)).convert('L'))[None, :, :, None]
      images.append((array / 127.5 - 1.0).astype(np.float32))
      labels.append(feature['image/class/label'].int64_list.value[0])
  return np.concatenate(images), np.array(labels)


def _int8_outputs(model, images):
  """(TFLite's int8 outputs, the int8 inputs it was given), from its
  built-in kernels: the XNNPACK delegate it adds by default rounds int8
  differently (up to 3 units on these logits; tests/test_micro.py)."""
  interpreter = tf.lite.Interpreter(
      model_content=model, experimental_op_resolver_type=(
          tf.lite.experimental.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES))
  interpreter.allocate_tensors()
  given, = interpreter.get_input_details()
  scale, zero = given['quantization']
  inputs = np.clip(np.round(images / scale + zero), -128, 127).astype(np.int8)
  outputs = []
  for image in inputs:
    interpreter.set_tensor(given['index'], image[None])
    interpreter.invoke()
    outputs.append(interpreter.get_tensor(
        interpreter.get_output_details()[0]['index'])[0])
  return np.array(outputs), inputs


def _frozen_outputs(path, images):
  graph_def = tf.compat.v1.GraphDef.FromString(open(path, 'rb').read())
  with tf.Graph().as_default() as graph:
    tf.import_graph_def(graph_def, name='')
    with tf.compat.v1.Session(graph=graph) as session:
      return session.run('MobilenetV1/Predictions/Reshape_1:0',
                         {'input:0': images})


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_the_person_detection_recipe_runs_as_written(tmp_path):
  home = tmp_path
  facts = coco_tree.write_coco_tree(
      str(home / 'person_detection_dataset' / 'coco_dataset'),
      num_train=NUM_TRAIN, num_val=NUM_VAL, size=(96, 128), seed=1)

  out = _recipe(home, '''python models/research/slim/download_and_convert_data.py \
--logtostderr \
--dataset_name=visualwakewords \
--dataset_dir=person_detection_dataset \
--foreground_class_of_interest='person' \
--small_object_area_threshold=0.005''')
  assert 'train %d, val %d' % (NUM_TRAIN, NUM_VAL) in out, out[-2000:]
  assert os.path.exists(home / 'person_detection_dataset' / 'val.record-00009-of-00010')

  train = '''python models/research/slim/train_image_classifier.py \
    --alsologtostderr \
    --dataset_name=visualwakewords \
    --dataset_dir=person_detection_dataset \
    --dataset_split_name=train \
    --train_image_size=96 \
    --input_grayscale=True \
    --preprocessing_name=mobilenet_v1 \
    --model_name=mobilenet_v1_025 \
    --train_dir=person_detection_train \
    --save_summaries_secs=300 \
    --learning_rate=0.045 \
    --label_smoothing=0.1 \
    --learning_rate_decay_factor=0.98 \
    --num_epochs_per_decay=2.5 \
    --moving_average_decay=0.9999 \
    --batch_size=96 \
    --max_number_of_steps=%d''' % STEPS
  out = _recipe(home, train, timeout=900)
  assert 'Trained to step %d' % STEPS in out, out[-2000:]

  evaluate = '''python models/research/slim/eval_image_classifier.py \
    --alsologtostderr \
    --dataset_name=visualwakewords \
    --dataset_dir=person_detection_train \
    --dataset_split_name=val \
    --eval_image_size=96 \
    --input_grayscale=True \
    --preprocessing_name=mobilenet_v1 \
    --model_name=mobilenet_v1_025 \
    --train_dir=person_detection_train \
    --checkpoint_path=person_detection_train/model.ckpt-%d''' % STEPS
  out = _recipe(home, evaluate)
  assert 'holds checkpoints, not records' in out
  assert re.search(r'warning: the batch-norm moving statistics of \S+model.ckpt-%d '
                   r'are still 96%% their initial values' % STEPS, out), out[-2000:]
  before = _accuracy(out)

  out = _recipe(home, train + ' --precise_bn_batches=10', timeout=900)
  assert re.search(r'Precise batch norm: the moving means and variances of 27 '
                   r'layers are now the averages of 10 batches \(960 images\)', out)
  out = _recipe(home, evaluate)
  assert 'warning' not in out, out[-2000:]
  after = _accuracy(out)
  print('eval accuracy before precise batch norm %.4f, after %.4f' % (before, after))
  assert after >= 0.9 and after > before + 0.2, (before, after)

  _recipe(home, '''python models/research/slim/export_inference_graph.py \
    --alsologtostderr \
    --dataset_name=visualwakewords \
    --image_size=96 \
    --input_grayscale=True \
    --model_name=mobilenet_v1_025 \
    --output_file=person_detection_graph.pb''')
  _recipe(home, '''python -m tensorflow.python.tools.freeze_graph \
--input_graph=person_detection_graph.pb \
--input_checkpoint=person_detection_train/model.ckpt-%d \
--input_binary=true \
--output_node_names=MobilenetV1/Predictions/Reshape_1 \
--output_graph=person_detection_frozen_graph.pb''' % STEPS)

  first_shard = str(home / 'person_detection_dataset' / 'val.record-00000-of-00010')
  count = sum(1 for _ in tf.compat.v1.io.tf_record_iterator(first_shard))
  (home / 'convert.py').write_text(CONVERTER_SNIPPET % {'count': count})
  _recipe(home, 'python convert.py')
  model = (home / 'person_detection_model.tflite').read_bytes()

  images, labels = _val_images(home)
  assert sorted(labels) == sorted(facts['labels']['val'].values())
  floats = _frozen_outputs(str(home / 'person_detection_frozen_graph.pb'), images)
  quantized, inputs = _int8_outputs(model, images)
  float_accuracy = np.mean(floats.argmax(1) == labels)
  int8_accuracy = np.mean(quantized.argmax(1) == labels)
  print('frozen float %.4f, int8 %.4f; %d bytes' % (float_accuracy,
                                                    int8_accuracy, len(model)))
  assert float_accuracy >= 0.9
  assert abs(int8_accuracy - float_accuracy) <= 0.05

  # The microcontroller's runtime: TensorFlow Lite Micro's own interpreter in
  # the person-detection example's 136 KB arena gives TFLite's outputs.
  from serving import micro  # pylint: disable=import-outside-toplevel
  on_micro = micro.run_micro(model, inputs, arena_size=136 * 1024)
  assert np.abs(np.asarray(on_micro, np.int32).reshape(quantized.shape) -
                quantized.astype(np.int32)).max() <= 1
