"""One interface to a trained classifier, wherever it lives: a checkpoint, a
SavedModel or a TFLite file (see serving/exporter.py for the exports).

    model = inference.open_model(saved_model='exports/lenet_digits/saved_model')
    logits = model.logits(images)               # preprocessed float images
    logits = model.logits_of_encoded([png, jpeg])   # image file bytes

`evaluate` runs a model over a dataset split with the metrics and meaning of
eval_image_classifier.py on a checkpoint; classify_image.py and the tests use
the rest.

A TFLite model runs with the kernels `tflite_kernels` names (the scripts'
--tflite_kernels):

    builtin  the default: TFLite's built-in kernels and no delegate; int8
             outputs within one unit of TFLM's, rarely apart
    xnnpack  the XNNPACK delegate TFLite adds unless told not to: fastest on
             a CPU, but its int8 rounding is not a microcontroller's (a few
             units apart, often)
    micro    TensorFlow Lite Micro's interpreter (serving/micro.py, a child
             process per batch): what the device computes

Measured differences and why the default: docs/deploying.md.

The interpreter is LiteRT's (the ai-edge-litert package, which replaces
tf.lite.Interpreter); where it is not installed, tf.lite.Interpreter's,
said once on stderr at the first inference.
"""
import importlib.metadata
import os
import sys
import warnings

import numpy as np
import tensorflow as tf

import tf_compat  # noqa: F401
import zoo_errors
from classification import classifier
from classification import fine_tuning
from datasets import reader
from serving import exporter
from serving import micro

tf1 = tf.compat.v1

# --tflite_kernels: what each value runs (the module doc says why each).
TFLITE_KERNELS = ('builtin', 'xnnpack', 'micro')
DEFAULT_TFLITE_KERNELS = 'builtin'
LITERT_PACKAGE = 'ai-edge-litert'  # on PyPI; imported as ai_edge_litert
_FALLBACK_NOTE = (
    'note: %s is not installed: TFLite models run with TensorFlow %s\'s '
    'tf.lite.Interpreter, which TensorFlow deprecates for it (pip install -r '
    'requirements.txt)')


class Model(object):
  """A classifier: `spec` (exporter.ModelSpec) says what it takes and gives."""
  kind = None

  def __init__(self, path, spec, global_step=None):
    self.path, self.spec, self.global_step = path, spec, global_step

  def logits(self, images):
    """float32 [N, K] logits of float images [N, H, W, C] preprocessed as
    the network's evaluation preprocessing does (exporter.preprocess)."""
    raise NotImplementedError

  def logits_of_encoded(self, encoded):
    """float32 [N, K] logits of N encoded images (JPEG, PNG, GIF, BMP)."""
    raise NotImplementedError

  def close(self):
    pass


def softmax(logits):
  shifted = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
  return shifted / np.sum(shifted, axis=-1, keepdims=True)


def top_k(logits, k=exporter.TOP_K):
  """[(class, probability), ...] best first, for each row of `logits`."""
  probabilities = softmax(np.asarray(logits, np.float64))
  order = np.argsort(-probabilities, axis=-1, kind='stable')[:, :k]
  return [[(int(c), float(p[c])) for c in row]
          for row, p in zip(order, probabilities)]


class CheckpointModel(Model):
  """The serving graph restored from a checkpoint, as the exports are made."""
  kind = 'checkpoint'

  def __init__(self, checkpoint, spec):
    checkpoint = fine_tuning.resolve_checkpoint(checkpoint)
    self._graph = exporter.RestoredGraph(spec, checkpoint)
    super().__init__(checkpoint, spec, self._graph.global_step)

  def logits(self, images):
    return self._graph.run(images=images)['logits']

  def logits_of_encoded(self, encoded):
    return self._graph.run(image_bytes=encoded)['logits']

  def close(self):
    self._graph.close()


class SavedModelModel(Model):
  """An exported SavedModel, through its two signatures."""
  kind = 'saved_model'

  def __init__(self, export_dir, spec):
    self._graph = tf.Graph()
    self._session = tf1.Session(graph=self._graph)
    with self._graph.as_default():
      meta_graph = tf1.saved_model.loader.load(
          self._session, [tf1.saved_model.tag_constants.SERVING], export_dir)
    signatures = meta_graph.signature_def
    for key in (exporter.BYTES_SIGNATURE, exporter.IMAGES_SIGNATURE):
      if key not in signatures:
        raise ValueError("--saved_model '%s' has no '%s' signature (it has %s);"
                         ' export it with export_model.py' % (
                             export_dir, key, ', '.join(sorted(signatures))))
    self._bytes = signatures[exporter.BYTES_SIGNATURE]
    self._images = signatures[exporter.IMAGES_SIGNATURE]
    info = exporter.read_info(export_dir) or {}
    super().__init__(export_dir, spec, info.get('global_step'))

  def _run(self, signature, input_key, value):
    return self._session.run(
        signature.outputs['logits'].name,
        {signature.inputs[input_key].name: value})

  def logits(self, images):
    return self._run(self._images, exporter.IMAGES_INPUT, images)

  def logits_of_encoded(self, encoded):
    return self._run(self._bytes, exporter.BYTES_INPUT, list(encoded))

  def close(self):
    self._session.close()


class _Preprocessor(object):
  """Encoded image -> the network's float image, in a graph of its own."""

  def __init__(self, spec):
    self._graph = tf.Graph()
    with self._graph.as_default():
      self._encoded = tf1.placeholder(tf.string, [])
      self._image = exporter.decode_and_preprocess(spec, self._encoded)
    self._session = tf1.Session(graph=self._graph)

  def __call__(self, encoded):
    return np.stack([self._session.run(self._image, {self._encoded: e})
                     for e in encoded])


def check_tflite_kernels(kernels):
  """Raises ValueError (one line naming the flag) unless `kernels` is one of
  TFLITE_KERNELS."""
  if kernels not in TFLITE_KERNELS:
    raise ValueError("--tflite_kernels must be one of %s, got '%s'" % (
        ', '.join(TFLITE_KERNELS), kernels))


class _Runtime(object):
  """The TFLite interpreter in use: LiteRT's, or tf.lite's without it."""

  def __init__(self):
    try:
      from ai_edge_litert import interpreter  # pylint: disable=import-outside-toplevel
      self.interpreter, self.resolvers = (interpreter.Interpreter,
                                          interpreter.OpResolverType)
      self.name = 'LiteRT %s' % importlib.metadata.version(LITERT_PACKAGE)
      self.fallback = False
    except ImportError:
      self.interpreter = tf.lite.Interpreter
      self.resolvers = tf.lite.experimental.OpResolverType
      self.name = 'tf.lite.Interpreter of TensorFlow %s' % tf.__version__
      self.fallback = True
    self.noted = False

  def open(self, path, kernels):
    """An Interpreter of `path` with its tensors allocated, running
    `kernels` ('micro' opens one for the model's details only)."""
    resolver = (self.resolvers.AUTO if kernels == 'xnnpack'  # its default
                else self.resolvers.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    with warnings.catch_warnings():
      # tf.lite.Interpreter (the fallback) warns at every construction that
      # it moves to ai-edge-litert; the fallback's note says so once.
      warnings.simplefilter('ignore')
      interpreter = self.interpreter(model_path=path,
                                     experimental_op_resolver_type=resolver)
      interpreter.allocate_tensors()
    return interpreter

  def note_fallback(self):
    """Says once on stderr that tf.lite.Interpreter stands in for LiteRT."""
    if self.fallback and not self.noted:
      self.noted = True
      print(_FALLBACK_NOTE % (LITERT_PACKAGE, tf.__version__),
            file=sys.stderr, flush=True)


_RUNTIME = None


def tflite_runtime():
  """The _Runtime of this process (chosen at the first TFLite model)."""
  global _RUNTIME  # pylint: disable=global-statement
  if _RUNTIME is None:
    _RUNTIME = _Runtime()
  return _RUNTIME


def _delegated(interpreter):
  """Whether a delegate took some of the model's ops: its node, DELEGATE,
  joins the ops (None when this interpreter does not list them)."""
  try:
    return any(op['op_name'] == 'DELEGATE'
               for op in interpreter._get_ops_details())  # pylint: disable=protected-access
  except (AttributeError, KeyError, RuntimeError, ValueError):
    return None


class TFLiteModel(Model):
  """A TFLite flatbuffer at batch 1; int8 inputs and outputs are quantized
  and dequantized with the model's own scales. `kernels` (TFLITE_KERNELS,
  the module doc) says what runs it."""
  kind = 'tflite'

  def __init__(self, path, spec, kernels=DEFAULT_TFLITE_KERNELS):
    check_tflite_kernels(kernels)
    if kernels == 'micro' and not micro.available():
      raise ValueError('--tflite_kernels=micro needs TensorFlow Lite Micro\'s '
                       'interpreter: %s is not installed (pip install -r '
                       'requirements.txt)' % micro.PACKAGE)
    self.kernels = kernels
    self._runtime = tflite_runtime()
    try:
      self._interpreter = self._runtime.open(path, kernels)
    except (ValueError, RuntimeError) as e:
      raise ValueError("--tflite_model '%s' is not a TFLite model: %s" % (
          path, zoo_errors.one_line(e))) from None
    self._input = self._interpreter.get_input_details()[0]
    outputs = self._interpreter.get_output_details()
    named = [d for d in outputs if d['name'] == 'logits']
    self._output = (named or outputs)[0]
    # TFLM's outputs come in the subgraph's order, as these details do.
    self._output_position = outputs.index(self._output)
    expected = (1,) + tuple(spec.image_shape)
    if tuple(self._input['shape']) != expected:
      raise ValueError("--tflite_model '%s' takes %s images, the network %s "
                       '%s' % (path, list(self._input['shape']),
                               spec.model_name, list(expected)))
    self._model_bytes = None
    if kernels == 'micro':
      with open(path, 'rb') as f:
        self._model_bytes = f.read()
    self._delegated = _delegated(self._interpreter)
    self._preprocessor = None
    info = exporter.read_info(os.path.dirname(path)) or {}
    super().__init__(path, spec, info.get('global_step'))

  @property
  def logits_scale(self):
    """The int8 (or uint8) logits' scale, one unit of them; None when they
    are float."""
    if self._output['dtype'] == np.float32:
      return None
    return float(self._output['quantization'][0])

  def kernels_line(self):
    """One line: which kernels run the model, e.g. `TFLite kernels: builtin
    (LiteRT 2.3.0's built-in kernels, no delegate)`."""
    runtime = self._runtime.name
    if self.kernels == 'micro':
      what = "TensorFlow Lite Micro's interpreter, %s %s" % (
          micro.PACKAGE, importlib.metadata.version(micro.PACKAGE))
    elif self.kernels == 'builtin':
      what = "%s's built-in kernels, no delegate" % runtime
    elif self._delegated is False:
      what = ("%s's built-in kernels: the XNNPACK delegate took none of the "
              "model's ops" % runtime)
    else:
      what = '%s with the XNNPACK delegate' % runtime
    return 'TFLite kernels: %s (%s)' % (self.kernels, what)

  def logits(self, images):
    self._runtime.note_fallback()
    images = np.asarray(images, np.float32)
    if not len(images):
      return np.zeros([0, self.spec.num_classes], np.float32)
    if self.kernels == 'micro':
      outputs = micro.run_micro(self._model_bytes,
                                _quantize(images, self._input),
                                micro.PROBE_ARENA)
      return _dequantize(outputs[self._output_position], self._output)
    rows = []
    for image in images:
      self._interpreter.set_tensor(self._input['index'],
                                   _quantize(image[np.newaxis], self._input))
      self._interpreter.invoke()
      rows.append(_dequantize(
          self._interpreter.get_tensor(self._output['index']), self._output))
    return np.concatenate(rows)

  def logits_of_encoded(self, encoded):
    if self._preprocessor is None:
      self._preprocessor = _Preprocessor(self.spec)
    return self.logits(self._preprocessor(encoded))


def _quantize(values, detail):
  if detail['dtype'] == np.float32:
    return values
  scale, zero_point = detail['quantization']
  info = np.iinfo(detail['dtype'])
  return np.clip(np.round(values / scale + zero_point), info.min,
                 info.max).astype(detail['dtype'])


def _dequantize(values, detail):
  if detail['dtype'] == np.float32:
    return values
  scale, zero_point = detail['quantization']
  return ((values.astype(np.float32) - zero_point) * scale).astype(np.float32)


def tflite_file(path):
  """A .tflite file, or the model.tflite of an export directory."""
  if os.path.isdir(path):
    path = os.path.join(path, exporter.TFLITE_FILENAME)
  if not os.path.isfile(path):
    raise ValueError("--tflite_model '%s' does not exist" % path)
  return path


def export_spec(path, spec_from_flags=None, flag='--saved_model'):
  """The ModelSpec an export recorded (its export.json), or else the one
  the flags describe (`spec_from_flags()`)."""
  info = exporter.read_info(path)
  if info is not None:
    return exporter.ModelSpec.from_json(info)
  if spec_from_flags is None:
    raise ValueError("%s '%s' has no %s; pass --model_name and --dataset_name "
                     'or --num_classes' % (flag, path, exporter.INFO_FILENAME))
  return spec_from_flags()


def open_model(checkpoint_path=None, saved_model=None, tflite_model=None,
               spec_from_flags=None, tflite_kernels=DEFAULT_TFLITE_KERNELS):
  """The Model behind exactly one of the three paths. A checkpoint needs
  `spec_from_flags()` (its network); an export recorded its own. A TFLite
  model runs with `tflite_kernels` (TFLITE_KERNELS)."""
  check_tflite_kernels(tflite_kernels)
  given = [name for name, value in (('--checkpoint_path', checkpoint_path),
                                    ('--saved_model', saved_model),
                                    ('--tflite_model', tflite_model)) if value]
  if len(given) != 1:
    raise ValueError('pass exactly one of --checkpoint_path, --saved_model and '
                     '--tflite_model (got %s)' % (', '.join(given) or 'none'))
  if checkpoint_path:
    return CheckpointModel(checkpoint_path, spec_from_flags())
  if saved_model:
    if not os.path.isfile(os.path.join(saved_model, 'saved_model.pb')):
      raise ValueError("--saved_model '%s' is not a SavedModel directory (no "
                       'saved_model.pb)' % saved_model)
    return SavedModelModel(saved_model,
                           export_spec(saved_model, spec_from_flags))
  path = tflite_file(tflite_model)
  return TFLiteModel(path, export_spec(os.path.dirname(path), spec_from_flags,
                                       '--tflite_model'), tflite_kernels)


def check_flags_agree(spec, path, **flags):
  """Raises ValueError when a flag given explicitly contradicts the export:
  flags maps a ModelSpec field to (flag name, value)."""
  for field, (flag, value) in flags.items():
    if getattr(spec, field) != value:
      raise ValueError("--%s=%s disagrees with the export '%s' (%s=%s); drop "
                       'the flag' % (flag, value, path, field,
                                     getattr(spec, field)))


def evaluate(model, dataset, batch_size, labels_offset=0, max_num_batches=None,
             num_readers=reader.NUM_READERS,
             num_preprocessing_threads=reader.NUM_PREPROCESSING_THREADS,
             progress=None):
  """{'Accuracy', 'Recall_5' (with more than 5 classes), 'confusion_matrix',
  'images'} of `model` on a dataset split (a descriptor), read and
  preprocessed as eval_image_classifier.py does for checkpoints;
  `progress.batch_done()` is called after each batch."""
  spec = model.spec
  if dataset.num_classes - labels_offset != spec.num_classes:
    raise ValueError(
        "%s '%s' has %d classes; %s/%s with --labels_offset=%d has %d" % (
            model.kind, model.path, spec.num_classes, dataset.name,
            dataset.split_name, labels_offset,
            dataset.num_classes - labels_offset))
  input_fn = classifier.make_input_fn(
      dataset, spec.model_name, batch_size, is_training=False,
      preprocessing_name=spec.preprocessing_name, image_size=spec.image_size,
      num_readers=num_readers,
      num_preprocessing_threads=num_preprocessing_threads,
      labels_offset=labels_offset, use_grayscale=spec.use_grayscale,
      num_epochs=1, deterministic=True)
  k = min(exporter.TOP_K, spec.num_classes)
  seen = correct = in_top_k = batches = 0
  confusion = np.zeros((spec.num_classes, spec.num_classes), np.int64)
  with tf.Graph().as_default():
    images, labels = tf1.data.make_one_shot_iterator(input_fn()).get_next()
    with tf1.Session() as session:
      while max_num_batches is None or batches < max_num_batches:
        try:
          x, y = session.run([images, labels])
        except tf.errors.OutOfRangeError:
          break
        if x.shape[1:] != spec.image_shape:
          raise ValueError('%s gives %s images, %s %s takes %s' % (
              dataset.name, list(x.shape[1:]), model.kind, model.path,
              list(spec.image_shape)))
        logits = model.logits(x)
        best = np.argsort(-logits, axis=1, kind='stable')[:, :k]
        correct += int(np.sum(best[:, 0] == y))
        in_top_k += int(np.sum(np.any(best == y[:, np.newaxis], axis=1)))
        np.add.at(confusion, (y, best[:, 0]), 1)
        seen += len(y)
        batches += 1
        if progress is not None:
          progress.batch_done()
  if not seen:
    raise ValueError('%s/%s gave no images' % (dataset.name,
                                               dataset.split_name))
  results = {'Accuracy': correct / seen, 'confusion_matrix': confusion,
             'images': seen}
  if spec.num_classes > classifier.RECALL_K:  # as the checkpoint's metrics
    results['Recall_%d' % classifier.RECALL_K] = in_top_k / seen
  return results
