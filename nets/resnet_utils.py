"""Building blocks shared by the ResNet v1 and v2 families (TF-Slim layout).

A ResNet is a root block (7x7/2 conv, 3x3/2 max pool) followed by a list of
`Block`s, each a stack of residual units. Following TF-Slim, a block subsamples
in its *last* unit rather than its first: the same function as the paper's
networks, with less memory, and the layout of the published checkpoints.

`stack_blocks_dense` can stop striding once the requested `output_stride` is
reached and switch to atrous (dilated) convolution from there on, so dense
prediction gets finer feature maps from the same variables.

References:
  He et al., Deep Residual Learning for Image Recognition. arXiv:1512.03385
  He et al., Identity Mappings in Deep Residual Networks. arXiv:1603.05027
"""
import collections
import contextlib

import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401

tf1 = tf.compat.v1

class Block(collections.namedtuple('Block', ['scope', 'unit_fn', 'args'])):
  """One ResNet block: `unit_fn(net, **args[i])` for each unit i, in `scope`.

  `args` holds one dict per unit (e.g. depth, depth_bottleneck, stride).
  """


def bottleneck_block(unit_fn, scope, base_depth, num_units, stride):
  """A block of bottleneck units of width `base_depth` (output 4x wider).

  Only the last unit strides, so the block's output has stride `stride`.
  """
  unit = {'depth': base_depth * 4, 'depth_bottleneck': base_depth}
  return Block(scope, unit_fn,
               [dict(unit, stride=1)] * (num_units - 1) +
               [dict(unit, stride=stride)])


def standard_blocks(block_fn, units_per_block, min_base_depth=8,
                    depth_multiplier=1):
  """The four ImageNet blocks 'block1'..'block4' of a ResNet.

  Base depths 64, 128, 256, 512 (scaled by `depth_multiplier`, floored at
  `min_base_depth`), strides 2, 2, 2, 1: with the root block's stride 4 the
  nominal output stride is 32. `block_fn(scope, base_depth, num_units, stride)`
  builds one block, e.g. resnet_v1.resnet_v1_block.
  """
  blocks = []
  for i, (base_depth, num_units, stride) in enumerate(
      zip((64, 128, 256, 512), units_per_block, (2, 2, 2, 1))):
    base_depth = max(int(base_depth * depth_multiplier), min_base_depth)
    blocks.append(block_fn('block%d' % (i + 1), base_depth=base_depth,
                           num_units=num_units, stride=stride))
  return blocks


def subsample(inputs, factor, scope=None):
  """Keeps every `factor`-th row and column (identity when factor is 1)."""
  if factor == 1:
    return inputs
  # A 1x1 max pool with a stride is exactly strided slicing.
  return slim.max_pool2d(inputs, [1, 1], stride=factor, scope=scope)


def conv2d_same(inputs, num_outputs, kernel_size, stride, rate=1, scope=None):
  """Convolution with 'SAME' output size whose padding ignores the input size.

  TF's padding='SAME' with stride > 1 pads asymmetrically depending on whether
  the input size is even; padding explicitly by the effective kernel size and
  convolving 'VALID' makes the result equal to a stride-1 'SAME' convolution
  followed by `subsample`, which is what the published checkpoints assume.
  """
  if stride == 1:
    return slim.conv2d(inputs, num_outputs, kernel_size, stride=1, rate=rate,
                       padding='SAME', scope=scope)
  effective_kernel = kernel_size + (kernel_size - 1) * (rate - 1)
  pad_begin = (effective_kernel - 1) // 2
  pad_end = effective_kernel - 1 - pad_begin
  inputs = tf.pad(inputs, [[0, 0], [pad_begin, pad_end],
                           [pad_begin, pad_end], [0, 0]])
  return slim.conv2d(inputs, num_outputs, kernel_size, stride=stride,
                     rate=rate, padding='VALID', scope=scope)


def bottleneck_branches(inputs, projection_inputs, depth, depth_bottleneck,
                        stride, rate, normalized, shortcut_activation_fn=None):
  """(shortcut, residual) of a v1 or v2 bottleneck unit.

  The shortcut is `inputs` subsampled when the depth is kept, else a strided
  1x1 projection of `projection_inputs`; the residual is conv1 1x1 reduce,
  conv2 3x3 (strided, atrous `rate`), conv3 1x1 expand. Neither branch ends
  in an activation; `normalized` (v1) batch-normalizes their last layers,
  v2 leaves that to the next unit's 'preact'.
  """
  depth_in = slim.utils.last_dimension(inputs.get_shape(), min_rank=4)
  last_layer = {} if normalized else {'normalizer_fn': None}
  if depth == depth_in:
    shortcut = subsample(inputs, stride, 'shortcut')
  else:
    shortcut = slim.conv2d(projection_inputs, depth, [1, 1], stride=stride,
                           activation_fn=shortcut_activation_fn,
                           scope='shortcut', **last_layer)
  residual = slim.conv2d(projection_inputs, depth_bottleneck, [1, 1],
                         stride=1, scope='conv1')
  residual = conv2d_same(residual, depth_bottleneck, 3, stride, rate=rate,
                         scope='conv2')
  residual = slim.conv2d(residual, depth, [1, 1], stride=1,
                         activation_fn=None, scope='conv3', **last_layer)
  return shortcut, residual


@slim.add_arg_scope
def stack_blocks_dense(net, blocks, output_stride=None,
                       store_non_strided_activations=False,
                       outputs_collections=None):
  """Applies `blocks` in scopes 'block_name/unit_<i>'; returns the last output.

  Args:
    net: a [batch, height, width, channels] tensor.
    blocks: a list of `Block`s.
    output_stride: None for the nominal stride (the product of all unit
      strides); otherwise the wanted ratio of input to output resolution, which
      must be a product of unit strides from the start. Once reached, units
      run with stride 1 and an atrous rate multiplied by the strides skipped,
      so the variables stay the same.
    store_non_strided_activations: if True, the last unit of each block runs
      with stride 1 and the block's output (stored in `outputs_collections`)
      is subsampled afterwards: full-resolution block end points at 4x the
      cost of those units.
    outputs_collections: collection receiving each block's output.

  Raises:
    ValueError: if `output_stride` cannot be reached.
  """
  current_stride = 1  # Stride of `net` relative to the blocks' input.
  rate = 1  # Atrous rate standing in for strides skipped so far.

  def unreachable():
    return ValueError('output_stride %s cannot be reached by the unit strides '
                      'of blocks %s' % (output_stride,
                                        [b.scope for b in blocks]))

  for block in blocks:
    with tf1.variable_scope(block.scope, 'block', [net]) as sc:
      block_stride = 1
      for i, unit in enumerate(block.args):
        if store_non_strided_activations and i == len(block.args) - 1:
          block_stride = unit.get('stride', 1)
          unit = dict(unit, stride=1)
        with tf1.variable_scope('unit_%d' % (i + 1), values=[net]):
          if output_stride is not None and current_stride == output_stride:
            net = block.unit_fn(net, rate=rate, **dict(unit, stride=1))
            rate *= unit.get('stride', 1)
          else:
            net = block.unit_fn(net, rate=1, **unit)
            current_stride *= unit.get('stride', 1)
            if output_stride is not None and current_stride > output_stride:
              raise unreachable()
      net = slim.utils.collect_named_outputs(outputs_collections, sc.name, net)
      # The stride held back by store_non_strided_activations, applied now.
      if output_stride is not None and current_stride == output_stride:
        rate *= block_stride
      else:
        net = subsample(net, block_stride)
        current_stride *= block_stride
        if output_stride is not None and current_stride > output_stride:
          raise unreachable()
  if output_stride is not None and current_stride != output_stride:
    raise unreachable()
  return net


def resnet_arg_scope(weight_decay=0.0001,
                     batch_norm_decay=0.997,
                     batch_norm_epsilon=1e-5,
                     batch_norm_scale=True,
                     activation_fn=tf.nn.relu,
                     use_batch_norm=True,
                     batch_norm_updates_collections=tf1.GraphKeys.UPDATE_OPS):
  """Convs: L2 weight decay, variance-scaling init, batch norm then activation.

  The batch-norm defaults are those of the published checkpoints (converted
  from the original MSRA models); training from scratch may want others.
  """
  batch_norm_params = {
      'decay': batch_norm_decay,
      'epsilon': batch_norm_epsilon,
      'scale': batch_norm_scale,
      'updates_collections': batch_norm_updates_collections,
      'fused': None,
  }
  with slim.arg_scope(
      [slim.conv2d],
      weights_regularizer=slim.l2_regularizer(weight_decay),
      weights_initializer=slim.variance_scaling_initializer(),
      activation_fn=activation_fn,
      normalizer_fn=slim.batch_norm if use_batch_norm else None,
      normalizer_params=batch_norm_params):
    # v2's standalone batch norms (preact, postnorm) need the same settings.
    with slim.arg_scope([slim.batch_norm], **batch_norm_params):
      # 'SAME' pool1 keeps feature corners aligned with the image for dense
      # prediction (as fb.resnet.torch); the original Caffe models used 'VALID'.
      with slim.arg_scope([slim.max_pool2d], padding='SAME') as sc:
        return sc


def check_root_output_stride(output_stride):
  """The output stride left for the blocks after the stride-4 root block."""
  if output_stride is None:
    return None
  if output_stride % 4 != 0:
    raise ValueError('output_stride must be a multiple of 4 (the stride of '
                     'conv1 and pool1), got %s' % output_stride)
  return output_stride // 4


def classifier_head(net, end_points, num_classes, global_pool,
                    spatial_squeeze, scope_name):
  """Global average pool, 1x1 'logits' conv and softmax, as the checkpoints.

  Adds 'global_pool', '<scope>/logits', '<scope>/spatial_squeeze' and
  'predictions' to `end_points` for the parts built; `num_classes` 0 or None
  returns the (pooled) features.
  """
  if global_pool:
    net = tf.reduce_mean(net, [1, 2], name='pool5', keepdims=True)
    end_points['global_pool'] = net
  if num_classes:
    net = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                      normalizer_fn=None, scope='logits')
    end_points[scope_name + '/logits'] = net
    if spatial_squeeze:
      net = tf.squeeze(net, [1, 2], name='SpatialSqueeze')
      end_points[scope_name + '/spatial_squeeze'] = net
    end_points['predictions'] = slim.softmax(net, scope='predictions')
  return net, end_points


def resnet(inputs, blocks, unit_fn, preactivation, num_classes, is_training,
           global_pool, output_stride, include_root_block, spatial_squeeze,
           store_non_strided_activations, reuse, scope, default_scope):
  """The skeleton of v1 and v2: root block, `blocks`, classifier head.

  Args:
    inputs: [batch, height, width, channels] images.
    blocks: list of Block (see resnet_v1_block, resnet_v2_block).
    unit_fn: the family's bottleneck; its outputs become end points.
    preactivation: v2's layout: conv1 without batch norm and activation (the
      first unit's 'preact' provides them) and a final 'postnorm' (which has
      no end point, as in TF-Slim).
    num_classes: classes of the 'logits' layer; 0 or None returns the features
      (after global pooling if `global_pool`).
    is_training: batch-norm mode. None leaves it to an enclosing
      slim.arg_scope([slim.batch_norm], is_training=...).
    global_pool: average-pool the last feature map to 1x1 (classification);
      False keeps it (dense prediction).
    output_stride: None for the nominal stride 32; else a multiple of 4 that
      the unit strides reach (e.g. 8 or 16), using atrous convolution beyond.
    include_root_block: build conv1 (7x7/2) and pool1 (3x3/2); without it,
      v2's `inputs` should come from a convolution without normalization or
      activation, as conv1's output does.
    spatial_squeeze: squeeze 1x1 logits to [batch, num_classes].
    store_non_strided_activations: see stack_blocks_dense.
    reuse, scope: of the network's variable scope; `default_scope` names it
      when `scope` is None.

  Returns:
    net: logits, or features when `num_classes` is 0/None.
    end_points: ordered dict: conv1, every unit's convs and output, every
      block's output, then 'global_pool', logits and 'predictions'.
  """
  with tf1.variable_scope(scope, default_scope, [inputs], reuse=reuse) as sc:
    end_points_collection = sc.original_name_scope + '_end_points'
    with slim.arg_scope([slim.conv2d, unit_fn, stack_blocks_dense],
                        outputs_collections=end_points_collection), \
        (slim.arg_scope([slim.batch_norm], is_training=is_training)
         if is_training is not None else contextlib.nullcontext()):
      net = inputs
      if include_root_block:
        output_stride = check_root_output_stride(output_stride)
        with (slim.arg_scope([slim.conv2d], activation_fn=None,
                             normalizer_fn=None)
              if preactivation else contextlib.nullcontext()):
          net = conv2d_same(net, 64, 7, stride=2, scope='conv1')
        net = slim.max_pool2d(net, [3, 3], stride=2, scope='pool1')
      net = stack_blocks_dense(net, blocks, output_stride,
                               store_non_strided_activations)
      if preactivation:
        net = slim.batch_norm(net, activation_fn=tf.nn.relu, scope='postnorm')
      end_points = slim.utils.convert_collection_to_dict(
          end_points_collection)
      return classifier_head(net, end_points, num_classes, global_pool,
                             spatial_squeeze, sc.name)
