"""MobileNet v3 (Howard et al., 2019, https://arxiv.org/abs/1905.02244) and
MobileNet-EdgeTPU.

v3 blocks are MobileNet v2's expanded_conv with per-block depthwise kernel
(3 or 5), activation (ReLU or hard-swish) and, in some blocks, a squeeze-and-
excite gate on the depthwise output (ReLU inside, hard-sigmoid gate, depth/4).
The head is part of the spec: a 1x1 convolution, an average pool to 1x1, then
a 1x1 convolution without batch norm (so with biases) and its activation,
before the shared classifier. The minimalistic variants drop squeeze-and-excite,
hard-swish and 5x5 kernels. EdgeTPU replaces the early depthwise blocks by
'fused' ones (a full 3x3 expansion convolution, no depthwise).

Published variants, all 224x224 on 1001 classes: MobilenetV3 large, small and
their minimalistic versions; MobilenetEdgeTPU at depth 1.0 and 0.75 (the latter
in fine-grain classification mode: the last layer keeps 1280 channels).
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
hard_swish = ops.hard_swish

squeeze_excite = functools.partial(
    ops.squeeze_excite, squeeze_factor=4, inner_activation_fn=tf.nn.relu,
    gating_fn=ops.hard_sigmoid)


def _se4(expansion_tensor, input_tensor):
  """expanded_conv's expansion_transform: gate the depthwise output."""
  del input_tensor
  return squeeze_excite(expansion_tensor)


def reduce_to_1x1(input_tensor, default_size=7, use_explicit_padding=False,
                  **kwargs):
  """Average pool over the whole map: [batch, 1, 1, depth].

  TF-Slim pooled maps that are not known to be square with fixed
  `default_size` windows, which fails or leaves a map larger than 1x1 at
  other input sizes; here every map is pooled whole (the same result at the
  published, square sizes), with reduce_mean when the size is unknown.
  `default_size` is kept for spec compatibility. The pool is 'VALID', so
  explicit padding is moot.
  """
  del default_size, use_explicit_padding
  height, width = input_tensor.shape.as_list()[1:3]
  if height is None or width is None:
    return tf.reduce_mean(input_tensor, [1, 2], keepdims=True)
  return slim.avg_pool2d(input_tensor, kernel_size=[height, width], **kwargs)


def mbv3_op(ef, n, k, s=1, act=tf.nn.relu, se=None, **kwargs):
  """A v3 block: expansion factor `ef`, `n` outputs, k x k depthwise, stride s,
  inner activation `act`, expansion transform `se`."""
  return op(ops.expanded_conv, expansion_size=expand_input(ef),
            kernel_size=(k, k), stride=s, num_outputs=n,
            inner_activation_fn=act, expansion_transform=se, **kwargs)


def mbv3_fused(ef, n, k, s=1, **kwargs):
  """An EdgeTPU 'fused' block: a k x k stride-s expansion convolution replaces
  the 1x1 expansion and the depthwise convolution."""
  expansion_fn = functools.partial(slim.conv2d, kernel_size=k, stride=s)
  return mbv3_op(ef, n, k=1, s=s, depthwise_location=None,
                 expansion_fn=expansion_fn, **kwargs)


mbv3_op_se = functools.partial(mbv3_op, se=_se4)

def v3_head(depth, embedding_depth):
  """The last layers of a v3 spec: a 1x1 convolution to `depth`, an average
  pool to 1x1, then a 1x1 convolution without batch norm (so with biases) to
  `embedding_depth`; hard-swish activations."""
  return [
      op(slim.conv2d, stride=1, kernel_size=[1, 1], num_outputs=depth,
         activation_fn=hard_swish),
      op(reduce_to_1x1, default_size=7, stride=1, padding='VALID'),
      op(slim.conv2d, stride=1, kernel_size=[1, 1], num_outputs=embedding_depth,
         normalizer_fn=None, activation_fn=hard_swish),
  ]


DEFAULTS = {
    (ops.expanded_conv,): {'normalizer_fn': slim.batch_norm, 'residual': True},
    (slim.conv2d, slim.fully_connected, slim.separable_conv2d): {
        'normalizer_fn': slim.batch_norm,
        'activation_fn': tf.nn.relu,
    },
    (slim.batch_norm,): {'center': True, 'scale': True},
}

V3_LARGE = dict(
    defaults=dict(DEFAULTS),
    spec=[
        op(slim.conv2d, stride=2, num_outputs=16, kernel_size=(3, 3),
           activation_fn=hard_swish),
        mbv3_op(ef=1, n=16, k=3),
        mbv3_op(ef=4, n=24, k=3, s=2),
        mbv3_op(ef=3, n=24, k=3, s=1),
        mbv3_op_se(ef=3, n=40, k=5, s=2),
        mbv3_op_se(ef=3, n=40, k=5, s=1),
        mbv3_op_se(ef=3, n=40, k=5, s=1),
        mbv3_op(ef=6, n=80, k=3, s=2, act=hard_swish),
        mbv3_op(ef=2.5, n=80, k=3, s=1, act=hard_swish),
        mbv3_op(ef=184 / 80., n=80, k=3, s=1, act=hard_swish),
        mbv3_op(ef=184 / 80., n=80, k=3, s=1, act=hard_swish),
        mbv3_op_se(ef=6, n=112, k=3, s=1, act=hard_swish),
        mbv3_op_se(ef=6, n=112, k=3, s=1, act=hard_swish),
        mbv3_op_se(ef=6, n=160, k=5, s=2, act=hard_swish),
        mbv3_op_se(ef=6, n=160, k=5, s=1, act=hard_swish),
        mbv3_op_se(ef=6, n=160, k=5, s=1, act=hard_swish),
    ] + v3_head(960, 1280))

V3_SMALL = dict(
    defaults=dict(DEFAULTS),
    spec=[
        op(slim.conv2d, stride=2, num_outputs=16, kernel_size=(3, 3),
           activation_fn=hard_swish),
        mbv3_op_se(ef=1, n=16, k=3, s=2),
        mbv3_op(ef=72. / 16, n=24, k=3, s=2),
        mbv3_op(ef=88. / 24, n=24, k=3, s=1),
        mbv3_op_se(ef=4, n=40, k=5, s=2, act=hard_swish),
        mbv3_op_se(ef=6, n=40, k=5, s=1, act=hard_swish),
        mbv3_op_se(ef=6, n=40, k=5, s=1, act=hard_swish),
        mbv3_op_se(ef=3, n=48, k=5, s=1, act=hard_swish),
        mbv3_op_se(ef=3, n=48, k=5, s=1, act=hard_swish),
        mbv3_op_se(ef=6, n=96, k=5, s=2, act=hard_swish),
        mbv3_op_se(ef=6, n=96, k=5, s=1, act=hard_swish),
        mbv3_op_se(ef=6, n=96, k=5, s=1, act=hard_swish),
    ] + v3_head(576, 1024))


def minimalistic(conv_defs):
  """The 'minimalistic' version of a v3 spec: ReLU for hard-swish, no
  squeeze-and-excite, 3x3 for 5x5 depthwise kernels (same depths)."""
  spec = []
  for opdef in conv_defs['spec']:
    params = dict(opdef.params)
    if params.get('activation_fn') is hard_swish:
      del params['activation_fn']  # the defaults' ReLU
    if params.get('inner_activation_fn') is hard_swish:
      params['inner_activation_fn'] = tf.nn.relu
    if 'expansion_transform' in params:
      params['expansion_transform'] = None
    if tuple(params.get('kernel_size', ())) == (5, 5):
      params['kernel_size'] = (3, 3)
    spec.append(opdef._replace(params=params))
  return dict(conv_defs, spec=spec)


V3_LARGE_MINIMALISTIC = minimalistic(V3_LARGE)
V3_SMALL_MINIMALISTIC = minimalistic(V3_SMALL)

# ReLU throughout; no squeeze-and-excite. The first fused block has ef=1, so
# it builds no expansion at all: only the 1x1 projection.
V3_EDGETPU = dict(
    defaults=dict(DEFAULTS),
    spec=[
        op(slim.conv2d, stride=2, num_outputs=32, kernel_size=(3, 3)),
        mbv3_fused(k=3, s=1, ef=1, n=16),
        mbv3_fused(k=3, s=2, ef=8, n=32),
        mbv3_fused(k=3, s=1, ef=4, n=32),
        mbv3_fused(k=3, s=1, ef=4, n=32),
        mbv3_fused(k=3, s=1, ef=4, n=32),
        mbv3_fused(k=3, s=2, ef=8, n=48),
        mbv3_fused(k=3, s=1, ef=4, n=48),
        mbv3_fused(k=3, s=1, ef=4, n=48),
        mbv3_fused(k=3, s=1, ef=4, n=48),
        mbv3_op(k=3, s=2, ef=8, n=96),
        mbv3_op(k=3, s=1, ef=4, n=96),
        mbv3_op(k=3, s=1, ef=4, n=96),
        mbv3_op(k=3, s=1, ef=4, n=96),
        mbv3_op(k=3, s=1, ef=8, n=96, residual=False),
        mbv3_op(k=3, s=1, ef=4, n=96),
        mbv3_op(k=3, s=1, ef=4, n=96),
        mbv3_op(k=3, s=1, ef=4, n=96),
        mbv3_op(k=5, s=2, ef=8, n=160),
        mbv3_op(k=5, s=1, ef=4, n=160),
        mbv3_op(k=5, s=1, ef=4, n=160),
        mbv3_op(k=5, s=1, ef=4, n=160),
        mbv3_op(k=3, s=1, ef=8, n=192),
        op(slim.conv2d, stride=1, num_outputs=1280, kernel_size=(1, 1)),
    ])


@slim.add_arg_scope
def mobilenet(input_tensor, num_classes=1001, depth_multiplier=1.0,
              scope='MobilenetV3', conv_defs=None,
              finegrain_classification_mode=False, **kwargs):
  """MobileNet v3 classifier. Inference mode is created by default; for
  training, build it under `training_scope(is_training=True)`.

  Arguments and results as mobilenet_v2.mobilenet, except that `conv_defs`
  defaults to V3_LARGE and `finegrain_classification_mode` keeps the last
  layer at its full depth whatever the multiplier.
  """
  return lib.build_family(
      input_tensor, V3_LARGE if conv_defs is None else conv_defs,
      'mobilenet_v3', depth_multiplier,
      finegrain_classification_mode, num_classes=num_classes, scope=scope,
      **kwargs)


mobilenet.default_image_size = 224
training_scope = lib.training_scope


@slim.add_arg_scope
def mobilenet_base(input_tensor, depth_multiplier=1.0, **kwargs):
  """MobileNet v3 without pooling and logits: (net, end_points)."""
  return mobilenet(input_tensor, depth_multiplier=depth_multiplier,
                   base_only=True, **kwargs)


# The published variants, all 224x224 on 1001 classes: `mobilenet` over
# another spec.
mobilenet_v3_large = functools.partial(mobilenet, conv_defs=V3_LARGE)
register_network('mobilenet_v3_large', mobilenet_v3_large, training_scope,
                 default_image_size=224, logits_scopes=('MobilenetV3/Logits',))

mobilenet_v3_small = functools.partial(mobilenet, conv_defs=V3_SMALL)
register_network('mobilenet_v3_small', mobilenet_v3_small, training_scope,
                 default_image_size=224, logits_scopes=('MobilenetV3/Logits',))

mobilenet_v3_large_minimalistic = functools.partial(
    mobilenet, conv_defs=V3_LARGE_MINIMALISTIC)
register_network('mobilenet_v3_large_minimalistic',
                 mobilenet_v3_large_minimalistic, training_scope,
                 default_image_size=224, logits_scopes=('MobilenetV3/Logits',))

mobilenet_v3_small_minimalistic = functools.partial(
    mobilenet, conv_defs=V3_SMALL_MINIMALISTIC)
register_network('mobilenet_v3_small_minimalistic',
                 mobilenet_v3_small_minimalistic, training_scope,
                 default_image_size=224, logits_scopes=('MobilenetV3/Logits',))

mobilenet_edgetpu = functools.partial(mobilenet, conv_defs=V3_EDGETPU,
                                      scope='MobilenetEdgeTPU')
register_network('mobilenet_edgetpu', mobilenet_edgetpu, training_scope,
                 default_image_size=224,
                 logits_scopes=('MobilenetEdgeTPU/Logits',))

mobilenet_edgetpu_075 = functools.partial(
    mobilenet, conv_defs=V3_EDGETPU, scope='MobilenetEdgeTPU',
    depth_multiplier=0.75, finegrain_classification_mode=True)
register_network('mobilenet_edgetpu_075', mobilenet_edgetpu_075,
                 training_scope, default_image_size=224,
                 logits_scopes=('MobilenetEdgeTPU/Logits',))

# TF-Slim's names of the variants.
large = mobilenet_v3_large
small = mobilenet_v3_small
large_minimalistic = mobilenet_v3_large_minimalistic
small_minimalistic = mobilenet_v3_small_minimalistic
edge_tpu = mobilenet_edgetpu
edge_tpu_075 = mobilenet_edgetpu_075
