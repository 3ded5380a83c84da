"""The model zoo: families, their helpers and the factory, at TF-Slim's paths.

  - a family defines networks and registers each one right after its
    definition (nets.registry.register_network); FAMILIES lists them, and
    nets.nets_factory imports exactly these;
  - a helper builds parts that families share and registers nothing: the
    `*_utils` modules (fc_utils, resnet_utils, inception_utils, i3d_utils,
    nasnet/nasnet_utils) and the two MobileNet builders TF-Slim named
    otherwise, mobilenet/mobilenet and mobilenet/conv_blocks;
  - the factory is nets.registry (the one table) and nets.nets_factory
    (TF-Slim's interface to it);
  - nets.inception re-exports the Inception families under one name, as
    TF-Slim's does;
  - the generative nets, nets.dcgan, nets.cyclegan and nets.pix2pix, are
    not classifiers: they register nothing and the factory does not list
    them (nor does TF-Slim's); GAN programs import them (docs/gans.md).
A new family is a new module that registers its networks, added to FAMILIES.
"""
import tf_compat  # noqa: F401  (tf-slim on TF 2.21; must precede tf_slim use)

FAMILIES = (
    'nets.alexnet',
    'nets.cifarnet',
    'nets.i3d',
    'nets.inception_resnet_v2',
    'nets.inception_v1',
    'nets.inception_v2',
    'nets.inception_v3',
    'nets.inception_v4',
    'nets.lenet',
    'nets.mobilenet_v1',
    'nets.mobilenet.mobilenet_v2',
    'nets.mobilenet.mobilenet_v3',
    'nets.nasnet.nasnet',
    'nets.nasnet.pnasnet',
    'nets.overfeat',
    'nets.resnet_v1',
    'nets.resnet_v2',
    'nets.s3dg',
    'nets.vgg',
)


def is_family(module_name):
  """Whether `module_name` ('nets.<...>') is one of FAMILIES."""
  return module_name in FAMILIES
