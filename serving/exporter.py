"""From a checkpoint to what serves: frozen GraphDefs, SavedModels, TFLite.

Every export starts from one graph, built by `build_serving_graph` and
restored by `RestoredGraph`:

    image_bytes [N] string -> decode + the network's eval preprocessing
        -> images [N, H, W, C] float (a placeholder with that default)
        -> network -> logits, probabilities, classes, top-5 classes,
           probabilities and label names

The SavedModel is this graph with two signatures: `serving_default` feeds
`image_bytes` (encoded JPEG/PNG/GIF/BMP, decoded as the training records
are), `images` feeds the preprocessed float images directly, which skips the
decoding. TFLite gets the same graph frozen and cut at `images` (batch 1), so
decoding and preprocessing stay with the caller, as on a phone.

`export_inference_graph` writes TF-Slim's graph (an `input` placeholder of
[batch_size, H, W, C]) with `logits` and `probabilities` nodes added, frozen
when given a checkpoint.

Checkpoints trained with --moving_average_decay are restored with their
moving averages (every trainable variable has one). Each export is written
under a temporary name in its destination's directory and renamed into place;
an existing destination is replaced only with `overwrite=True`.
"""
import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
from typing import Optional, Tuple

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import convert_to_constants as constants

import tf_compat  # noqa: F401
import zoo_errors
from classification import classifier
from classification import fine_tuning
from datasets import dataset_factory, dataset_utils
from nets import nets_factory
from preprocessing import preprocessing_factory
import quantization
from serving import learned_ranges
from serving import micro

tf1 = tf.compat.v1

FORMATS = ('saved_model', 'tflite')
QUANTIZE = ('none', 'dynamic', 'int8')
BYTES_INPUT = 'image_bytes'
IMAGES_INPUT = 'images'
BYTES_SIGNATURE = 'serving_default'
IMAGES_SIGNATURE = 'images'
OUTPUTS = ('logits', 'probabilities', 'classes', 'top_5_classes',
           'top_5_probabilities', 'top_5_labels')
TOP_K = 5
INFO_FILENAME = 'export.json'
LABELS_FILENAME = 'labels.txt'
TFLITE_FILENAME = 'model.tflite'
SAVED_MODEL_EXTRA = 'assets.extra'  # TF Serving's place for files it ignores
MOVING_AVERAGE_SUFFIX = fine_tuning.MOVING_AVERAGE_SUFFIX


@dataclasses.dataclass(frozen=True)
class ModelSpec:
  """What an exported classifier is: its network, input and outputs."""
  model_name: str
  num_classes: int  # outputs of the network
  image_size: int
  channels: int  # of the network's input images
  decode_channels: int  # encoded images are decoded to this many channels
  preprocessing_name: str
  use_grayscale: bool = False
  labels_offset: int = 0  # output i is dataset label i + labels_offset
  label_names: Tuple[str, ...] = ()  # one per output
  dataset_name: Optional[str] = None

  @property
  def image_shape(self):
    return (self.image_size, self.image_size, self.channels)

  def to_json(self):
    return dict(dataclasses.asdict(self), label_names=list(self.label_names))

  @classmethod
  def from_json(cls, content):
    fields = {f.name for f in dataclasses.fields(cls)}
    values = {k: v for k, v in content.items() if k in fields}
    values['label_names'] = tuple(values.get('label_names') or ())
    return cls(**values)


def dataset_classes(dataset_name, dataset_dir=None):
  """(classes, {label: name}, channels of its images) of a dataset: from its
  conversion in `dataset_dir` when there, else its registration."""
  if dataset_dir:
    dataset_dir = dataset_utils.expand_path(dataset_dir)
    if not os.path.isdir(dataset_dir):
      raise ValueError("--dataset_dir '%s' does not exist" % dataset_dir)
  num_classes, labels, channels = dataset_factory.dataset_classes(
      dataset_name, dataset_dir)
  if num_classes is None:
    raise ValueError(
        "the classes of dataset '%s' are known only from its conversion: pass "
        '--dataset_dir (where %s is) or --num_classes' % (
            dataset_name, dataset_utils.METADATA_PATTERN % dataset_name))
  return int(num_classes), labels, channels


def make_spec(model_name, dataset_name=None, dataset_dir=None,
              num_classes=None, labels_offset=0, image_size=None,
              preprocessing_name=None, use_grayscale=False, checkpoint=None,
              clips=False):
  """The ModelSpec of `model_name` trained on `dataset_name` (or with
  `num_classes` outputs); raises ValueError naming a flag at fault.
  labels_offset None: the one `checkpoint`'s classifier implies
  (fine_tuning.default_labels_offset). A video network only with `clips`
  (TF-Slim's inference graph of clips, export_inference_graph below): every
  other export serves images."""
  info = (nets_factory.get_info(model_name) if clips
          else classifier.image_network_info(model_name))
  labels, decode_channels = {}, 3
  if dataset_name:
    total, labels, decode_channels = dataset_classes(dataset_name, dataset_dir)
    if labels_offset is None:
      labels_offset = fine_tuning.default_labels_offset(model_name, checkpoint,
                                                        total)
    if not 0 <= labels_offset < total:
      raise ValueError('--labels_offset=%d leaves no classes of the %d of %s'
                       % (labels_offset, total, dataset_name))
    if num_classes and num_classes != total - labels_offset:
      raise ValueError(
          '--num_classes=%d disagrees with --dataset_name=%s (%d classes, '
          '--labels_offset=%d); pass one of them' % (
              num_classes, dataset_name, total, labels_offset))
    num_classes = total - labels_offset
  elif not num_classes:
    raise ValueError('pass --dataset_name (with --dataset_dir for its label '
                     'names) or --num_classes')
  labels_offset = labels_offset or 0
  if num_classes < 1:
    raise ValueError('--num_classes must be at least 1, got %d' % num_classes)
  image_size = image_size or info.default_image_size
  if image_size < 1:
    raise ValueError('--image_size must be at least 1, got %d' % image_size)
  preprocessing_name = preprocessing_name or info.preprocessing_name
  preprocessing_factory.get_preprocessing(preprocessing_name)  # checks it
  names = tuple(labels.get(i + labels_offset, str(i + labels_offset))
                for i in range(num_classes))
  return ModelSpec(
      model_name=model_name, num_classes=int(num_classes),
      image_size=int(image_size),
      channels=1 if use_grayscale or decode_channels == 1 else 3,
      decode_channels=decode_channels, preprocessing_name=preprocessing_name,
      use_grayscale=bool(use_grayscale), labels_offset=int(labels_offset),
      label_names=names, dataset_name=dataset_name)


# -- the graph ---------------------------------------------------------------
def preprocess(spec, image):
  """uint8 [H, W, decode_channels] -> the float image the network takes."""
  fn = preprocessing_factory.get_preprocessing(
      spec.preprocessing_name, is_training=False,
      use_grayscale=spec.use_grayscale)
  image = fn(image, spec.image_size, spec.image_size,
             add_image_summaries=False)
  return tf.ensure_shape(tf.cast(image, tf.float32), spec.image_shape)


def decode_and_preprocess(spec, encoded):
  """Encoded image bytes -> the network's float image; decoded as the
  dataset reader decodes records, so an image gives what its record gives."""
  image = tf.io.decode_image(encoded, channels=spec.decode_channels,
                             dtype=tf.uint8, expand_animations=False)
  image.set_shape([None, None, spec.decode_channels])
  return preprocess(spec, image)


def classification_outputs(spec, logits):
  """The named outputs of every export (OUTPUTS) from the network's logits."""
  logits = tf.identity(logits, name='logits')
  probabilities = tf.nn.softmax(logits, name='probabilities')
  k = min(TOP_K, spec.num_classes)
  top_probabilities, top_classes = tf.math.top_k(probabilities, k)
  top_classes = tf.cast(top_classes, tf.int64, name='top_5_classes')
  names = tf.constant(list(spec.label_names), tf.string, name='label_names')
  return {
      'logits': logits,
      'probabilities': probabilities,
      'classes': tf.argmax(logits, 1, name='classes'),
      'top_5_classes': top_classes,
      'top_5_probabilities': tf.identity(top_probabilities,
                                         name='top_5_probabilities'),
      'top_5_labels': tf.gather(names, top_classes, name='top_5_labels'),
  }


def network_logits(spec, images, is_training=False):
  network_fn = nets_factory.get_network_fn(spec.model_name, spec.num_classes,
                                           is_training=is_training)
  logits, _ = network_fn(images)
  return logits


@dataclasses.dataclass
class ServingTensors:
  image_bytes: tf.Tensor  # [None] string
  images: tf.Tensor  # [None, H, W, C]: fed, or decoded from image_bytes
  outputs: dict  # OUTPUTS


def build_serving_graph(spec, quantize=False):
  """Builds the serving graph (module doc) in the default graph; with
  `quantize`, the network rewritten as quantization-aware training's eval
  graph for int8 (serving/learned_ranges.py)."""
  image_bytes = tf1.placeholder(tf.string, [None], name=BYTES_INPUT)
  decoded = tf.map_fn(
      lambda encoded: decode_and_preprocess(spec, encoded), image_bytes,
      fn_output_signature=tf.TensorSpec(spec.image_shape, tf.float32),
      name='decode_and_preprocess')
  # Feeding `images` skips the decoding: one network, two entry points.
  images = tf1.placeholder_with_default(decoded, (None,) + spec.image_shape,
                                        name=IMAGES_INPUT)
  logits = network_logits(spec, images)
  if quantize:  # before the outputs, as in export_inference_graph
    logits = learned_ranges.rewrite_for_int8(logits)
  outputs = classification_outputs(spec, logits)
  return ServingTensors(image_bytes, images, outputs)


# -- checkpoints -------------------------------------------------------------
# Restores a checkpoint into the graph, with its moving averages when every
# trainable variable has them (fine_tuning's: one definition for training,
# evaluation and export).
restore_variables = fine_tuning.restore_variables


def checkpoint_step(checkpoint):
  """The checkpoint's global step, or None when it has none."""
  if checkpoint and 'global_step' in dict(tf.train.list_variables(checkpoint)):
    return int(tf.train.load_variable(checkpoint, 'global_step'))
  return None


class RestoredGraph(object):
  """The serving graph in its own session, its variables restored from a
  checkpoint (or, with checkpoint None, freshly initialised with `seed`);
  with `quantize`, the quantization-aware eval graph (the checkpoint's
  learned ranges) that int8 TFLite converts."""

  def __init__(self, spec, checkpoint=None, seed=0, quantize=False):
    self.spec, self.checkpoint = spec, checkpoint
    self.quantized = bool(quantize)
    if quantize and checkpoint:
      quantization.check_checkpoint(checkpoint, flag='--quantize=int8')
    self.graph = tf.Graph()
    with self.graph.as_default():
      tf1.set_random_seed(seed)
      self.tensors = build_serving_graph(spec, quantize)
      self.session = tf1.Session(graph=self.graph)
      self.moving_averages = False
      if checkpoint:
        self.moving_averages = restore_variables(
            self.session, checkpoint, spec.model_name, spec=spec)
      else:
        self.session.run(tf1.global_variables_initializer())
    self.global_step = checkpoint_step(checkpoint)

  def run(self, images=None, image_bytes=None, outputs=('logits',)):
    """The named outputs for float `images` or encoded `image_bytes`."""
    feed = ({self.tensors.images: images} if images is not None
            else {self.tensors.image_bytes: list(image_bytes)})
    return self.session.run({k: self.tensors.outputs[k] for k in outputs},
                            feed)

  def frozen_float_graph_def(self, batch_size=1):
    """The graph from `images` ([batch_size, H, W, C] placeholder) to logits
    and probabilities, the variables folded into constants."""
    # What tf1.graph_util.convert_variables_to_constants calls, without its
    # deprecation notice.
    frozen = constants.convert_variables_to_constants_from_session_graph(
        self.session, self.graph.as_graph_def(), ['logits', 'probabilities'])
    for node in frozen.node:
      if node.name == IMAGES_INPUT:  # the default's decoding is cut off
        node.op = 'Placeholder'
        del node.input[:]
        for key in list(node.attr):
          if key not in ('dtype', 'shape'):
            del node.attr[key]
        node.attr['shape'].shape.dim[0].size = batch_size
    return tf1.graph_util.extract_sub_graph(frozen,
                                            ['logits', 'probabilities'])

  def close(self):
    self.session.close()


# -- writing -----------------------------------------------------------------
def check_destination(path, overwrite, flag='--export_dir'):
  """Raises ValueError when `path` exists and may not be replaced."""
  if os.path.lexists(path) and not overwrite:
    raise ValueError("%s '%s' exists; pass --overwrite to replace it, or "
                     'choose another path' % (flag, path))
  parent = os.path.dirname(os.path.abspath(path))
  if os.path.exists(parent) and not os.path.isdir(parent):
    raise ValueError("%s '%s': '%s' is a file, not a directory" % (
        flag, path, parent))


@contextlib.contextmanager
def staged_path(path, overwrite, flag='--export_dir'):
  """Yields a temporary path beside `path` to write into; on success it is
  renamed to `path` (an existing one replaced only with `overwrite`), on
  failure removed, so `path` is never left half-written."""
  check_destination(path, overwrite, flag)
  path = os.path.abspath(path)
  parent = os.path.dirname(path)
  os.makedirs(parent, exist_ok=True)
  scratch = tempfile.mkdtemp(prefix='.%s.tmp-' % os.path.basename(path),
                             dir=parent)
  staged = os.path.join(scratch, os.path.basename(path))
  try:
    yield staged
    check_destination(path, overwrite, flag)  # it may have appeared since
    if os.path.lexists(path):
      old = os.path.join(scratch, 'replaced')
      os.replace(path, old)
    os.replace(staged, path)
  finally:
    shutil.rmtree(scratch, ignore_errors=True)


def export_info(spec, graph, export_format, quantize='none'):
  """The provenance and facts recorded in export.json."""
  return dict(spec.to_json(), format=export_format, quantize=quantize,
              checkpoint=graph.checkpoint and os.path.abspath(graph.checkpoint),
              global_step=graph.global_step,
              moving_averages=graph.moving_averages,
              inputs={'image_bytes': BYTES_INPUT, 'images': IMAGES_INPUT})


def _write_sidecar(directory, info, spec):
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, INFO_FILENAME), 'w') as f:
    json.dump(info, f, indent=1, sort_keys=True)
    f.write('\n')
  with open(os.path.join(directory, LABELS_FILENAME), 'w') as f:
    f.writelines('%d:%s\n' % (i, name) for i, name in enumerate(spec.label_names))


def write_saved_model(graph, export_dir, overwrite=False):
  """Writes `graph` (a RestoredGraph) as a SavedModel to `export_dir`, with
  export.json and labels.txt in its assets.extra; returns export_dir."""
  tensors = graph.tensors
  signatures = {
      BYTES_SIGNATURE: tf1.saved_model.predict_signature_def(
          {BYTES_INPUT: tensors.image_bytes}, tensors.outputs),
      IMAGES_SIGNATURE: tf1.saved_model.predict_signature_def(
          {IMAGES_INPUT: tensors.images}, tensors.outputs),
  }
  with staged_path(export_dir, overwrite) as staged:
    with graph.graph.as_default():
      builder = tf1.saved_model.Builder(staged)
      builder.add_meta_graph_and_variables(
          graph.session, [tf1.saved_model.tag_constants.SERVING],
          signature_def_map=signatures, strip_default_attrs=True,
          clear_devices=True)
      builder.save()
    _write_sidecar(os.path.join(staged, SAVED_MODEL_EXTRA),
                   export_info(graph.spec, graph, 'saved_model'), graph.spec)
  return export_dir


def convert_to_tflite(graph, quantize='none', representative_images=None,
                      input_range=None):
  """TFLite flatbuffer bytes of `graph`'s float path at batch 1.

  quantize: 'none' (float32), 'dynamic' (int8 weights, float activations) or
  'int8' (integers throughout, int8 input and output; calibrated on
  `representative_images`, an iterable of float [H, W, C] images). A
  quantized graph (RestoredGraph(quantize=True)) converts to int8 only,
  with its learned ranges and the input's `input_range` (low, high):
  nothing is calibrated (serving/learned_ranges.py).
  """
  if quantize not in QUANTIZE:
    raise ValueError("--quantize must be one of %s, got '%s'" % (
        ', '.join(QUANTIZE), quantize))
  if getattr(graph, 'quantized', False):
    return _convert_learned_ranges(graph, quantize, input_range)
  with _converter(graph) as converter:
    if quantize != 'none':
      converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantize == 'int8':
      if representative_images is None:
        raise ValueError('--quantize=int8 needs calibration images: pass '
                         '--dataset_dir with the converted dataset')

      def representative_dataset():
        for image in representative_images:
          yield [np.asarray(image, np.float32).reshape(
              (1,) + graph.spec.image_shape)]

      converter.representative_dataset = representative_dataset
      converter.target_spec.supported_ops = [
          tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
      converter.inference_input_type = tf.int8
      converter.inference_output_type = tf.int8
    return _convert(converter, graph.spec)


@contextlib.contextmanager
def _converter(graph):
  """TF 1's converter of `graph`'s frozen path from `images` (batch 1) to
  logits and probabilities, inside the graph it was imported into."""
  graph_def = graph.frozen_float_graph_def(batch_size=1)
  with tf.Graph().as_default() as frozen:
    tf.import_graph_def(graph_def, name='')
    yield tf1.lite.TFLiteConverter(
        graph_def, [frozen.get_tensor_by_name(IMAGES_INPUT + ':0')],
        [frozen.get_tensor_by_name(n + ':0')
         for n in ('logits', 'probabilities')])


def _convert(converter, spec):
  try:
    return converter.convert()
  except Exception as e:  # ConverterError and friends: all mean "cannot"
    raise ValueError('TFLite cannot convert %s: %s' % (
        spec.model_name, zoo_errors.one_line(e))) from None


def _convert_learned_ranges(graph, quantize, input_range):
  """int8 flatbuffer of a quantized graph by TF 1's quantized-graph path:
  every range from its fake quants, the input's from `input_range`."""
  if quantize != 'int8':
    raise ValueError('a quantization-aware graph converts to --quantize=int8 '
                     'only, got --quantize=%s' % quantize)
  if input_range is None:
    raise ValueError('--quantize=int8 from learned ranges needs the input '
                     "range: preprocessing '%s' declares none" %
                     graph.spec.preprocessing_name)
  with _converter(graph) as converter:
    converter.inference_type = tf.int8  # input and output too
    converter.quantized_input_stats = {
        IMAGES_INPUT: learned_ranges.quantized_input_stats(*input_range)}
    return _convert(converter, graph.spec)


def write_tflite(graph, export_dir, quantize='none', representative_images=None,
                 overwrite=False, input_range=None, input_range_from=None):
  """Writes export_dir/model.tflite with export.json and labels.txt beside
  it; an int8 model also as model_data.cc/.h for TensorFlow Lite Micro, its
  tensor arena measured by TFLM's interpreter and recorded in export.json
  under `micro` (serving/micro.py). An int8 model (model.tflite and the C
  array alike) leaves out what TFLM never reads (micro.slim_for_micro: the
  inner tensors' names, metadata, ...; `micro.left_out_bytes`). A quantized graph (RestoredGraph with
  quantize) is converted with its learned ranges and `input_range`, which
  export.json records with `input_range_from` (what gave it). Returns the
  path of model.tflite."""
  check_destination(export_dir, overwrite)
  flatbuffer = convert_to_tflite(graph, quantize, representative_images,
                                 input_range)
  converted_bytes = len(flatbuffer)
  if quantize == 'int8':  # for microcontrollers: what TFLM never reads out
    flatbuffer = micro.slim_for_micro(flatbuffer)
  info = dict(export_info(graph.spec, graph, 'tflite', quantize),
              model_bytes=len(flatbuffer))
  if quantize == 'int8':  # where the int8 ranges came from
    learned = getattr(graph, 'quantized', False)
    info['int8_ranges'] = ('learned (quantization-aware training)' if learned
                           else 'calibrated')
    if learned:
      info['input_range'] = [float(v) for v in input_range]
      info['input_range_from'] = input_range_from
  if quantize == 'int8':  # measured before anything is written
    info['micro'] = dict(micro.facts(flatbuffer),
                         left_out_bytes=converted_bytes - len(flatbuffer))
  with staged_path(export_dir, overwrite) as staged:
    os.makedirs(staged)
    with open(os.path.join(staged, TFLITE_FILENAME), 'wb') as f:
      f.write(flatbuffer)
    if quantize == 'int8':
      micro.write_c_sources(staged, flatbuffer,
                            _c_comment(graph, info['micro']))
    _write_sidecar(staged, info, graph.spec)
  return os.path.join(export_dir, TFLITE_FILENAME)


def _c_comment(graph, facts):
  """What heads model_data.cc/.h: which model, its input and output, and
  what TFLM needs to run it."""
  spec = graph.spec
  model = spec.model_name
  if spec.dataset_name:
    model += ' on %s' % spec.dataset_name
  if graph.global_step is not None:
    model += ' (step %d)' % graph.global_step
  arena = facts['tensor_arena_bytes']
  arena = ("measured with TFLM's interpreter: %d bytes" % arena
           if arena is not None else 'not measured')
  return '\n'.join([
      '%s: %s of export_model.py as a C array for TensorFlow Lite Micro.'
      % (model, TFLITE_FILENAME),
      'Input: int8 %s, the preprocessed image x as round(x / scale) + '
      'zero_point with scale %.9g, zero_point %d. Output 0: int8 logits of '
      '%d classes; output 1: their probabilities.'
      % (list((1,) + spec.image_shape), facts['input_scale'],
         facts['input_zero_point'], spec.num_classes),
      '%d bytes; tensor arena %s.' % (facts['model_bytes'], arena),
      'Ops (MicroMutableOpResolver<%d>): %s.' % (
          len(facts['ops']), ', '.join(facts['ops'])),
  ])


def read_info(directory):
  """The export.json of an export directory (or None when it has none)."""
  for candidate in (os.path.join(directory, INFO_FILENAME),
                    os.path.join(directory, SAVED_MODEL_EXTRA, INFO_FILENAME)):
    if os.path.isfile(candidate):
      with open(candidate) as f:
        return json.load(f)
  return None


# -- TF-Slim's export_inference_graph ----------------------------------------
def export_inference_graph(spec, output_file, batch_size=None,
                           is_training=False, checkpoint=None, as_text=False,
                           overwrite=False, num_frames=None, quantize=False):
  """Writes the GraphDef of `spec`'s network on an `input` placeholder of
  [batch_size, H, W, C] (TF-Slim's graph, plus `logits` and `probabilities`
  nodes), or of clips [batch_size, num_frames, H, W, C] for a video network
  (TF-Slim's --is_video_model); with a checkpoint, frozen (variables folded
  into constants). With `quantize`, the graph is quantization-aware
  training's eval graph (quantization.create_eval_graph: batch norm folded,
  fake quant with the checkpoint's ranges), as TF-Slim's --quantize wrote,
  the weights' ranges made symmetric for TFLite's int8 kernels.
  Returns a dict describing what was written."""
  check_destination(output_file, overwrite, '--output_file')
  if quantize and checkpoint:
    quantization.check_checkpoint(checkpoint)
  shape = ((batch_size,) + ((num_frames,) if num_frames else ()) +
           spec.image_shape)
  # TF 1's reference variables, as TF-Slim's graphs have: TensorFlow's own
  # freeze_graph, which TF-Slim's README and its recipes run on this file,
  # restores through a Saver of reference variables only and fails on TF 2's
  # resource variables with IndexError (tensorflow/tensorflow issue 24591).
  # A scope setting, not tf1.disable_resource_variables(): no process-wide
  # mode changes. Checkpoints are the same for either kind.
  with tf.Graph().as_default() as graph, tf1.variable_scope(
      tf1.get_variable_scope(), use_resource=False):
    images = tf1.placeholder(tf.float32, shape, name='input')
    logits = network_logits(spec, images, is_training=is_training)
    if quantize:  # before the outputs: an Identity would pass for a layer's
      # activation (as in tf.contrib); symmetric weight ranges, as TFLite's
      # int8 kernels take them (serving/learned_ranges.py)
      logits = learned_ranges.rewrite_for_int8(logits)
    tf.identity(logits, name='logits')
    tf.nn.softmax(logits, name='probabilities')
    graph_def = graph.as_graph_def()
    averaged = False
    if checkpoint:
      with tf1.Session() as session:
        averaged = restore_variables(session, checkpoint, spec.model_name,
                                     spec=spec)
        graph_def = (
            constants.convert_variables_to_constants_from_session_graph(
                session, graph_def, ['logits', 'probabilities']))
  with staged_path(output_file, overwrite, '--output_file') as staged:
    if as_text:
      with open(staged, 'w') as f:
        f.write(str(graph_def))
    else:
      with open(staged, 'wb') as f:
        f.write(graph_def.SerializeToString())
  return {'input': 'input', 'shape': list(shape),
          'outputs': ['logits', 'probabilities'], 'frozen': bool(checkpoint),
          'moving_averages': averaged, 'nodes': len(graph_def.node)}
