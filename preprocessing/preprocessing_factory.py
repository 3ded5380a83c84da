"""Maps a preprocessing name, or a network name, to its preprocessing function.

The built-in preprocessings are the modules imported below, each registering
itself (preprocessing/registry.py). A network name resolves through the
network registry (the preprocessing its published checkpoint was trained
with), so no second table of networks is kept here.
"""
import difflib

import tf_compat  # noqa: F401
import zoo_plugins
from preprocessing import encoded_image
from preprocessing import registry
# The built-in preprocessings; each module registers itself.
from preprocessing import cifarnet_preprocessing  # noqa: F401  pylint: disable=unused-import
from preprocessing import inception_preprocessing  # noqa: F401  pylint: disable=unused-import
from preprocessing import lenet_preprocessing  # noqa: F401  pylint: disable=unused-import
from preprocessing import vgg_preprocessing  # noqa: F401  pylint: disable=unused-import


def list_preprocessings():
  return registry.names()


def get_info(name):
  """The PreprocessingInfo of a registered preprocessing name, of a
  network's name (its preprocessing), or of the import path of a module that
  registers one preprocessing; raises ValueError naming the valid ones."""
  info = registry.find(name)
  if info is not None:
    return info
  # Imported here: preprocessing names need no network registry, and building
  # the registry imports every network family.
  from nets import nets_factory
  models = nets_factory.list_models()
  if name in models:
    return registry.lookup(nets_factory.get_info(name).preprocessing_name)
  module = zoo_plugins.import_user_module(name, 'preprocessing')
  if module is not None:
    own = registry.registered_by(module.__name__)
    if len(own) != 1:
      raise ValueError("module '%s' registers %d preprocessings%s; pass a "
                       'registered name as --preprocessing_name' % (
                           name, len(own),
                           ' (%s)' % ', '.join(i.name for i in own) if own else ''))
    return own[0]
  close = difflib.get_close_matches(str(name), list_preprocessings() + models,
                                    n=1)
  hint = "; did you mean '%s'?" % close[0] if close else ''
  raise ValueError(
      "unknown preprocessing_name '%s'%s (known: %s, a model_name of "
      "nets_factory.list_models(), or a preprocessing module on the Python "
      'path)' % (name, hint, ', '.join(list_preprocessings())))


def get_preprocessing(name, is_training=False, use_grayscale=False):
  """Returns fn(image, output_height, output_width, **kwargs) -> float image.

  Args:
    name: a registered preprocessing name ('inception', 'vgg', 'lenet',
      'cifarnet', or one a module registered) or a registered network name,
      which uses its network's preprocessing.
    is_training: random augmentation for training, deterministic otherwise.
    use_grayscale: converts RGB images to one channel.

  Extra kwargs go to the registered `preprocess_image` (e.g. `bbox`,
  `fast_mode` for inception; `resize_side_min` for vgg). `image` may be an
  encoded_image.EncodedJpeg when the function has `takes_encoded_images`.
  """
  preprocess_image = get_info(name).preprocess_image

  def preprocessing_fn(image, output_height, output_width, **kwargs):
    return preprocess_image(image, output_height, output_width,
                            is_training=is_training,
                            use_grayscale=use_grayscale, **kwargs)

  # A family that decodes only what it keeps says so (encoded_image.py).
  if encoded_image.accepts_encoded(preprocess_image):
    encoded_image.takes_encoded_images(preprocessing_fn)
  return preprocessing_fn
