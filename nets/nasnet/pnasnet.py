"""PNASNet-5 (Liu et al. 2017, https://arxiv.org/abs/1712.00559), as in TF-Slim.

One searched cell does everything: the stem (`cell_stem_0/1`, after the same
3x3/2 conv as NASNet) and the body are all PNASNet-5 cells, the ones at 1/3 and
2/3 of depth built with stride 2 and doubled filters instead of separate
reduction cells. The cell machinery, stem, aux head and classifier are
NASNet's (nets/nasnet/nasnet_utils.py), and so are the arg_scopes.
  pnasnet_mobile  224 ImageNet, 9 cells of 54 filters.
  pnasnet_large   331 ImageNet, 12 cells of 216 filters.
(TF-Slim's build_pnasnet_mobile and build_pnasnet_large are aliases.)
"""
import tensorflow as tf

import tf_compat  # noqa: F401
from nets.nasnet import nasnet
from nets.nasnet import nasnet_utils
from nets.registry import register_network


def large_imagenet_config():
  """PNASNet-5 Large."""
  return nasnet_utils.model_config(
      stem_multiplier=3.0, num_cells=12, num_conv_filters=216,
      drop_path_keep_prob=0.6, skip_reduction_layer_input=1)


def mobile_imagenet_config():
  """PNASNet-5 Mobile."""
  return nasnet_utils.model_config(
      stem_multiplier=1.0, num_cells=9, num_conv_filters=54,
      drop_path_keep_prob=1.0, skip_reduction_layer_input=1)


def pnasnet_large_arg_scope(weight_decay=4e-5, batch_norm_decay=0.9997,
                            batch_norm_epsilon=0.001):
  """The arg_scope PNASNet Large was trained with (NASNet Large's, with 4e-5
  weight decay)."""
  return nasnet.nasnet_large_arg_scope(weight_decay, batch_norm_decay,
                                       batch_norm_epsilon)


def pnasnet_mobile_arg_scope(weight_decay=4e-5, batch_norm_decay=0.9997,
                             batch_norm_epsilon=0.001):
  """The arg_scope PNASNet Mobile was trained with."""
  return nasnet.nasnet_mobile_arg_scope(weight_decay, batch_norm_decay,
                                        batch_norm_epsilon)


class PNasNetNormalCell(nasnet_utils.SearchedCell):
  """The PNASNet-5 cell; strided where the network reduces."""

  OPERATIONS = ('separable_5x5_2', 'max_pool_3x3',
                'separable_7x7_2', 'max_pool_3x3',
                'separable_5x5_2', 'separable_3x3_2',
                'separable_3x3_2', 'max_pool_3x3',
                'separable_3x3_2', 'none')
  USED_HIDDENSTATES = (1, 1, 0, 0, 0, 0, 0)
  HIDDENSTATE_INDICES = (1, 1, 0, 0, 0, 0, 4, 0, 1, 0)


def _build_pnasnet_base(images, normal_cell, num_classes, hparams,
                        is_training, final_endpoint=None, current_step=None):
  """Stem, cells (strided at 1/3 and 2/3 of depth), classifier.

  Returns (logits, end_points); with a falsy num_classes the pooled features,
  with `final_endpoint` that end point.
  """
  points = nasnet_utils.EndPoints(final_endpoint)
  reduction_indices = nasnet_utils.calc_reduction_layers(
      hparams.num_cells, hparams.num_reduction_layers)
  net, cell_outputs = nasnet_utils.imagenet_stem(
      images, hparams, normal_cell, current_step=current_step)
  if points.add('Stem', net):
    return net, points.end_points

  aux_head_cells = nasnet_utils.aux_head_cells(hparams)
  activation_fn = tf.nn.relu6 if hparams.use_bounded_activation else tf.nn.relu
  filter_scaling = 1.0
  true_cell_num = 2  # the two stem cells come first
  prev_layer = None
  for cell_num in range(hparams.num_cells):
    is_reduction = cell_num in reduction_indices
    if is_reduction:
      filter_scaling *= hparams.filter_scaling_rate
    # Without skip_reduction_layer_input a strided cell keeps the second input
    # of the cell before it.
    if hparams.skip_reduction_layer_input or not is_reduction:
      prev_layer = cell_outputs[-2]
    net = normal_cell(net, scope='cell_{}'.format(cell_num),
                      filter_scaling=filter_scaling,
                      stride=2 if is_reduction else 1,
                      prev_layer=prev_layer, cell_num=true_cell_num,
                      current_step=current_step)
    if points.add('Cell_{}'.format(cell_num), net):
      return net, points.end_points
    true_cell_num += 1
    cell_outputs.append(net)
    if (hparams.use_aux_head and cell_num in aux_head_cells and num_classes
        and is_training):
      nasnet_utils.build_aux_head(activation_fn(net), points.end_points,
                                  num_classes, hparams,
                                  scope='aux_{}'.format(cell_num))

  return nasnet_utils.classifier(net, points, num_classes, hparams)


def _build(images, num_classes, is_training, config, default_config,
           final_endpoint):
  """The shared body of pnasnet_large and pnasnet_mobile."""
  hparams = nasnet_utils.training_hparams(config, default_config, is_training)
  images = nasnet_utils.to_data_format(images, hparams.data_format)
  current_step = nasnet_utils.drop_path_step(hparams, None)
  # No separate reduction cells: the body cells plus the two stem cells.
  total_num_cells = hparams.num_cells + 2
  normal_cell = PNasNetNormalCell(
      hparams.num_conv_filters, hparams.drop_path_keep_prob, total_num_cells,
      hparams.total_training_steps, hparams.use_bounded_activation)
  with nasnet_utils.cell_arg_scope(is_training, hparams.data_format):
    return _build_pnasnet_base(images, normal_cell=normal_cell,
                               num_classes=num_classes, hparams=hparams,
                               is_training=is_training,
                               final_endpoint=final_endpoint,
                               current_step=current_step)


def pnasnet_large(images, num_classes, is_training=True, final_endpoint=None,
                  config=None):
  """PNASNet-5 Large for ImageNet (331x331): 12 cells of 216 filters.
  Returns (logits, end_points)."""
  return _build(images, num_classes, is_training, config,
                large_imagenet_config, final_endpoint)


register_network('pnasnet_large', pnasnet_large, pnasnet_large_arg_scope,
                 default_image_size=331,
                 logits_scopes=nasnet_utils.logits_scopes(
                     large_imagenet_config()),
                 published=('pnasnet-5_large_2017_12_13.tar.gz', 82.9, 96.2))


def pnasnet_mobile(images, num_classes, is_training=True, final_endpoint=None,
                   config=None):
  """PNASNet-5 Mobile for ImageNet (224x224): 9 cells of 54 filters.
  Returns (logits, end_points)."""
  return _build(images, num_classes, is_training, config,
                mobile_imagenet_config, final_endpoint)


register_network('pnasnet_mobile', pnasnet_mobile, pnasnet_mobile_arg_scope,
                 default_image_size=224,
                 logits_scopes=nasnet_utils.logits_scopes(
                     mobile_imagenet_config()),
                 published=('pnasnet-5_mobile_2017_12_13.tar.gz', 74.2, 91.9))

# TF-Slim's names of the two functions.
build_pnasnet_large = pnasnet_large
build_pnasnet_mobile = pnasnet_mobile
