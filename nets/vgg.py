"""Oxford VGG networks A (11 layers), D (16) and E (19), as in TF-Slim.

Simonyan & Zisserman, "Very Deep Convolutional Networks for Large-Scale Image
Recognition", arXiv:1409.1556. The variants differ only in how many 3x3
convolutions each of the five stages repeats, so they share one builder. The
fully connected layers are convolutions (fc6 7x7, fc7 and fc8 1x1), so the
networks also run fully convolutionally with `spatial_squeeze=False`.
End-point keys are full scope paths ('vgg_16/conv1/conv1_1'), as TF-Slim's
outputs collection names them.
"""
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets import fc_utils
from nets.registry import register_network

tf1 = tf.compat.v1

_STAGE_DEPTHS = (64, 128, 256, 512, 512)
# Convolutions per stage of each variant (configurations A, D and E).
_REPEATS = {
    'vgg_a': (1, 1, 2, 2, 2),
    'vgg_16': (2, 2, 3, 3, 3),
    'vgg_19': (2, 2, 4, 4, 4),
}


def vgg_arg_scope(weight_decay=0.0005):
  """ReLU layers with zero biases and L2 decay; SAME convolutions."""
  return fc_utils.arg_scope(weight_decay, tf1.zeros_initializer())


def _features(repeats):
  """Five stages of `repeats` 3x3 convolutions, each followed by a 2x2 pool."""
  rows = []
  for stage, (count, depth) in enumerate(zip(repeats, _STAGE_DEPTHS), 1):
    # slim.repeat names the layers conv<stage>/conv<stage>_<i>.
    rows += [fc_utils.layer(slim.repeat, count, slim.conv2d, depth, [3, 3],
                            scope='conv%d' % stage),
             fc_utils.layer(slim.max_pool2d, [2, 2], scope='pool%d' % stage)]
  return rows


_ARGS_DOC = fc_utils.ARGS_DOC % {
    'size': '224x224 for classification.',
    'more': """
    fc_conv_padding: padding of fc6; 'SAME' gives a prediction map of
      input/32 when run fully convolutionally, 'VALID' one of input/32 - 6."""}


def _variant(name, configuration):
  """TF-Slim's vgg_<name>(inputs, ...): the stages of the variant's _REPEATS,
  then fc6 7x7 to fc8."""

  def network(inputs, num_classes=1000, is_training=True,
              dropout_keep_prob=0.5, spatial_squeeze=True, scope=name,
              fc_conv_padding='VALID', global_pool=False):
    return fc_utils.build(
        inputs, scope, name, _features(_REPEATS[name]),
        num_classes=num_classes, is_training=is_training,
        dropout_keep_prob=dropout_keep_prob, spatial_squeeze=spatial_squeeze,
        global_pool=global_pool, fc6_depth=4096, fc6_kernel=[7, 7],
        fc6_padding=fc_conv_padding)

  network.__name__ = network.__qualname__ = name
  network.__doc__ = 'VGG configuration %s.\n%s' % (configuration, _ARGS_DOC)
  network.default_image_size = 224
  return network


vgg_a = _variant('vgg_a', 'A (11 layers)')
vgg_16 = _variant('vgg_16', 'D (16 layers)')
vgg_19 = _variant('vgg_19', 'E (19 layers)')

# The configuration letters of the paper, as TF-Slim exports them.
vgg_d = vgg_16
vgg_e = vgg_19

for _fn in (vgg_a, vgg_16, vgg_19):
  # The published VGG checkpoints have 1000 classes, without a background class.
  register_network(_fn.__name__, _fn, vgg_arg_scope, num_classes=1000,
                   preprocessing_name='vgg',
                   logits_scopes=(_fn.__name__ + '/fc8',), labels_offset=1,
                   published={
                       'vgg_16': ('vgg_16_2016_08_28.tar.gz', 71.5, 89.8),
                       'vgg_19': ('vgg_19_2016_08_28.tar.gz', 71.1, 89.8),
                   }.get(_fn.__name__))
