"""The one table of networks: each family module registers its variants here.

A registration carries what the rest of the system needs to know about a network
(image size, frames per clip for video networks, classes and label offset of its
published checkpoint, preprocessing, classifier scopes), so scripts and tests
read it instead of keeping parallel tables.
"""
import dataclasses
import difflib
import fnmatch
from typing import Callable, Tuple

import tf_compat  # noqa: F401


@dataclasses.dataclass(frozen=True)
class NetworkInfo:
  """What the system knows about one registered network name."""
  name: str
  network_fn: Callable  # fn(inputs, num_classes, is_training, **kwargs)
  arg_scope: Callable  # fn(weight_decay=...) -> arg_scope dict
  default_image_size: int
  num_classes: int = 1001  # of the published checkpoint
  preprocessing_name: str = 'inception'
  logits_scopes: Tuple[str, ...] = ()  # classifier scopes, excluded when fine-tuning
  num_frames: int = 0  # frames per clip of a video network; 0: images

  @property
  def labels_offset(self):
    """1 when the published checkpoint reserves class 0 for 'background'."""
    return 1 if self.num_classes == 1001 else 0

  @property
  def input_rank(self):
    """4 for images [batch, height, width, 3], 5 for video clips
    [batch, frames, height, width, 3]."""
    return 5 if self.num_frames else 4

  def input_shape(self, batch_size, image_size=None, num_frames=None,
                  channels=3):
    """The network's input shape; sizes default to the registered ones."""
    size = image_size or self.default_image_size
    if self.num_frames:
      return [batch_size, num_frames or self.num_frames, size, size, channels]
    if num_frames:
      raise ValueError('%s takes images, not clips: num_frames=%r'
                       % (self.name, num_frames))
    return [batch_size, size, size, channels]


_NETWORKS = {}


def register_network(name, network_fn, arg_scope, default_image_size,
                     num_classes=1001, preprocessing_name='inception',
                     logits_scopes=(), num_frames=0):
  """Registers a network under `name`; a name can be registered once.

  `num_frames` > 0 marks a video network: its inputs are clips
  [batch, num_frames, height, width, 3], num_frames being the published
  clip length.
  """
  if name in _NETWORKS:
    raise ValueError('network name %r is registered twice' % name)
  if num_frames < 0:
    raise ValueError('num_frames of %r must be >= 0, got %r' % (name, num_frames))
  info = NetworkInfo(name, network_fn, arg_scope, int(default_image_size),
                     int(num_classes), preprocessing_name, tuple(logits_scopes),
                     int(num_frames))
  _NETWORKS[name] = info
  return info


def lookup(name, what='model_name'):
  """Returns the NetworkInfo of `name` or raises ValueError naming the valid ones."""
  if name not in _NETWORKS:
    raise ValueError(unknown_name_message(what, name, _NETWORKS))
  return _NETWORKS[name]


def find(name):
  """The NetworkInfo of `name`, or None if no network has that name."""
  return _NETWORKS.get(name)


def names(pattern='*'):
  return sorted(n for n in _NETWORKS if fnmatch.fnmatch(n, pattern))


def unknown_name_message(what, name, known):
  """`unknown model_name 'x'; did you mean 'y'? (known: ...)` in one line."""
  close = difflib.get_close_matches(str(name), list(known), n=1)
  hint = "; did you mean '%s'?" % close[0] if close else ''
  return "unknown %s '%s'%s (known: %s)" % (what, name, hint,
                                           ', '.join(sorted(known)))
