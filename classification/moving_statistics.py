"""The moving-average updates of a graph's batch-norm layers, found in it.

`assign_moving_average` (used by tf-slim's fused batch norm and by the Keras
legacy layer that slim's batch_norm builds on) assigns
`variable - (variable - value) * (1 - decay)`: `value` is the second input
of the subtraction inside each update that UPDATE_OPS runs, and `1 - decay`
the other factor of the product. Reading them from the graph gives exactly
the statistic each layer moves towards, whatever its own definition.
"""
import dataclasses
from typing import List

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1

_ASSIGN_SUB = ('AssignSubVariableOp', 'AssignSub')


@dataclasses.dataclass
class MovingUpdate:
  """One moving statistic's update: variable `name` moves towards `value`
  by `decay_factor` (1 - decay) per step."""
  name: str
  value: tf.Tensor
  decay_factor: tf.Tensor


def _variable_name(handle):
  """The variable an assign op writes, from its first input."""
  op = handle.op
  while op.type in ('Identity', 'Enter') and op.inputs:
    op = op.inputs[0].op
  return op.name


def moving_updates(graph=None) -> List[MovingUpdate]:
  """The moving-average updates that UPDATE_OPS runs (batch norm's), in
  graph order. Raises ValueError naming an update of another form."""
  graph = graph or tf1.get_default_graph()
  roots = [getattr(t, 'op', t) for t in graph.get_collection(
      tf1.GraphKeys.UPDATE_OPS)]
  seen, stack, assigns = set(), list(roots), []
  while stack:  # back from UPDATE_OPS to the assignments, not past them
    op = stack.pop()
    if op in seen:
      continue
    seen.add(op)
    if op.type in _ASSIGN_SUB:
      assigns.append(op)
      continue
    stack.extend(t.op for t in op.inputs)
    stack.extend(op.control_inputs)
  updates = []
  for op in sorted(assigns, key=lambda o: o._id):  # pylint: disable=protected-access
    name = _variable_name(op.inputs[0])
    delta = op.inputs[1].op
    difference = [t.op for t in delta.inputs if t.op.type == 'Sub' and
                  _reads(t.op.inputs[0], name)] if delta.type == 'Mul' else []
    if len(difference) != 1:
      raise ValueError(
          'batch-norm update of %s (%s) is not variable - (variable - value) '
          '* (1 - decay): its statistics cannot be recomputed here'
          % (name, op.name))
    factor = [t for t in delta.inputs if t.op is not difference[0]]
    updates.append(MovingUpdate(name, difference[0].inputs[1], factor[0]))
  return updates


def _reads(tensor, name):
  op = tensor.op
  while op.type in ('Identity', 'ReadVariableOp') and op.inputs:
    if op.type == 'ReadVariableOp':
      return _variable_name(op.inputs[0]) == name
    op = op.inputs[0].op
  return op.name == name  # a reference variable read directly


def batch_norm_decay(graph=None, session=None):
  """The decay of the moving statistics the graph's UPDATE_OPS update (the
  median over layers), or None without batch norm."""
  updates = moving_updates(graph)
  if not updates:
    return None
  factors = (session or tf1.Session(graph=graph)).run(
      [u.decay_factor for u in updates])
  # 6 digits: the float32 constant 0.9997 reads back as 0.99970001.
  return float('%.6g' % (1.0 - np.median(np.asarray(factors, dtype=np.float64))))
