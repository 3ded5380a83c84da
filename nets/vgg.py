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


def vgg_arg_scope(weight_decay=0.0005):
  """ReLU layers with zero biases and L2 decay; SAME convolutions."""
  return fc_utils.arg_scope(weight_decay, tf1.zeros_initializer())


def _vgg(repeats, default_scope, inputs, num_classes, is_training,
         dropout_keep_prob, spatial_squeeze, scope, fc_conv_padding,
         global_pool):
  """Five stages of `repeats[i]` 3x3 convolutions, each stage followed by a
  2x2 max pool, then fc6 (7x7, `fc_conv_padding`) to fc8."""
  features = []
  for stage, (count, depth) in enumerate(zip(repeats, _STAGE_DEPTHS), 1):
    # slim.repeat names the layers conv<stage>/conv<stage>_<i>.
    features += [fc_utils.layer(slim.repeat, count, slim.conv2d, depth,
                                [3, 3], scope='conv%d' % stage),
                 fc_utils.layer(slim.max_pool2d, [2, 2],
                                scope='pool%d' % stage)]
  return fc_utils.build(default_scope, features, 4096, [7, 7], inputs,
                        num_classes, is_training, dropout_keep_prob,
                        spatial_squeeze, scope, global_pool, fc_conv_padding)


# The published VGG checkpoints have 1000 classes, without a background class.
def vgg_a(inputs, num_classes=1000, is_training=True, dropout_keep_prob=0.5,
          spatial_squeeze=True, scope='vgg_a', fc_conv_padding='VALID',
          global_pool=False):
  """VGG configuration A (11 layers): 1, 1, 2, 2, 2 convolutions per stage.

  Args:
    inputs: float images [batch, height, width, channels], 224x224 for
      classification.
    num_classes: classes of fc8; 0 or None returns the fc7 features instead.
    is_training: enables dropout.
    dropout_keep_prob: probability of keeping an fc6/fc7 activation.
    spatial_squeeze: drops the 1x1 spatial dimensions of the logits.
    scope: variable scope of the network.
    fc_conv_padding: padding of fc6; 'SAME' gives a prediction map of
      input/32 when run fully convolutionally, 'VALID' one of input/32 - 6.
    global_pool: averages fc7 over space first, for any input size (not
      part of the published network).

  Returns:
    (logits or features, end_points dict keyed by scope path).
  """
  return _vgg((1, 1, 2, 2, 2), 'vgg_a', inputs, num_classes, is_training,
              dropout_keep_prob, spatial_squeeze, scope, fc_conv_padding,
              global_pool)


register_network('vgg_a', vgg_a, vgg_arg_scope, default_image_size=224,
                 num_classes=1000, labels_offset=1, preprocessing_name='vgg',
                 logits_scopes=('vgg_a/fc8',))


def vgg_16(inputs, num_classes=1000, is_training=True, dropout_keep_prob=0.5,
           spatial_squeeze=True, scope='vgg_16', fc_conv_padding='VALID',
           global_pool=False):
  """VGG configuration D (16 layers): 2, 2, 3, 3, 3 convolutions per stage.
  Arguments and results as vgg_a."""
  return _vgg((2, 2, 3, 3, 3), 'vgg_16', inputs, num_classes, is_training,
              dropout_keep_prob, spatial_squeeze, scope, fc_conv_padding,
              global_pool)


register_network('vgg_16', vgg_16, vgg_arg_scope, default_image_size=224,
                 num_classes=1000, labels_offset=1, preprocessing_name='vgg',
                 logits_scopes=('vgg_16/fc8',),
                 published=('vgg_16_2016_08_28.tar.gz', 71.5, 89.8))


def vgg_19(inputs, num_classes=1000, is_training=True, dropout_keep_prob=0.5,
           spatial_squeeze=True, scope='vgg_19', fc_conv_padding='VALID',
           global_pool=False):
  """VGG configuration E (19 layers): 2, 2, 4, 4, 4 convolutions per stage.
  Arguments and results as vgg_a."""
  return _vgg((2, 2, 4, 4, 4), 'vgg_19', inputs, num_classes, is_training,
              dropout_keep_prob, spatial_squeeze, scope, fc_conv_padding,
              global_pool)


register_network('vgg_19', vgg_19, vgg_arg_scope, default_image_size=224,
                 num_classes=1000, labels_offset=1, preprocessing_name='vgg',
                 logits_scopes=('vgg_19/fc8',),
                 published=('vgg_19_2016_08_28.tar.gz', 71.1, 89.8))


# The configuration letters of the paper, as TF-Slim exports them.
vgg_d = vgg_16
vgg_e = vgg_19
