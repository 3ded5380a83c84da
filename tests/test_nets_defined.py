"""Every factory name is a visible definition in its family module.

A user reads a network's arguments where it is defined: each name
nets_factory lists has a line `def NAME(` (a function defined there, under
that name) or `NAME = functools.partial(...)` (a width or spec variant of a
function defined there), found by the rule `^(def )?NAME( =|\\()`; and its
signature is TF-Slim's. Source inspection only: no graph is built.
"""
import functools
import importlib
import inspect
import re
import types

import pytest

import nets
from nets import nets_factory

# TF-Slim's argument lists ('name' or 'name=default'; a function default is
# written by its name), per function a factory name stands for.
RESNET_V1 = ("inputs num_classes=None is_training=True global_pool=True "
             "output_stride=None spatial_squeeze=True "
             "store_non_strided_activations=False min_base_depth=8 "
             "depth_multiplier=1 reuse=None scope='{name}'")
RESNET_V2 = ("inputs num_classes=None is_training=True global_pool=True "
             "output_stride=None spatial_squeeze=True reuse=None "
             "scope='{name}'")
VGG = ("inputs num_classes=1000 is_training=True dropout_keep_prob=0.5 "
       "spatial_squeeze=True scope='{name}' fc_conv_padding='VALID' "
       "global_pool=False")
FC = ("inputs num_classes=1000 is_training=True dropout_keep_prob=0.5 "
      "spatial_squeeze=True scope='{name}' global_pool=False")
NASNET = ("images num_classes is_training=True final_endpoint=None "
          "config=None current_step=None")
PNASNET = "images num_classes is_training=True final_endpoint=None config=None"
MOBILENET_V1 = ("inputs num_classes=1000 dropout_keep_prob=0.999 "
                "is_training=True min_depth=8 depth_multiplier=1.0 "
                "conv_defs=None prediction_fn=softmax spatial_squeeze=True "
                "reuse=None scope='MobilenetV1' global_pool=False")
# MobileNet v2/v3 take is_training (and reuse, prediction_fn, ...) through
# **kwargs, as in TF-Slim.
MOBILENET_V2 = ("input_tensor num_classes=1001 depth_multiplier=1.0 "
                "scope='MobilenetV2' conv_defs=None "
                "finegrain_classification_mode=False min_depth=None "
                "divisible_by=None activation_fn=None **kwargs")
MOBILENET_V3 = ("input_tensor num_classes=1001 depth_multiplier=1.0 "
                "scope='MobilenetV3' conv_defs=None "
                "finegrain_classification_mode=False **kwargs")
SIGNATURES = {
    'alexnet_v2': FC, 'overfeat': FC,
    'vgg_a': VGG, 'vgg_16': VGG, 'vgg_19': VGG,
    'lenet': ("images num_classes=10 is_training=False dropout_keep_prob=0.5 "
              "prediction_fn=softmax scope='LeNet'"),
    'cifarnet': ("images num_classes=10 is_training=False "
                 "dropout_keep_prob=0.5 prediction_fn=softmax "
                 "scope='CifarNet'"),
    'inception_v1': ("inputs num_classes=1000 is_training=True "
                     "dropout_keep_prob=0.8 prediction_fn=softmax "
                     "spatial_squeeze=True reuse=None scope='InceptionV1' "
                     "global_pool=False"),
    'inception_v2': ("inputs num_classes=1000 is_training=True "
                     "dropout_keep_prob=0.8 min_depth=16 depth_multiplier=1.0 "
                     "prediction_fn=softmax spatial_squeeze=True reuse=None "
                     "scope='InceptionV2' global_pool=False "
                     "use_separable_conv=True data_format='NHWC'"),
    'inception_v3': ("inputs num_classes=1000 is_training=True "
                     "dropout_keep_prob=0.8 min_depth=16 depth_multiplier=1.0 "
                     "prediction_fn=softmax spatial_squeeze=True reuse=None "
                     "create_aux_logits=True scope='InceptionV3' "
                     "global_pool=False"),
    'inception_v4': ("inputs num_classes=1001 is_training=True "
                     "dropout_keep_prob=0.8 reuse=None scope='InceptionV4' "
                     "create_aux_logits=True"),
    'inception_resnet_v2': ("inputs num_classes=1001 is_training=True "
                            "dropout_keep_prob=0.8 reuse=None "
                            "scope='InceptionResnetV2' create_aux_logits=True "
                            "activation_fn=relu"),
    'i3d': ("inputs num_classes=1000 dropout_keep_prob=0.8 is_training=True "
            "prediction_fn=softmax spatial_squeeze=True reuse=None "
            "scope='InceptionV1'"),
    's3dg': ("inputs num_classes=1000 first_temporal_kernel_size=3 "
             "temporal_conv_startat='Conv2d_2c_3x3' "
             "gating_startat='Conv2d_2c_3x3' final_endpoint='Mixed_5c' "
             "min_depth=16 depth_multiplier=1.0 dropout_keep_prob=0.8 "
             "is_training=True prediction_fn=softmax spatial_squeeze=True "
             "reuse=None data_format='NDHWC' scope='InceptionV1'"),
    'mobilenet_v1': MOBILENET_V1,
    'mobilenet_v2': MOBILENET_V2,
    'nasnet_cifar': ("images num_classes is_training=True config=None "
                     "current_step=None"),
    'nasnet_mobile': NASNET, 'nasnet_large': NASNET,
    'pnasnet_mobile': PNASNET, 'pnasnet_large': PNASNET,
}
SIGNATURES.update({'resnet_v1_%d' % d: RESNET_V1 for d in (50, 101, 152, 200)})
SIGNATURES.update({'resnet_v2_%d' % d: RESNET_V2 for d in (50, 101, 152, 200)})

# Variants: (the function they are a partial of, its arguments they bind;
# a string value names a constant of the family module).
VARIANTS = {
    'mobilenet_v1_075': ('mobilenet_v1', {'depth_multiplier': 0.75}),
    'mobilenet_v1_050': ('mobilenet_v1', {'depth_multiplier': 0.5}),
    'mobilenet_v1_025': ('mobilenet_v1', {'depth_multiplier': 0.25}),
    'mobilenet_v2_140': ('mobilenet_v2', {'depth_multiplier': 1.4}),
    'mobilenet_v2_035': ('mobilenet_v2', {
        'depth_multiplier': 0.35, 'finegrain_classification_mode': True}),
    'mobilenet_v3_large': ('mobilenet', {'conv_defs': 'V3_LARGE'}),
    'mobilenet_v3_small': ('mobilenet', {'conv_defs': 'V3_SMALL'}),
    'mobilenet_v3_large_minimalistic': (
        'mobilenet', {'conv_defs': 'V3_LARGE_MINIMALISTIC'}),
    'mobilenet_v3_small_minimalistic': (
        'mobilenet', {'conv_defs': 'V3_SMALL_MINIMALISTIC'}),
    'mobilenet_edgetpu': ('mobilenet', {'conv_defs': 'V3_EDGETPU',
                                        'scope': 'MobilenetEdgeTPU'}),
    'mobilenet_edgetpu_075': ('mobilenet', {
        'conv_defs': 'V3_EDGETPU', 'scope': 'MobilenetEdgeTPU',
        'depth_multiplier': 0.75, 'finegrain_classification_mode': True}),
}
# The function of the MobileNet v3 variants is TF-Slim's mobilenet_v3.mobilenet.
SIGNATURES['mobilenet'] = MOBILENET_V3


def definition_line(source, name):
  """The line defining `name` at module level by the rule
  `^(def )?NAME( =|\\()`, or None."""
  match = re.search(r'^(def )?%s( =|\()' % re.escape(name), source, re.M)
  return match and source.count('\n', 0, match.start()) + 1


def _defined_function(module, source, name):
  """The function `def name(` defines in `module` (its source `source`):
  its code is named `name` and starts at that line (past decorators)."""
  line = definition_line(source, name)
  assert line, '%s: no line matches ^(def )?%s( =|\\()' % (
      module.__name__, name)
  assert source.splitlines()[line - 1].startswith('def '), (
      '%s.%s is not a def' % (module.__name__, name))
  function = inspect.unwrap(getattr(module, name))
  code = function.__code__
  assert (code.co_name, code.co_filename) == (name, module.__file__)
  decorators = 0
  while source.splitlines()[line - 2 - decorators].startswith('@'):
    decorators += 1
  assert code.co_firstlineno in (line, line - decorators)
  return function


def check_definition(module, name):
  """Raises AssertionError unless `name` is a def of `module` or a
  functools.partial of one; returns (function, bound keywords)."""
  with open(module.__file__) as f:
    source = f.read()
  value = getattr(module, name)
  if isinstance(value, functools.partial):
    line = definition_line(source, name)
    assert line and source.splitlines()[line - 1].startswith(
        '%s = functools.partial(' % name), (module.__name__, name)
    assert not value.args, (module.__name__, name)
    return (_defined_function(module, source, value.func.__name__),
            value.keywords)
  return _defined_function(module, source, name), {}


def _written(signature):
  def one(parameter):
    if parameter.kind is parameter.VAR_KEYWORD:
      return '**' + parameter.name
    if parameter.default is parameter.empty:
      return parameter.name
    default = parameter.default
    if isinstance(default, types.FunctionType) or callable(default):
      return '%s=%s' % (parameter.name, default.__name__)
    return '%s=%r' % (parameter.name, default)
  return ' '.join(one(p) for p in signature.parameters.values())


def _family_of(name):
  """The family module (one of nets.FAMILIES) defining `name`."""
  found = []
  for family in nets.FAMILIES:
    module = importlib.import_module(family)
    with open(module.__file__) as f:
      if definition_line(f.read(), name):
        found.append(module)
  assert len(found) == 1, (name, [m.__name__ for m in found])
  return found[0]


def test_every_factory_name_has_its_expected_signature_listed():
  assert sorted((set(SIGNATURES) | set(VARIANTS)) - {'mobilenet'}) == (
      nets_factory.list_models())


@pytest.mark.parametrize('name', nets_factory.list_models())
def test_factory_name_is_defined_in_its_family_with_tf_slims_arguments(name):
  module = _family_of(name)
  assert getattr(module, name) is nets_factory.networks_map[name]
  function, bound = check_definition(module, name)
  want_function, want_bound = VARIANTS.get(name, (name, {}))
  assert function.__name__ == want_function
  assert bound == {k: getattr(module, v) if k == 'conv_defs' else v
                   for k, v in want_bound.items()}
  written = _written(inspect.signature(function))
  assert written == SIGNATURES[want_function].format(name=name)
  # What get_network_fn passes: num_classes and is_training.
  parameters = inspect.signature(function).parameters
  assert 'num_classes' in parameters
  assert 'is_training' in parameters or 'kwargs' in parameters


def test_a_factory_made_function_or_unpacked_name_is_refused(tmp_path,
                                                             monkeypatch):
  """The control: the patterns this replaced fail the check."""
  (tmp_path / 'old_family.py').write_text(
      'def _variant(name):\n'
      '  def network(inputs, num_classes=1, is_training=True, scope=None):\n'
      '    return inputs, {}\n'
      '  network.__name__ = name\n'
      '  return network\n'
      '\n'
      'net_a = _variant("net_a")\n'
      'net_b, net_c = _variant("net_b"), _variant("net_c")\n')
  monkeypatch.syspath_prepend(str(tmp_path))
  module = importlib.import_module('old_family')
  for name in ('net_a', 'net_b'):
    with pytest.raises(AssertionError):
      check_definition(module, name)
  assert definition_line('net_b, net_c = f()\n', 'net_b') is None
  assert definition_line('x = 1\nnet_b = f()\n', 'net_b') == 2


def test_a_variant_carries_the_docstring_of_the_network_it_binds():
  """As TF-Slim's wrapped_partial variants do; TF-Slim's mobilenet_v3 test
  reads edge_tpu.__doc__."""
  from nets.mobilenet import mobilenet_v3  # pylint: disable=import-outside-toplevel
  variants = [nets_factory.networks_map[n] for n in nets_factory.list_models()
              if isinstance(nets_factory.networks_map[n], functools.partial)]
  assert len(variants) == 11
  for variant in variants:
    assert variant.__doc__ == variant.func.__doc__
  assert 'Inference mode is created by default' in mobilenet_v3.edge_tpu.__doc__
