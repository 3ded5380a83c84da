"""Makes tf-slim 1.1.0 work on TensorFlow 2.21; imported by every project package.

Why: tf-slim's `batch_norm` goes through `tensorflow.python.layers.normalization`,
which lazily imports `tf_keras.legacy_tf_layers.normalization`. tf-keras 2.21 ships
that package as `tf_keras.src.legacy_tf_layers` only, so the lazy import fails with
ModuleNotFoundError. Registering the shipped modules under the expected names (the
same module objects, so classes are not duplicated) fixes it once for the process.
Graph mode is the programming model of this project (see README), so eager
execution is turned off here as well, before any graph is built.
"""
import importlib
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # noqa: E402

_LEGACY = 'tf_keras.src.legacy_tf_layers'
_EXPECTED = 'tf_keras.legacy_tf_layers'


def install():
  """Idempotently aliases tf-keras' legacy layers where TensorFlow looks for them."""
  if _EXPECTED + '.normalization' in sys.modules:
    return
  package = importlib.import_module(_LEGACY)
  sys.modules.setdefault(_EXPECTED, package)
  for name in ('base', 'convolutional', 'core', 'normalization', 'pooling'):
    sys.modules.setdefault('%s.%s' % (_EXPECTED, name),
                           importlib.import_module('%s.%s' % (_LEGACY, name)))


install()
tf.compat.v1.disable_eager_execution()
