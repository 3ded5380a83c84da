"""I3D: Inflated 3-D Inception v1, as in TF-Slim.

Carreira and Zisserman, "Quo Vadis, Action Recognition? A New Model and the
Kinetics Dataset", https://arxiv.org/abs/1705.07750. The S3D-G trunk
(nets/s3dg.py) with full (not separable) 3-D convolutions, a [7, 7, 7] first
kernel, 3x3x3 convolutions from Conv2d_2c_3x3 on and no self-gating; same
scopes (InceptionV1/...), end points and head. Input: clips
[batch, frames, height, width, 3], 64 frames of 224x224 by default.
"""
import tf_slim as slim

import tf_compat  # noqa: F401
from nets import i3d_utils
from nets import s3dg as s3dg_lib
from nets.registry import register_network

_I3D_TRUNK = dict(first_temporal_kernel_size=7,
                  temporal_conv_startat='Conv2d_2c_3x3',
                  gating_startat=None,
                  min_depth=16,
                  depth_multiplier=1.0,
                  data_format='NDHWC')


def i3d_arg_scope(weight_decay=1e-7,
                  batch_norm_decay=0.999,
                  batch_norm_epsilon=0.001,
                  use_renorm=False,
                  separable_conv3d=False):
  """L2 weight decay, unfused batch norm (optionally renorm) and ReLU on the
  3-D convolutions; `separable_conv3d` makes the 3x3x3 ones separable."""
  return s3dg_lib.video_arg_scope(weight_decay, batch_norm_decay,
                                  batch_norm_epsilon, use_renorm,
                                  separable_conv3d)


def i3d_base(inputs, final_endpoint='Mixed_5c', scope='InceptionV1'):
  """The I3D trunk up to `final_endpoint` (see s3dg.s3dg_base for the names)."""
  i3d_utils.check_clips(inputs, 'i3d_base')
  return s3dg_lib.s3dg_base(inputs, final_endpoint=final_endpoint,
                            scope=scope, **_I3D_TRUNK)


def i3d(inputs,
        num_classes=1000,
        dropout_keep_prob=0.8,
        is_training=True,
        prediction_fn=slim.softmax,
        spatial_squeeze=True,
        reuse=None,
        scope='InceptionV1'):
  """I3D classifier; arguments as s3dg.s3dg's. Returns (logits, end_points);
  num_classes 0 or None returns the pooled features [batch, 1024]."""
  i3d_utils.check_clips(inputs, 'i3d')
  return s3dg_lib.s3dg(inputs, num_classes=num_classes,
                       dropout_keep_prob=dropout_keep_prob,
                       is_training=is_training, prediction_fn=prediction_fn,
                       spatial_squeeze=spatial_squeeze, reuse=reuse,
                       scope=scope, **_I3D_TRUNK)


# Clips of 64 frames of 224x224; TF-Slim's default of 1000 classes (it
# publishes no checkpoint of I3D).
register_network('i3d', i3d, i3d_arg_scope, default_image_size=224,
                 num_frames=64, num_classes=1000,
                 preprocessing_name='inception',
                 logits_scopes=('InceptionV1/Logits',))
