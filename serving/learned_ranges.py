"""int8 TFLite from a quantization-aware training (QAT) checkpoint: the
ranges it learned, no calibration.

A checkpoint trained with --quantize_delay (its training record says so, or
it holds TF-Slim's `weights_quant` / `act_quant` ranges) is converted as TF
1's converter converted TF-Slim's quantized graphs: the graph gets the eval
rewrite (quantization.create_eval_graph, after the network and before the
outputs), is frozen, and TFLiteConverter's quantized-graph path
(`inference_type=tf.int8` with `quantized_input_stats`) takes every range
from the fake quants. Two ranges the rewrite does not give as TFLite's int8
kernels need them:

  * Weights. tf.contrib.quantize's weight range, and so ours, is
    [min(w, 0), max(w, 0)]: asymmetric, a zero point of its own. TFLite's
    int8 conv, depthwise conv and fully-connected kernels take weights with
    zero point 0 only: the converter writes the zero point and the model
    fails to load (`conv.cc: affine_quantization->zero_point->data[i] != 0
    (-1 != 0) ... Node number 0 (CONV_2D) failed to prepare`).
    `symmetric_weight_ranges` makes each layer's range [-m, m], m the larger
    magnitude of its min and max (the range contrib learns with
    symmetric=True): the same weights on a grid as fine or coarser by the
    ratio 2m / (max - min). Activations keep their learned ranges.
  * The input. No fake quant reads the image; its range is the one the
    network's preprocessing gives (its registration's `output_range`:
    inception and mobilenet [-1, 1], lenet [-1, 127/128], vgg the pixels
    less the channel means), or, for a preprocessing without one
    (cifarnet's per-image standardization), the range of calibration images.
"""
import numpy as np
import tensorflow as tf

import tf_compat  # noqa: F401
import quantization
from classification import training_record
from preprocessing import preprocessing_factory
from quantization import graph_edits

tf1 = tf.compat.v1

WEIGHT_QUANT_SCOPE = '/weights_quant/'
INT8 = (-128, 127)


def quantization_aware(checkpoint):
  """Whether `checkpoint` was trained with quantization: its training
  record's quantize_delay is set (>= 0), or it holds the ranges (a TF-Slim
  checkpoint). Raises ValueError when the record says so but the ranges
  are missing."""
  record = training_record.read(checkpoint)[0] or {}
  delay = record.get('quantize_delay')
  if delay is not None and delay >= 0:
    quantization.check_checkpoint(checkpoint, flag='--quantize=int8')
    return True
  return quantization.holds_ranges(checkpoint)


def symmetric_weight_ranges(graph=None):
  """Makes every weight fake quant of the rewritten `graph` (default: the
  default graph) quantize on [-m, m], m = max(|min|, |max|) of its learned
  range (module doc); returns how many it changed."""
  graph = graph or tf1.get_default_graph()
  changed = 0
  for op in graph.get_operations():
    if (op.type != 'FakeQuantWithMinMaxVars' or
        WEIGHT_QUANT_SCOPE not in '/' + op.name):
      continue
    low, high = op.inputs[1], op.inputs[2]
    with graph.as_default(), graph.name_scope(
        op.name.rpartition('/')[0] + '/symmetric/'):
      magnitude = tf.maximum(tf.abs(low), tf.abs(high), name='magnitude')
      graph_edits.reroute(tf.negative(magnitude, name='min'), low, [op])
      graph_edits.reroute(tf.identity(magnitude, name='max'), high, [op])
    changed += 1
  return changed


def rewrite_for_int8(logits):
  """Rewrites the default graph as quantization-aware training's eval graph
  with symmetric weight ranges (module doc); returns what stands for
  `logits` (their fake quant)."""
  quantization.create_eval_graph()
  symmetric_weight_ranges()
  return quantization.quantized_output(logits)


def preprocessing_range(preprocessing_name):
  """(low, high) of what `preprocessing_name` gives, or None when it
  declares no fixed range."""
  return preprocessing_factory.get_info(preprocessing_name).output_range


def range_of_images(images):
  """(low, high) of an iterable of float images, 0 included (TFLite's
  ranges hold 0); ValueError when there are none."""
  low = high = 0.0
  count = 0
  for image in images:
    image = np.asarray(image, np.float32)
    low, high = min(low, float(image.min())), max(high, float(image.max()))
    count += 1
  if not count:
    raise ValueError('no calibration images to take the input range from')
  if low == high:
    raise ValueError('the calibration images are all %g: no input range' %
                     low)
  return low, high


def input_quantization(low, high, bits_range=INT8):
  """(scale, zero_point) mapping the real range [low, high] (0 nudged in)
  onto the integers `bits_range`, as TFLite's quantizer does."""
  low, high = min(low, 0.0), max(high, 0.0)
  qmin, qmax = bits_range
  scale = (high - low) / (qmax - qmin)
  zero_point = int(np.clip(round(qmin - low / scale), qmin, qmax))
  return scale, zero_point


def quantized_input_stats(low, high, bits_range=INT8):
  """The converter's (mean, std_dev) for an input of range [low, high]:
  real = (quantized - mean) / std_dev."""
  scale, zero_point = input_quantization(low, high, bits_range)
  return float(zero_point), 1.0 / scale
