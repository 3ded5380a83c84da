"""The two graph edits both halves of the rewrite make: a tensor's readers
moved to another tensor, and the count of the graph's runs that the delays
(quant_delay, freeze_bn_delay) compare with."""
import tensorflow as tf

import tf_compat  # noqa: F401

tf1 = tf.compat.v1
STEP_NAME = 'fake_quantization_step'


def quantization_step(graph):
  """The number of runs of `graph` so far, this one included: an int64
  variable `fake_quantization_step` (in checkpoints) that each evaluation
  of the returned tensor increments."""
  try:
    return graph.get_tensor_by_name(STEP_NAME + '/Identity:0')
  except KeyError:
    pass
  with graph.as_default(), graph.name_scope(None):
    step = tf1.get_variable(STEP_NAME, shape=[], dtype=tf.int64,
                            initializer=tf1.zeros_initializer(),
                            trainable=False,
                            collections=[tf1.GraphKeys.GLOBAL_VARIABLES])
    with graph.name_scope(step.op.name + '/'):
      return tf.identity(tf1.assign_add(step, 1))


def reroute(new, old, consumers=None):
  """Makes `consumers` (default: all) of tensor `old` read `new`; returns
  how many inputs changed."""
  changed = 0
  for consumer in list(consumers if consumers is not None
                       else old.consumers()):
    for i, t in enumerate(consumer.inputs):
      if t is old:
        consumer._update_input(i, new)  # pylint: disable=protected-access
        changed += 1
  return changed
