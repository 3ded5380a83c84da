"""Makes tf-slim 1.1.0 work on TensorFlow 2.21; imported by every project package.

Three root causes, fixed once here rather than around every call site; the
first two are TensorFlow moving things tf-slim still looks up in the old place:

1. tf-slim's `batch_norm` goes through `tensorflow.python.layers.normalization`,
which lazily imports `tf_keras.legacy_tf_layers.normalization`. tf-keras 2.21 ships
that package as `tf_keras.src.legacy_tf_layers` only, so the lazy import fails with
ModuleNotFoundError. Registering the shipped modules under the expected names (the
same module objects, so classes are not duplicated) fixes it once for the process.

2. `tensorflow.python.framework.ops.Tensor` and `.IndexedSlices` moved to their
own modules, as did `control_flow_ops.cond` and `.case`; tf-slim still reads
them from the old modules (AttributeError): `ops` in optimize_loss,
create_train_op and layers utils, `control_flow_ops` in
`tfexample_decoder.Image` (which every TF-Slim dataset module's decoder
uses). They are re-exported where tf-slim looks (`MOVED`).

3. TF 2 tensor equality (`Tensor._USE_EQUALITY`) makes every `hash(variable)`
ask `executing_eagerly_outside_functions()`, a walk of the context stack
(about 50 us). tf-keras' legacy layers, which build slim's `batch_norm` and
`separable_conv2d`, hash every global variable each time they add a weight:
quadratic in the variables, so nasnet_large took over a minute to build.
In a TF 1 graph tensors and variables compare and hash by identity anyway;
`identity_hashing()` says so up front (hash is id(), no walk) while a network
is built (nets_factory's network function), and only then.

Importing this module changes no process-wide mode: eager execution stays as
the program set it (library code builds inside `tf.Graph().as_default()`; the
scripts switch their own process to graph mode), and `tf.keras` stays Keras 3
(the project uses tf-slim's layers, never `tf.compat.v1.layers`, which would
need TF_USE_LEGACY_KERAS=1 to route it to tf-keras).
"""
import contextlib
import importlib
import sys

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor as tensor_lib
from tensorflow.python.ops import cond as cond_lib
from tensorflow.python.ops import control_flow_case
from tensorflow.python.ops import control_flow_ops

_LEGACY = 'tf_keras.src.legacy_tf_layers'
_EXPECTED = 'tf_keras.legacy_tf_layers'
# (module tf-slim reads, name, the object TensorFlow now keeps elsewhere)
MOVED = (
    (ops, 'Tensor', tf.Tensor),
    (ops, 'IndexedSlices', tf.IndexedSlices),
    (control_flow_ops, 'cond', cond_lib.cond),
    (control_flow_ops, 'case', control_flow_case.case),
)


def install():
  """Idempotently aliases tf-keras' legacy layers where TensorFlow looks for them."""
  package = importlib.import_module(_LEGACY)
  sys.modules.setdefault(_EXPECTED, package)
  for name in ('base', 'convolutional', 'core', 'normalization', 'pooling'):
    sys.modules.setdefault('%s.%s' % (_EXPECTED, name),
                           importlib.import_module('%s.%s' % (_LEGACY, name)))
  for module, name, value in MOVED:
    if not hasattr(module, name):
      setattr(module, name, value)


@contextlib.contextmanager
def identity_hashing():
  """Inside a TF 1 graph: tensors hash and compare by identity without the
  context walk (root cause 3); elsewhere (eager, tf.function): no change.

  The switch is a class attribute, so it is set only for the duration of the
  block and restored after it, also when the block raises.
  """
  if ops.executing_eagerly_outside_functions():
    yield
    return
  saved = tensor_lib.Tensor._USE_EQUALITY  # pylint: disable=protected-access
  tensor_lib.Tensor._USE_EQUALITY = False  # pylint: disable=protected-access
  try:
    yield
  finally:
    tensor_lib.Tensor._USE_EQUALITY = saved  # pylint: disable=protected-access


install()
