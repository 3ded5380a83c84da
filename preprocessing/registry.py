"""The one table of preprocessings: each preprocessing module registers here.

As a network family registers its networks (nets/registry.py) and a dataset
module its dataset (datasets/registry.py): one `register_preprocessing(...)`
call beside the function; `preprocessing_factory` imports the built-in
modules (a user's module by its import path), and a network's registration
names the preprocessing it was trained with.
"""
import dataclasses
import fnmatch
from typing import Callable, Optional, Tuple

import zoo_errors


@dataclasses.dataclass(frozen=True)
class PreprocessingInfo:
  """What the system knows about one registered preprocessing name."""
  name: str
  # fn(image, output_height, output_width, is_training=False,
  #    use_grayscale=False, **kwargs) -> float image, TF-Slim's signature
  preprocess_image: Callable
  module: str = ''  # the module that registered it
  # (low, high): every value its evaluation images can hold, whatever the
  # image (the int8 input range of a model trained with it); None when not
  # bounded by the pixels alone (e.g. per-image standardization).
  output_range: Optional[Tuple[float, float]] = None


_PREPROCESSINGS = {}


def register_preprocessing(name, preprocess_image, output_range=None):
  """Registers `preprocess_image` under `name`; a name can be registered
  once. `output_range`: (low, high) bounding every value it gives for
  uint8 pixels (PreprocessingInfo), None when it has no such bound."""
  if name in _PREPROCESSINGS:
    raise ValueError('preprocessing name %r is registered twice' % name)
  if output_range is not None:
    output_range = (float(output_range[0]), float(output_range[1]))
    if not output_range[0] < output_range[1]:
      raise ValueError('preprocessing %r: output_range %r is empty' % (
          name, output_range))
  info = PreprocessingInfo(name, preprocess_image,
                           getattr(preprocess_image, '__module__', ''),
                           output_range)
  _PREPROCESSINGS[name] = info
  return info


def lookup(name, what='preprocessing_name'):
  """The PreprocessingInfo of `name`, or ValueError naming the registered ones."""
  if name not in _PREPROCESSINGS:
    raise ValueError(zoo_errors.unknown_name_message(what, name,
                                                        _PREPROCESSINGS))
  return _PREPROCESSINGS[name]


def find(name):
  """The PreprocessingInfo of `name`, or None if none has that name."""
  return _PREPROCESSINGS.get(name)


def names(pattern='*'):
  return sorted(n for n in _PREPROCESSINGS if fnmatch.fnmatch(n, pattern))


def registered_by(module_name):
  """The PreprocessingInfos that module `module_name` registered."""
  return [info for info in _PREPROCESSINGS.values()
          if info.module == module_name]
