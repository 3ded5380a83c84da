"""Maps a network name to a function that builds it: `get_network_fn`.

Every module of the `nets` package is imported once, and registers its own
networks (see nets/registry.py). Adding an architecture is one new module in
nets/ that calls `register_network`; nothing here changes.
"""
import functools
import importlib
import pkgutil

import tf_slim as slim

import nets
from nets import registry
from nets.registry import NetworkInfo, register_network  # noqa: F401  (public API)


def _import_all_families():
  for module in pkgutil.iter_modules(nets.__path__):
    if not module.name.startswith('_'):
      importlib.import_module('nets.' + module.name)


_import_all_families()


def list_models(pattern='*'):
  """Registered network names matching a shell-style pattern, e.g. 'mobilenet*'."""
  return registry.names(pattern)


def get_info(name):
  return registry.lookup(name)


def get_network_fn(name, num_classes, weight_decay=0.0, is_training=False):
  """Returns fn(images, **kwargs) -> (logits, end_points) for network `name`.

  `num_classes` 0 or None builds the network without its classifier and returns
  the pre-logits features. `fn.default_image_size` is the size the published
  checkpoint was trained at. Raises ValueError for an unknown name.
  """
  info = registry.lookup(name)

  @functools.wraps(info.network_fn)
  def network_fn(images, **kwargs):
    with slim.arg_scope(info.arg_scope(weight_decay=weight_decay)):
      return info.network_fn(images, num_classes=num_classes,
                             is_training=is_training, **kwargs)

  network_fn.default_image_size = info.default_image_size
  return network_fn
