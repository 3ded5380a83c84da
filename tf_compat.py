"""Makes tf-slim 1.1.0 work on TensorFlow 2.21; imported by every project package.

Three root causes, fixed once here rather than around every call site; the
first two are TensorFlow moving things tf-slim still looks up in the old place:

1. tf-slim's `batch_norm` goes through `tensorflow.python.layers.normalization`,
which lazily imports `tf_keras.legacy_tf_layers.normalization`. tf-keras 2.21 ships
that package as `tf_keras.src.legacy_tf_layers` only, so the lazy import fails with
ModuleNotFoundError. Registering the shipped modules under the expected names (the
same module objects, so classes are not duplicated) fixes it once for the process.

2. `tensorflow.python.framework.ops.Tensor` and `.IndexedSlices` moved to their
own modules; tf-slim's optimize_loss, create_train_op and layers utils still
read them from `ops` (AttributeError). They are re-exported there.

3. TF 2 tensor equality (`Tensor._USE_EQUALITY`) makes every `hash(variable)`
ask `executing_eagerly_outside_functions()`, a walk of the context stack
(about 50 us). tf-keras' legacy layers, which build slim's `batch_norm` and
`separable_conv2d`, hash every global variable each time they add a weight:
quadratic in the variables, so nasnet_large took over a minute to build.
Graph mode is TF 1's semantics, where tensors and variables compare and hash
by identity; `disable_tensor_equality` restores exactly that (hash is id()).

`tf.compat.v1.layers` (e.g. `tf1.layers.flatten`) is routed through Keras as
well and refuses to load under Keras 3; TF_USE_LEGACY_KERAS=1 (read lazily, at
the first use of `tf.keras`/`tf.compat.v1.layers`) routes it to tf-keras.
Graph mode is the programming model of this project (see README), so eager
execution is turned off here as well, before any graph is built.
"""
import importlib
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

import tensorflow as tf  # noqa: E402

_LEGACY = 'tf_keras.src.legacy_tf_layers'
_EXPECTED = 'tf_keras.legacy_tf_layers'


def install():
  """Idempotently aliases tf-keras' legacy layers where TensorFlow looks for them."""
  package = importlib.import_module(_LEGACY)
  sys.modules.setdefault(_EXPECTED, package)
  for name in ('base', 'convolutional', 'core', 'normalization', 'pooling'):
    sys.modules.setdefault('%s.%s' % (_EXPECTED, name),
                           importlib.import_module('%s.%s' % (_LEGACY, name)))
  from tensorflow.python.framework import ops  # pylint: disable=g-import-not-at-top
  for name, value in (('Tensor', tf.Tensor), ('IndexedSlices', tf.IndexedSlices)):
    if not hasattr(ops, name):
      setattr(ops, name, value)


install()
tf.compat.v1.disable_eager_execution()
tf.compat.v1.disable_tensor_equality()
