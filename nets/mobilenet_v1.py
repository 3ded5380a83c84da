"""MobileNet v1 (Howard et al., 2017, https://arxiv.org/abs/1704.04861).

A 3x3 stride-2 convolution followed by 13 depthwise-separable blocks (3x3
depthwise convolution, then 1x1 pointwise convolution), each followed by batch
norm and ReLU6. `depth_multiplier` thins every layer; the published variants
are 1.0, 0.75, 0.5 and 0.25, all trained at 224x224 on 1001 classes.

Scope and end-point names follow TF-Slim's published checkpoints:
MobilenetV1/Conv2d_0, MobilenetV1/Conv2d_<i>_{depthwise,pointwise},
MobilenetV1/Logits/Conv2d_1c_1x1.
"""
import collections
import functools

import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets import inception_utils
from nets.mobilenet import conv_blocks
from nets.registry import register_network

tf1 = tf.compat.v1

# A full 3x3 convolution, and a depthwise 3x3 convolution followed by a 1x1
# pointwise one. `depth` is the number of output channels before thinning.
Conv = collections.namedtuple('Conv', ['kernel', 'stride', 'depth'])
DepthSepConv = collections.namedtuple('DepthSepConv', ['kernel', 'stride', 'depth'])

MOBILENETV1_CONV_DEFS = [
    Conv(kernel=[3, 3], stride=2, depth=32),
    DepthSepConv(kernel=[3, 3], stride=1, depth=64),
    DepthSepConv(kernel=[3, 3], stride=2, depth=128),
    DepthSepConv(kernel=[3, 3], stride=1, depth=128),
    DepthSepConv(kernel=[3, 3], stride=2, depth=256),
    DepthSepConv(kernel=[3, 3], stride=1, depth=256),
    DepthSepConv(kernel=[3, 3], stride=2, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=2, depth=1024),
    DepthSepConv(kernel=[3, 3], stride=1, depth=1024),
]


# Explicit 'SAME'-sized padding for 'VALID' convolutions (use_explicit_padding).
_fixed_padding = conv_blocks.fixed_padding


def mobilenet_v1_base(inputs,
                      final_endpoint='Conv2d_13_pointwise',
                      min_depth=8,
                      depth_multiplier=1.0,
                      conv_defs=None,
                      output_stride=None,
                      use_explicit_padding=False,
                      scope=None):
  """Builds MobileNet v1 from `inputs` up to `final_endpoint`.

  Args:
    inputs: [batch, height, width, channels] tensor.
    final_endpoint: the last end point to build: 'Conv2d_0' or
      'Conv2d_<i>_depthwise' / 'Conv2d_<i>_pointwise' for i in 1..13.
    min_depth: lower bound on every layer's depth once thinned.
    depth_multiplier: multiplies every layer's depth; must be > 0.
    conv_defs: list of Conv / DepthSepConv; MOBILENETV1_CONV_DEFS if None.
    output_stride: 8, 16 or 32 to cap the input/output resolution ratio by
      switching later layers to atrous convolution; None for no cap.
    use_explicit_padding: pad explicitly and convolve with 'VALID' instead of
      using 'SAME' padding.
    scope: optional variable scope.

  Returns:
    (net, end_points): the tensor at `final_endpoint` and an ordered dict of
    every end point built.

  Raises:
    ValueError: for an unknown `final_endpoint` or conv def type, a
      `depth_multiplier` <= 0, or an `output_stride` not in (8, 16, 32).
  """
  if depth_multiplier <= 0:
    raise ValueError('depth_multiplier must be greater than zero, got %r'
                     % depth_multiplier)
  if output_stride is not None and output_stride not in (8, 16, 32):
    raise ValueError('output_stride must be 8, 16, 32 or None, got %r'
                     % output_stride)
  if conv_defs is None:
    conv_defs = MOBILENETV1_CONV_DEFS

  depth = inception_utils.thinned_depth(depth_multiplier, min_depth)

  end_points = collections.OrderedDict()
  padding = 'VALID' if use_explicit_padding else 'SAME'
  with tf1.variable_scope(scope, 'MobilenetV1', [inputs]):
    with slim.arg_scope([slim.conv2d, slim.separable_conv2d], padding=padding):
      # Once the running stride reaches output_stride, later layers keep the
      # resolution (stride 1) and dilate instead, so the receptive field grows
      # as it would have with the stride.
      current_stride = 1
      rate = 1
      net = inputs
      for i, conv_def in enumerate(conv_defs):
        if output_stride is not None and current_stride == output_stride:
          layer_stride, layer_rate = 1, rate
          rate *= conv_def.stride
        else:
          layer_stride, layer_rate = conv_def.stride, 1
          current_stride *= conv_def.stride

        if use_explicit_padding:
          net = _fixed_padding(net, conv_def.kernel, layer_rate)

        if isinstance(conv_def, Conv):
          layers = [('Conv2d_%d' % i, functools.partial(
              slim.conv2d, num_outputs=depth(conv_def.depth),
              kernel_size=conv_def.kernel, stride=layer_stride,
              rate=layer_rate))]
        elif isinstance(conv_def, DepthSepConv):
          layers = [
              # num_outputs=None: separable_conv2d builds the depthwise part only.
              ('Conv2d_%d_depthwise' % i, functools.partial(
                  slim.separable_conv2d, num_outputs=None,
                  kernel_size=conv_def.kernel, depth_multiplier=1,
                  stride=layer_stride, rate=layer_rate)),
              ('Conv2d_%d_pointwise' % i, functools.partial(
                  slim.conv2d, num_outputs=depth(conv_def.depth),
                  kernel_size=[1, 1], stride=1)),
          ]
        else:
          raise ValueError('conv_defs[%d] is a %s; expected Conv or DepthSepConv'
                           % (i, type(conv_def).__name__))

        for end_point, layer in layers:
          net = layer(net, scope=end_point)
          end_points[end_point] = net
          if end_point == final_endpoint:
            return net, end_points
  raise ValueError('unknown final_endpoint %r (known: Conv2d_0, '
                   'Conv2d_<i>_depthwise, Conv2d_<i>_pointwise for i in 1..%d)'
                   % (final_endpoint, len(conv_defs) - 1))


def mobilenet_v1_arg_scope(is_training=True,
                           weight_decay=0.00004,
                           stddev=0.09,
                           regularize_depthwise=False,
                           batch_norm_decay=0.9997,
                           batch_norm_epsilon=0.001,
                           batch_norm_updates_collections=tf1.GraphKeys.UPDATE_OPS,
                           normalizer_fn=slim.batch_norm):
  """Convolutions: truncated-normal init, batch norm (with gamma), then ReLU6.

  Only the regular convolutions are L2-regularized unless
  `regularize_depthwise`: depthwise kernels have few weights each, and decaying
  them hurts accuracy. `is_training` sets batch norm's default mode; None leaves
  it unset. mobilenet_v1 sets it again from its own `is_training` in an inner
  scope, so the network's argument is the one that applies.
  """
  batch_norm_params = {
      'center': True,
      'scale': True,
      'decay': batch_norm_decay,
      'epsilon': batch_norm_epsilon,
      'updates_collections': batch_norm_updates_collections,
  }
  if is_training is not None:
    batch_norm_params['is_training'] = is_training
  regularizer = slim.l2_regularizer(weight_decay)
  depthwise_regularizer = regularizer if regularize_depthwise else None
  with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                      weights_initializer=tf1.truncated_normal_initializer(
                          stddev=stddev),
                      activation_fn=tf.nn.relu6,
                      normalizer_fn=normalizer_fn):
    # batch_norm's own arg_scope (not normalizer_params) so that an inner
    # arg_scope on slim.batch_norm can still override these values.
    with slim.arg_scope([slim.batch_norm], **batch_norm_params):
      with slim.arg_scope([slim.conv2d], weights_regularizer=regularizer):
        with slim.arg_scope([slim.separable_conv2d],
                            weights_regularizer=depthwise_regularizer) as sc:
          return sc


# The classifier's names in the published checkpoints: Inception v2's head
# with an unsized pool scope and no 'PreLogits'.
HEAD = inception_utils.Head([7, 7], pool_scope='AvgPool_1a', pre_logits=False)


def mobilenet_v1(inputs,
                 num_classes=1000,
                 dropout_keep_prob=0.999,
                 is_training=True,
                 min_depth=8,
                 depth_multiplier=1.0,
                 conv_defs=None,
                 prediction_fn=slim.softmax,
                 spatial_squeeze=True,
                 reuse=None,
                 scope='MobilenetV1',
                 global_pool=False):
  """MobileNet v1 classifier.

  Args:
    inputs: [batch, height, width, channels] tensor.
    num_classes: number of classes; 0 or None returns the pooled pre-logits
      features ([batch, 1, 1, depth]) instead of logits.
    dropout_keep_prob: fraction of activations kept before the classifier.
    is_training: training mode for batch norm and dropout.
    min_depth, depth_multiplier, conv_defs: see `mobilenet_v1_base`.
    prediction_fn: maps logits to end_points['Predictions'].
    spatial_squeeze: squeeze logits to [batch, num_classes].
    reuse: whether to reuse the variables of `scope`.
    scope: variable scope.
    global_pool: average over the whole feature map instead of a (at most) 7x7
      'VALID' pool; differs from the default only on inputs larger than 224.

  Returns:
    (logits, end_points).

  Raises:
    ValueError: if `inputs` is not rank 4.
  """
  if inputs.shape.ndims != 4:
    raise ValueError('inputs must be [batch, height, width, channels], got '
                     'shape %s' % inputs.shape)

  with tf1.variable_scope(scope, 'MobilenetV1', [inputs], reuse=reuse) as scope:
    # Inner to the arg_scope of mobilenet_v1_arg_scope, so this is_training
    # overrides the one set there.
    with slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
      net, end_points = mobilenet_v1_base(inputs, scope=scope,
                                          min_depth=min_depth,
                                          depth_multiplier=depth_multiplier,
                                          conv_defs=conv_defs)
      return inception_utils.classifier_head(
          net, end_points, num_classes, HEAD, dropout_keep_prob,
          prediction_fn, spatial_squeeze, global_pool)


# Each published file name ends with the size it was trained at.
register_network('mobilenet_v1', mobilenet_v1, mobilenet_v1_arg_scope,
                 default_image_size=224, logits_scopes=('MobilenetV1/Logits',),
                 published=('mobilenet_v1_1.0_224.tgz', 70.9, 89.9))

# The thinner published variants: mobilenet_v1 with another depth_multiplier.
mobilenet_v1_075 = functools.partial(mobilenet_v1, depth_multiplier=0.75)
register_network('mobilenet_v1_075', mobilenet_v1_075, mobilenet_v1_arg_scope,
                 default_image_size=224, logits_scopes=('MobilenetV1/Logits',))

mobilenet_v1_050 = functools.partial(mobilenet_v1, depth_multiplier=0.50)
register_network('mobilenet_v1_050', mobilenet_v1_050, mobilenet_v1_arg_scope,
                 default_image_size=224, logits_scopes=('MobilenetV1/Logits',),
                 published=('mobilenet_v1_0.5_160.tgz', 59.1, 81.9))

mobilenet_v1_025 = functools.partial(mobilenet_v1, depth_multiplier=0.25)
register_network('mobilenet_v1_025', mobilenet_v1_025, mobilenet_v1_arg_scope,
                 default_image_size=224, logits_scopes=('MobilenetV1/Logits',),
                 published=('mobilenet_v1_0.25_128.tgz', 41.5, 66.3))


# The registered names above by depth multiplier: TF-Slim's
# nets/mobilenet_v1_train.py and mobilenet_v1_eval.py pick the network by
# --depth_multiplier.
NAMES_BY_DEPTH_MULTIPLIER = {1.0: 'mobilenet_v1', 0.75: 'mobilenet_v1_075',
                             0.5: 'mobilenet_v1_050', 0.25: 'mobilenet_v1_025'}


def name_for_depth_multiplier(depth_multiplier):
  """The registered MobileNet v1 of `depth_multiplier`; ValueError naming
  the flag when the zoo has none."""
  if depth_multiplier not in NAMES_BY_DEPTH_MULTIPLIER:
    raise ValueError('--depth_multiplier=%g: the zoo has MobileNet v1 at %s'
                     % (depth_multiplier, ', '.join(
                         '%g' % m for m in sorted(NAMES_BY_DEPTH_MULTIPLIER))))
  return NAMES_BY_DEPTH_MULTIPLIER[depth_multiplier]
