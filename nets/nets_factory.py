"""Maps a network name to a function that builds it: `get_network_fn`.

The family modules listed in nets.FAMILIES are imported here, and each
registers its networks next to their definitions (see nets/registry.py);
helpers are imported only by the families that use them. Adding an
architecture is one new module in nets/ that calls `register_network`, and
its name in nets.FAMILIES.

`networks_map` and `arg_scopes_map` are TF-Slim's tables (name -> network
function, name -> arg-scope function), kept as read-only views of the
registry so that they always list exactly the registered networks.
"""
import collections.abc
import functools
import importlib

import tf_slim as slim

import nets
import tf_compat
import zoo_errors
from nets import registry
from nets.registry import NetworkInfo, register_network  # noqa: F401  (public API)


for _family in nets.FAMILIES:
  importlib.import_module(_family)


class RegistryView(collections.abc.Mapping):
  """A read-only mapping name -> one field of that name's NetworkInfo.

  It reads the registry on every access, so it stays in step with
  registrations made after import; register networks with
  `register_network`, not by assigning into the view.
  """

  def __init__(self, field, public_name):
    self._field = field
    self._public_name = public_name

  def __getitem__(self, name):
    info = registry.find(name)
    if info is None:
      raise KeyError(zoo_errors.unknown_name_message('model_name', name,
                                                   registry.names()))
    return getattr(info, self._field)

  def __iter__(self):
    return iter(registry.names())

  def __len__(self):
    return len(registry.names())

  def _read_only(self, *unused_args):
    raise TypeError('nets_factory.%s is read-only: register a network with '
                    'nets.registry.register_network(name, network_fn, '
                    'arg_scope, default_image_size, ...)' % self._public_name)

  __setitem__ = __delitem__ = _read_only

  def __repr__(self):
    return 'nets_factory.%s(%s)' % (self._public_name,
                                    ', '.join(registry.names()))


networks_map = RegistryView('network_fn', 'networks_map')
arg_scopes_map = RegistryView('arg_scope', 'arg_scopes_map')


def list_models(pattern='*'):
  """Registered network names matching a shell-style pattern, e.g. 'mobilenet*'."""
  return registry.names(pattern)


def get_info(name):
  return registry.lookup(name)


def get_network_fn(name, num_classes, weight_decay=0.0, is_training=False):
  """Returns fn(images, **kwargs) -> (logits, end_points) for network `name`.

  `num_classes` 0 or None builds the network without its classifier and returns
  the pre-logits features. `fn.default_image_size` is the size the published
  checkpoint was trained at; video networks (`get_info(name).num_frames` > 0)
  take clips [batch, frames, height, width, 3] and also have
  `fn.num_frames`. Raises ValueError for an unknown name.
  """
  info = registry.lookup(name)

  @functools.wraps(info.network_fn)
  def network_fn(images, **kwargs):
    with slim.arg_scope(info.arg_scope(weight_decay=weight_decay)), \
        tf_compat.identity_hashing():
      return info.network_fn(images, num_classes=num_classes,
                             is_training=is_training, **kwargs)

  network_fn.default_image_size = info.default_image_size
  if info.num_frames:
    network_fn.num_frames = info.num_frames
  return network_fn
