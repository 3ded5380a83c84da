"""Maps a preprocessing name, or a network name, to its preprocessing function.

A network name resolves through the network registry (the preprocessing its
published checkpoint was trained with), so no second table of networks is kept
here.
"""
import difflib

import tf_compat  # noqa: F401
from preprocessing import cifarnet_preprocessing
from preprocessing import inception_preprocessing
from preprocessing import lenet_preprocessing
from preprocessing import vgg_preprocessing

_PREPROCESSINGS = {
    'cifarnet': cifarnet_preprocessing,
    'inception': inception_preprocessing,
    'lenet': lenet_preprocessing,
    'vgg': vgg_preprocessing,
}


def list_preprocessings():
  return sorted(_PREPROCESSINGS)


def _resolve(name):
  """The preprocessing name of `name`; raises ValueError naming the valid ones."""
  if name in _PREPROCESSINGS:
    return name
  # Imported here: preprocessing names need no network registry, and building
  # the registry imports every network family.
  from nets import nets_factory
  models = nets_factory.list_models()
  if name in models:
    return nets_factory.get_info(name).preprocessing_name
  close = difflib.get_close_matches(str(name), list(_PREPROCESSINGS) + models,
                                    n=1)
  hint = "; did you mean '%s'?" % close[0] if close else ''
  raise ValueError(
      "unknown preprocessing_name '%s'%s (known: %s, or a model_name of "
      "nets_factory.list_models())" % (name, hint,
                                       ', '.join(list_preprocessings())))


def get_preprocessing(name, is_training=False, use_grayscale=False):
  """Returns fn(image, output_height, output_width, **kwargs) -> float image.

  Args:
    name: a preprocessing name ('inception', 'vgg', 'lenet', 'cifarnet') or a
      registered network name, which uses its network's preprocessing.
    is_training: random augmentation for training, deterministic otherwise.
    use_grayscale: converts RGB images to one channel.

  Extra kwargs go to the module's `preprocess_image` (e.g. `bbox`,
  `fast_mode` for inception; `resize_side_min` for vgg).
  """
  module = _PREPROCESSINGS[_resolve(name)]

  def preprocessing_fn(image, output_height, output_width, **kwargs):
    return module.preprocess_image(image, output_height, output_width,
                                   is_training=is_training,
                                   use_grayscale=use_grayscale, **kwargs)

  return preprocessing_fn
