"""The model zoo: families, their helpers and the factory, at TF-Slim's paths.

One rule tells them apart:
  - a family registers its networks (nets.registry.register_network) and
    defines them: alexnet, cifarnet, lenet, overfeat, vgg, resnet_v1,
    resnet_v2, mobilenet_v1, inception_v1..v4, inception_resnet_v2, i3d, s3dg,
    mobilenet/mobilenet_v2, mobilenet/mobilenet_v3, nasnet/nasnet,
    nasnet/pnasnet;
  - a helper builds parts that families share and registers nothing: every
    `*_utils` module (fc_utils, resnet_utils, inception_utils, i3d_utils,
    nasnet/nasnet_utils) and the two MobileNet builders TF-Slim named
    otherwise, mobilenet/mobilenet and mobilenet/conv_blocks;
  - the factory is nets.registry (the one table) and nets.nets_factory
    (TF-Slim's interface to it); it imports the families only;
  - nets.inception re-exports the Inception families under one name, as
    TF-Slim's does.
A new family is a new module (here or in a subpackage) that registers; a new
helper is named `*_utils`.
"""
import tf_compat  # noqa: F401  (tf-slim on TF 2.21; must precede tf_slim use)

# Modules that are not families although their names do not say so.
NOT_FAMILIES = ('nets.mobilenet.mobilenet', 'nets.mobilenet.conv_blocks',
                'nets.registry', 'nets.nets_factory', 'nets.inception')


def is_family(module_name):
  """Whether `module_name` ('nets.<...>') is a family, by the rule above."""
  parts = module_name.split('.')
  return not (any(part.startswith('_') for part in parts)
              or parts[-1].endswith('_utils') or module_name in NOT_FAMILIES)
