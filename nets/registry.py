"""The one table of networks: each family module registers its variants here.

A registration carries what the rest of the system needs to know about a network
(image size, frames per clip for video networks, classes and label offset of its
published checkpoint, the checkpoint's file and accuracy, preprocessing,
classifier scopes), so scripts, tests and the README's zoo table
(write_zoo_table.py) read it instead of keeping parallel tables.
"""
import dataclasses
import fnmatch
import functools
from typing import Callable, Optional, Tuple

import tf_compat  # noqa: F401
import zoo_errors
import zoo_plugins


@dataclasses.dataclass(frozen=True)
class PublishedCheckpoint:
  """A checkpoint as TF-Slim's README lists it: the archive's file name and
  its single-crop ImageNet accuracy in percent (None where it gives none)."""
  file_name: str
  top1: Optional[float] = None
  top5: Optional[float] = None


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
  # What to pass as --labels_offset on the dataset the checkpoint was trained
  # on, as converted here: ImageNet records keep TF-Slim's 'background' at
  # label 0 (1001 classes), so a 1000-class checkpoint (VGG, ResNet v1) needs 1.
  labels_offset: int = 0
  published: Optional[PublishedCheckpoint] = None  # None: TF-Slim lists none

  def classifier_classes(self, checkpoint_shapes):
    """The classes of the classifier in a checkpoint of this network (its
    {name: shape}): the length of a bias under the classifier scopes; None
    if the checkpoint has no classifier."""
    for name, shape in sorted(checkpoint_shapes.items()):
      if (name.endswith('/biases') and len(shape) == 1 and
          any(name.startswith(s + '/') for s in self.logits_scopes)):
        return int(shape[0])
    return None

  def fine_tuning_exclusions(self, num_classes, exclude_scopes=(),
                             checkpoint_shapes=None):
    """(scopes not to restore from a checkpoint of this network, why).

    The user's `exclude_scopes` win. Otherwise a network built for another
    class count than the checkpoint's cannot take its classifier, so the
    registered classifier scopes are left out and `why` is the line saying
    so. The checkpoint's classes are read from `checkpoint_shapes` ({name:
    shape}) when given, else the published checkpoint's are assumed; `why`
    is '' when nothing is left out on our own account.
    """
    if exclude_scopes:
      return tuple(exclude_scopes), ''
    classes = (self.classifier_classes(checkpoint_shapes or {}) or
               self.num_classes)
    if num_classes == classes or not self.logits_scopes:
      return (), ''
    why = ('Fine-tuning %s for %d classes (the checkpoint has %d): not '
           'restoring %s' % (self.name, num_classes, classes,
                             ', '.join(self.logits_scopes)))
    if (self.labels_offset and classes == self.num_classes and
        num_classes == self.num_classes + self.labels_offset):
      why += ("; on ImageNet records, --labels_offset=%d keeps the checkpoint's"
              ' classifier' % self.labels_offset)
    return self.logits_scopes, why

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


def register_network(name, network_fn, arg_scope, default_image_size=None,
                     num_classes=1001, preprocessing_name='inception',
                     logits_scopes=(), num_frames=0, labels_offset=0,
                     published=None):
  """Registers a network under `name`; a name can be registered once.

  `num_frames` > 0 marks a video network: its inputs are clips
  [batch, num_frames, height, width, 3], num_frames being the published
  clip length. `labels_offset` is what a user passes as --labels_offset to
  use the published checkpoint on its own dataset; `published` is
  (file name, top-1 %, top-5 %) of the checkpoint as TF-Slim's README lists
  it, or None when it lists none.

  The default image size is TF-Slim's `network_fn.default_image_size`, set
  beside the function and read here; passed explicitly (for a function that
  has none), it becomes that attribute, and a function that already carries
  another size is refused, so the two cannot drift.
  """
  if name in _NETWORKS:
    raise ValueError('network name %r is registered twice' % name)
  if num_frames < 0:
    raise ValueError('num_frames of %r must be >= 0, got %r' % (name, num_frames))
  if not 0 <= labels_offset < num_classes:
    raise ValueError('labels_offset of %r must be in [0, %d), got %r'
                     % (name, num_classes, labels_offset))
  if (isinstance(network_fn, functools.partial) and
      network_fn.__doc__ == functools.partial.__doc__):
    # A variant documents the network it binds, as TF-Slim's wrapped_partial
    # variants do (only the docstring: a __wrapped__ would make
    # inspect.signature show the unbound arguments).
    network_fn.__doc__ = network_fn.func.__doc__
  if default_image_size is None:
    default_image_size = getattr(network_fn, 'default_image_size', None)
    if default_image_size is None:
      raise ValueError('%r has no default_image_size: set it on the function '
                       'or pass it' % name)
  size = int(default_image_size)
  written = getattr(network_fn, 'default_image_size', size)
  if written != size:
    raise ValueError('%r is registered with default_image_size %d but its '
                     'function says %r' % (name, size, written))
  network_fn.default_image_size = size
  if published is not None and not isinstance(published, PublishedCheckpoint):
    published = PublishedCheckpoint(*published)
  info = NetworkInfo(name, network_fn, arg_scope, size, int(num_classes),
                     preprocessing_name, tuple(logits_scopes), int(num_frames),
                     int(labels_offset), published)
  _NETWORKS[name] = info
  return info


def lookup(name, what='model_name'):
  """The NetworkInfo of `name`: a registered network, or else a Python module
  of that name (importable from the current directory or PYTHONPATH) that
  registers one network when imported, as datasets and preprocessings are
  found. Raises ValueError naming the valid ones."""
  if name in _NETWORKS:
    return _NETWORKS[name]
  module = zoo_plugins.import_user_module(name, what)
  if module is not None:
    if name in _NETWORKS:
      return _NETWORKS[name]
    own = [info for info in _NETWORKS.values()
           if _defined_in(info.network_fn) == module.__name__]
    if len(own) == 1:
      return own[0]
    raise ValueError("module '%s' registers %s: pass one registered name as "
                     '--%s' % (name, '%d networks (%s)' % (
                         len(own), ', '.join(i.name for i in own))
                               if own else 'no network', what))
  raise ValueError(zoo_errors.unknown_name_message(what, name, _NETWORKS))


def _defined_in(network_fn):
  """The module that defines a network function (or the one it partially applies)."""
  return getattr(getattr(network_fn, 'func', network_fn), '__module__', None)


def find(name):
  """The NetworkInfo of `name`, or None if no network has that name."""
  return _NETWORKS.get(name)


def names(pattern='*'):
  return sorted(n for n in _NETWORKS if fnmatch.fnmatch(n, pattern))
