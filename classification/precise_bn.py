"""Batch-norm statistics you can trust: recomputed exactly, or flagged.

A batch-norm layer normalises with its batch's statistics while training and
with its moving averages when evaluating or exported. The averages move by
(1 - decay) per step from their initial values (mean 0, variance 1): at
TF-Slim's decay of 0.9997, 600 steps leave 0.9997^600 = 84% of each initial
value in place, and such a checkpoint evaluates at chance while the same
weights with batch statistics score high (tensorflow/tensorflow issues 1122
and 30274). Two remedies live here:

- `recompute`: with the weights fixed, N training batches go through the
  network; each layer's moving mean and variance become the plain average of
  exactly the statistic its own update would have moved them towards, one per
  batch (every clone's slice counts as a batch). The checkpoint is rewritten
  at the same step (runner/checkpoint_rewrite.py: never torn) and carries a
  marker tensor (`MARKER`, the batch count) that later saves drop.
- `unsettled_line`: what evaluation and the exporters print when a
  checkpoint's statistics are still mostly their initial values, computed
  from the decay the training graph used (training.json's
  `batch_norm_decay`), the global step and, with --moving_average_decay, the
  averages of the averages that evaluation reads.

The statistic each layer feeds its moving average is found in the graph
(classification/moving_statistics.py), not recomputed, so each layer keeps
its own definition (e.g. which variance correction it applies).
"""
import collections
import contextlib
import dataclasses
import math
import os

import numpy as np
import tensorflow as tf

import tf_compat  # noqa: F401
from classification import fine_tuning
from classification import moving_statistics
from deployment import model_deploy
from nets import nets_factory
import quantization
from quantization import fold as quantization_fold
from quantization import graph_edits
from quantization import rewrite as quantization_rewrite
from runner import checkpoint_rewrite
from runner import faults

tf1 = tf.compat.v1

# A tensor of the checkpoints `recompute` writes: how many batches made their
# statistics. Only the checkpoint rewritten has it (a later save drops it).
MARKER = 'precise_batch_norm/batches'
MOVING_AVERAGE_SUFFIX = fine_tuning.MOVING_AVERAGE_SUFFIX
# The share of initial value above which a checkpoint's statistics are said
# to be unsettled ("mostly their initial values").
UNSETTLED = 0.5


# -- recomputing ------------------------------------------------------------
@dataclasses.dataclass
class Result:
  checkpoint: str
  step: int
  layers: int  # batch-norm layers
  batches: int  # statistics averaged per variable
  images: int
  moved: float  # mean relative change of the moving statistics
  most_moved: str  # the variable that moved most, and by how much
  moving_averages: bool  # the averages got their own, from averaged weights

  def line(self):
    return ('Precise batch norm: the moving means and variances of %d layers '
            'are now the averages of %d batches (%d images) through the '
            'weights of step %d%s; they moved by %.0f%% on average (most: '
            '%s); checkpoint %s rewritten' % (
                self.layers, self.batches, self.images, self.step,
                ' (and their moving averages, through the averaged weights)'
                if self.moving_averages else '',
                100 * self.moved, self.most_moved, self.checkpoint))


def recompute(checkpoint, model_name, num_classes, input_fn, num_batches,
              num_clones=1, session_config=None, stopped=lambda: None):
  """Rewrites `checkpoint` with exact batch-norm statistics (see the module
  doc). `input_fn()` returns the training dataset of (images, labels), each
  element one step's batch; it is split into `num_clones` slices as training
  splits it, and every slice of `num_batches` elements counts. A checkpoint
  trained with --moving_average_decay gets two sets: the variables' from the
  weights, their averages' from the averaged weights (what evaluation with
  --moving_average_decay and the exports read), each consistent with the
  weights it is used with. `stopped()` is asked between batches: a signal
  number it returns stops the work (faults.Stopped), the checkpoint as it
  was. Returns a Result."""
  if num_batches < 1:
    raise ValueError('--precise_bn_batches must be at least 1, got %d'
                     % num_batches)
  checkpoint = os.path.abspath(checkpoint)
  tensors = checkpoint_rewrite.read_tensors(checkpoint)
  new, passes = {}, 0
  for suffix, averaged in (('', False), (MOVING_AVERAGE_SUFFIX, True)):
    found = _statistics(checkpoint, model_name, num_classes, input_fn,
                        num_batches, num_clones, session_config, averaged,
                        stopped)
    if found is None:  # no moving averages in the checkpoint
      break
    statistics, batches, images = found
    new.update({name + suffix: value for name, value in statistics.items()})
    passes += 1
  moved = {}
  for name, value in new.items():
    old = tensors[name].astype(np.float64)
    moved[name] = float(np.linalg.norm(value - old) / max(
        np.linalg.norm(value), np.linalg.norm(old), 1e-12))
    tensors[name] = value.astype(tensors[name].dtype)
  if quantization.holds_ranges(checkpoint):
    tensors.update(_weight_ranges(tensors, model_name, num_classes, input_fn))
  tensors[MARKER] = np.array(batches, dtype=np.int64)
  checkpoint_rewrite.rewrite(checkpoint, tensors)
  worst = max(moved, key=moved.get)
  return Result(
      checkpoint=checkpoint, step=_step(checkpoint),
      layers=len({name.rsplit('/', 1)[0] for name in statistics}),
      batches=batches, images=images,
      moved=float(np.mean(list(moved.values()))),
      most_moved='%s, %.0f%%' % (worst, 100 * moved[worst]),
      moving_averages=passes > 1)


def _step(checkpoint):
  try:
    return int(tf.train.load_variable(checkpoint, 'global_step'))
  except (tf.errors.OpError, ValueError):
    return 0


def _statistics(checkpoint, model_name, num_classes, input_fn, num_batches,
                num_clones, session_config, moving_averages, stopped):
  """({moving statistic: its average over the batches}, batches, images)
  through the checkpoint's weights (or their moving averages; None when it
  has none)."""
  with tf.Graph().as_default() as graph:
    images = tf1.data.make_one_shot_iterator(input_fn()).get_next()[0]
    network_fn = nets_factory.get_network_fn(model_name, num_classes,
                                             is_training=True)
    slices, _ = model_deploy.split_batch(images, num_clones)
    quantized = quantization.holds_ranges(checkpoint)
    scopes = ['clone_%d' % i if quantized and num_clones > 1 else ''
              for i in range(num_clones)]
    for i, piece in enumerate(slices):
      with tf1.variable_scope(tf1.get_variable_scope(), reuse=i > 0), \
          (tf1.name_scope(scopes[i]) if scopes[i]
           else contextlib.nullcontext()):
        network_fn(piece)
    if quantized:
      _quantize_with_fixed_ranges(graph, scopes)
    updates = moving_statistics.moving_updates(graph)
    if not updates:
      raise ValueError("--precise_bn_batches: model_name '%s' has no batch "
                       'norm, so nothing to recompute' % model_name)
    values = collections.defaultdict(list)  # a variable's, one per slice
    for update in updates:
      values[update.name].append(update.value)
    sums = {name: 0.0 for name in values}
    count = images_seen = 0
    batch_size = tf.shape(images)[0]
    with tf1.Session(graph=graph, config=session_config) as session:
      averaged = fine_tuning.restore_variables(
          session, checkpoint, model_name, moving_averages=moving_averages)
      if moving_averages and not averaged:
        return None
      for _ in range(num_batches):
        signum = stopped()
        if signum:
          raise faults.Stopped(signum, _step(checkpoint), checkpoint)
        try:
          batch, size = session.run((dict(values), batch_size))
        except tf.errors.OutOfRangeError:
          raise ValueError('--precise_bn_batches=%d: the training split ends '
                           'after %d batches' % (num_batches, count)) from None
        for name, per_slice in batch.items():
          sums[name] = sums[name] + np.sum(per_slice, axis=0, dtype=np.float64)
        count += 1
        images_seen += int(size)
  slices_per_batch = len(next(iter(values.values())))
  return ({name: sums[name] / (count * len(values[name])) for name in values},
          count * slices_per_batch, images_seen)


def _quantize_with_fixed_ranges(graph, clone_scopes):
  """A checkpoint of quantization-aware training: its statistics are those
  of the network it trained and evaluates, the quantized one. Batch norm is
  folded as in training (the batch's statistics, which are averaged here)
  and the activations' fake quants read the checkpoint's ranges without
  moving them. The weights' take their range from the folded weights they
  quantize, as every training step does (it writes it, then reads it): the
  folded weights scale with the checkpoint's moving variance, which is what
  this recomputes, so a stored range would clip them."""
  with quantization_rewrite.shared_by_clones(clone_scopes):
    quantization_fold.fold_batch_norms(graph, True, None)
    quantization_rewrite.quantize(graph, is_training=False)
  for op in graph.get_operations():
    if (op.type == 'FakeQuantWithMinMaxVars' and
        op.name.endswith('/weights_quant/FakeQuantWithMinMaxVars')):
      folded = op.inputs[0]
      with graph.as_default(), graph.name_scope(op.name.rpartition('/')[0] +
                                                '/'):
        low = tf.minimum(tf.reduce_min(folded), 0.0, name='last_min')
        high = tf.maximum(tf.reduce_max(folded), 0.0, name='last_max')
      graph_edits.reroute(low, op.inputs[1], [op])
      graph_edits.reroute(high, op.inputs[2], [op])


def _weight_ranges(tensors, model_name, num_classes, input_fn):
  """{name: value} of the weights' ranges of a quantization-aware checkpoint
  whose statistics are `tensors`' new ones. A folded layer's weights are
  weights x gamma / sigma_moving, so they move with the moving variance, and
  the range training writes each step is theirs (min and max, with 0 in
  it): kept as they were, they would clip the new folded weights in every
  eval graph and export. The activations' ranges stay: training normalised
  with each batch's statistics, not the moving ones."""
  with tf.Graph().as_default() as graph:
    shape = input_fn().element_spec[0].shape.as_list()
    nets_factory.get_network_fn(model_name, num_classes, is_training=False)(
        tf1.placeholder(tf.float32, [1] + shape[1:]))
    quantization.create_eval_graph()
    folded = {op.name.rpartition('/')[0]: op.inputs[0]
              for op in graph.get_operations()
              if op.type == 'FakeQuantWithMinMaxVars'
              and op.name.endswith('/weights_quant/FakeQuantWithMinMaxVars')}
    with tf1.Session(graph=graph) as session:
      session.run([v.assign(tensors[v.op.name])
                   for v in tf1.global_variables()])
      values = session.run(folded)
  ranges = {}
  for prefix, value in values.items():
    ranges[prefix + '/min'] = np.float32(min(value.min(), 0.0))
    ranges[prefix + '/max'] = np.float32(max(value.max(), 0.0))
  return ranges


# -- saying when they are not settled ---------------------------------------
def initial_share(decay, steps, moving_average_decay=None):
  """The share of the initial value left in a moving statistic after
  `steps` updates at `decay`; with `moving_average_decay`, in its
  ExponentialMovingAverage (TF-Slim's, whose decay at step t is
  min(decay, (1 + t) / (10 + t)) and whose shadow starts at the initial
  value too), which evaluation and export then read."""
  if not moving_average_decay:
    return decay ** steps
  share = 1.0  # of the shadow
  # Past 10^6 steps what is left of the start is below any threshold here.
  for t in range(1, min(steps, 10 ** 6) + 1):
    ema = min(moving_average_decay, (1.0 + t) / (10.0 + t))
    share = ema * share + (1.0 - ema) * decay ** t
  return share


def unsettled_line(checkpoint, record, moving_average_decay=None):
  """One line when the batch-norm statistics of `checkpoint` are still mostly
  their initial values, else None; read through their moving averages of
  `moving_average_decay` when given (evaluation with --moving_average_decay,
  an export of a checkpoint that has them). `record` is the checkpoint's
  training record (training_record.read): without one (a checkpoint trained
  elsewhere), or for a checkpoint rewritten by `recompute`, there is no
  line."""
  try:
    names = dict(tf.train.list_variables(checkpoint))
  except (tf.errors.OpError, ValueError):
    return None
  if MARKER in names or not any(n.endswith('/moving_mean') for n in names):
    return None
  record = record or {}
  decay = record.get('batch_norm_decay')
  if not decay or 'global_step' not in names:
    return None
  steps = int(tf.train.load_variable(checkpoint, 'global_step'))
  share = initial_share(decay, steps, moving_average_decay)
  if share <= UNSETTLED:
    return None
  return ('the batch-norm moving statistics of %s are still %d%% their initial '
          'values (%d steps at decay %g%s): results with them are not the '
          "network's; recompute them with train_image_classifier.py "
          '--precise_bn_batches=100 and the same --train_dir' % (
              checkpoint, math.floor(100 * share), steps, decay,
              ', read through moving averages of decay %g'
              % moving_average_decay if moving_average_decay else ''))
