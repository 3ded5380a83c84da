"""MobileNet v2 (Sandler et al., 2018, https://arxiv.org/abs/1801.04381).

A 3x3 stride-2 convolution, 17 inverted residual blocks (expanded_conv: 1x1
expansion by 6, 3x3 depthwise, linear 1x1 projection, skip connection when
shapes allow), a 1x1 convolution to 1280 channels, then the shared MobileNet
classifier. Batch norm and ReLU6 follow every convolution but the projections.

Published variants, all 224x224 on 1001 classes: depth multiplier 1.0, 1.4,
and 0.35 in fine-grain classification mode (its last layer keeps 1280
channels). Scopes: MobilenetV2/Conv, MobilenetV2/expanded_conv[_<i>]/{expand,
depthwise,project}, MobilenetV2/Conv_1, MobilenetV2/Logits/Conv2d_1c_1x1.
"""
import functools

import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets.mobilenet import mobilenet as lib
from nets.mobilenet import conv_blocks as ops
from nets.registry import register_network

op = lib.op
expand_input = ops.expand_input_by_factor

_CONV_LAYERS = (slim.conv2d, slim.fully_connected, slim.separable_conv2d)

V2_DEF = dict(
    defaults={
        # Batch norm's center/scale change the variables, so they belong to
        # the architecture rather than to training_scope.
        (slim.batch_norm,): {'center': True, 'scale': True},
        _CONV_LAYERS: {'normalizer_fn': slim.batch_norm,
                       'activation_fn': tf.nn.relu6},
        (ops.expanded_conv,): {'expansion_size': expand_input(6),
                               'split_expansion': 1,
                               'normalizer_fn': slim.batch_norm,
                               'residual': True},
        (slim.conv2d, slim.separable_conv2d): {'padding': 'SAME'},
    },
    spec=[
        op(slim.conv2d, stride=2, num_outputs=32, kernel_size=[3, 3]),
        # The first block has no expansion: its inner depth equals its input.
        op(ops.expanded_conv, expansion_size=expand_input(1, divisible_by=1),
           num_outputs=16),
        op(ops.expanded_conv, stride=2, num_outputs=24),
        op(ops.expanded_conv, stride=1, num_outputs=24),
        op(ops.expanded_conv, stride=2, num_outputs=32),
        op(ops.expanded_conv, stride=1, num_outputs=32),
        op(ops.expanded_conv, stride=1, num_outputs=32),
        op(ops.expanded_conv, stride=2, num_outputs=64),
        op(ops.expanded_conv, stride=1, num_outputs=64),
        op(ops.expanded_conv, stride=1, num_outputs=64),
        op(ops.expanded_conv, stride=1, num_outputs=64),
        op(ops.expanded_conv, stride=1, num_outputs=96),
        op(ops.expanded_conv, stride=1, num_outputs=96),
        op(ops.expanded_conv, stride=1, num_outputs=96),
        op(ops.expanded_conv, stride=2, num_outputs=160),
        op(ops.expanded_conv, stride=1, num_outputs=160),
        op(ops.expanded_conv, stride=1, num_outputs=160),
        op(ops.expanded_conv, stride=1, num_outputs=320),
        op(slim.conv2d, stride=1, kernel_size=[1, 1], num_outputs=1280),
    ],
)


def training_scope(**kwargs):
  """mobilenet.training_scope: weight_decay, stddev, dropout_keep_prob,
  bn_decay, is_training."""
  return lib.training_scope(**kwargs)


@slim.add_arg_scope
def mobilenet_v2(input_tensor, num_classes=1001, depth_multiplier=1.0,
                 scope='MobilenetV2', conv_defs=None,
                 finegrain_classification_mode=False, min_depth=None,
                 divisible_by=None, activation_fn=None, **kwargs):
  """MobileNet v2 classifier; inference mode unless is_training=True.

  Args:
    input_tensor: [batch, height, width, channels] tensor.
    num_classes: number of classes; 0 or None returns pooled features.
    depth_multiplier: multiplies the depth of every layer.
    scope: variable scope.
    conv_defs: architecture (V2_DEF if None).
    finegrain_classification_mode: with depth_multiplier < 1, keep the last
      layer at full depth (ignored if final_endpoint stops earlier).
    min_depth: lower bound of every thinned depth (default 8).
    divisible_by: every thinned depth is a multiple of this (default 8).
    activation_fn: replaces ReLU6 as the activation of the convolutions.
    **kwargs: passed to mobilenet.mobilenet: is_training, prediction_fn,
      reuse, base_only, final_endpoint, output_stride, use_explicit_padding.

  Returns:
    (logits, end_points).

  Raises:
    ValueError: on a generic `multiplier` argument.
  """
  conv_defs = V2_DEF if conv_defs is None else conv_defs
  if activation_fn:
    defaults = dict(conv_defs['defaults'])
    defaults[_CONV_LAYERS] = dict(defaults[_CONV_LAYERS],
                                  activation_fn=activation_fn)
    conv_defs = dict(conv_defs, defaults=defaults)
  # Only set what was given, so an enclosing arg_scope's values survive.
  depth_args = {k: v for k, v in (('min_depth', min_depth),
                                  ('divisible_by', divisible_by))
                if v is not None}
  with slim.arg_scope([lib.depth_multiplier], **depth_args):
    return lib.build_family(
        input_tensor, conv_defs, 'mobilenet_v2', depth_multiplier,
        finegrain_classification_mode and depth_multiplier < 1,
        num_classes=num_classes, scope=scope, **kwargs)


register_network('mobilenet_v2', mobilenet_v2, training_scope,
                 default_image_size=224, logits_scopes=('MobilenetV2/Logits',),
                 published=('mobilenet_v2_1.0_224.tgz', 71.9, 91.0))

# TF-Slim's name of the function.
mobilenet = mobilenet_v2


@slim.add_arg_scope
def mobilenet_base(input_tensor, depth_multiplier=1.0, **kwargs):
  """MobileNet v2 without pooling and logits: (net, end_points)."""
  return mobilenet_v2(input_tensor, depth_multiplier=depth_multiplier,
                      base_only=True, **kwargs)


# The published width variants: mobilenet_v2 with another depth_multiplier
# (thin ones keep their last layer whole).
mobilenet_v2_140 = functools.partial(mobilenet_v2, depth_multiplier=1.4)
register_network('mobilenet_v2_140', mobilenet_v2_140, training_scope,
                 default_image_size=224, logits_scopes=('MobilenetV2/Logits',),
                 published=('mobilenet_v2_1.4_224.tgz', 74.9, 92.5))

mobilenet_v2_050 = functools.partial(mobilenet_v2, depth_multiplier=0.5,
                                     finegrain_classification_mode=True)

mobilenet_v2_035 = functools.partial(mobilenet_v2, depth_multiplier=0.35,
                                     finegrain_classification_mode=True)
register_network('mobilenet_v2_035', mobilenet_v2_035, training_scope,
                 default_image_size=224, logits_scopes=('MobilenetV2/Logits',))
