"""NASNet-A (Zoph et al. 2017, https://arxiv.org/abs/1707.07012), as in TF-Slim.

Three published variants share one builder, `_build_nasnet_base`:
  nasnet_cifar   32x32 CIFAR-10, 18 normal cells of 32 filters, conv stem.
  nasnet_mobile  224 ImageNet, 12 cells of 44 filters ("NASNet-A 4@1056").
  nasnet_large   331 ImageNet, 18 cells of 168 filters ("6@4032").
TF-Slim's names for them, build_nasnet_cifar, build_nasnet_mobile and
build_nasnet_large, are aliases.
The ImageNet variants start with a 3x3/2 conv and two reduction cells
(`cell_stem_0/1`); a reduction cell precedes the cells at 1/3 and 2/3 of depth.
In training an auxiliary head (`aux_<cell>`) reads the cell before the second
reduction, and drop-path (cifar and large) ramps up with depth and the global
step. Scope names are those of the published checkpoints.
"""
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets.nasnet import nasnet_utils
from nets.registry import register_network


# Training notes of the published checkpoints: auxiliary head loss weight 0.4;
# cifar: batch 32, lr 0.025 with single-period cosine decay, gradient norm
# clipped at 5, 600 epochs; ImageNet: label smoothing 0.1, lr decay 0.97 every
# 2.4 epochs, gradient norm clipped at 10, sync SGD (large: 100 replicas x 16
# at lr 0.015 * 100; mobile: 50 x 32 at lr 0.04 * 50).
def cifar_config():
  return nasnet_utils.model_config(
      stem_multiplier=3.0, num_cells=18, num_conv_filters=32,
      drop_path_keep_prob=0.6, dense_dropout_keep_prob=1.0,
      skip_reduction_layer_input=0,
      # 600 epochs at batch 32: drop-path reaches full strength at the end.
      total_training_steps=937500)


def large_imagenet_config():
  return nasnet_utils.model_config(
      stem_multiplier=3.0, num_cells=18, num_conv_filters=168,
      drop_path_keep_prob=0.7, skip_reduction_layer_input=1)


def mobile_imagenet_config():
  return nasnet_utils.model_config(
      stem_multiplier=1.0, num_cells=12, num_conv_filters=44,
      drop_path_keep_prob=1.0, skip_reduction_layer_input=0)


def _nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon):
  """Convs without biases or activation (cells place relu and batch norm
  themselves), fan-out variance-scaling init, L2 decay, scaled batch norm."""
  batch_norm_params = {
      'decay': batch_norm_decay,
      'epsilon': batch_norm_epsilon,
      'scale': True,
      'fused': True,
  }
  with slim.arg_scope(
      [slim.fully_connected, slim.conv2d, slim.separable_conv2d],
      weights_regularizer=slim.l2_regularizer(weight_decay),
      weights_initializer=slim.variance_scaling_initializer(mode='FAN_OUT')):
    with slim.arg_scope([slim.fully_connected], activation_fn=None,
                        scope='FC'):
      with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                          activation_fn=None, biases_initializer=None):
        with slim.arg_scope([slim.batch_norm], **batch_norm_params) as sc:
          return sc


def nasnet_cifar_arg_scope(weight_decay=5e-4, batch_norm_decay=0.9,
                           batch_norm_epsilon=1e-5):
  """The arg_scope NASNet-A CIFAR was trained with."""
  return _nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def nasnet_mobile_arg_scope(weight_decay=4e-5, batch_norm_decay=0.9997,
                            batch_norm_epsilon=1e-3):
  """The arg_scope NASNet-A Mobile was trained with."""
  return _nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def nasnet_large_arg_scope(weight_decay=5e-5, batch_norm_decay=0.9997,
                           batch_norm_epsilon=1e-3):
  """The arg_scope NASNet-A Large was trained with."""
  return _nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def _cifar_stem(inputs, hparams):
  """One 3x3 conv + batch norm at full resolution."""
  net = slim.conv2d(inputs,
                    int(hparams.num_conv_filters * hparams.stem_multiplier),
                    3, scope='l1_stem_3x3')
  net = slim.batch_norm(net, scope='l1_stem_bn')
  return net, [None, net]


def _build_nasnet_base(images, normal_cell, reduction_cell, num_classes,
                       hparams, is_training, stem_type, final_endpoint=None,
                       current_step=None):
  """Stem, normal cells with reduction cells at 1/3 and 2/3, classifier.

  Returns (logits, end_points); with a falsy num_classes the pooled features,
  with `final_endpoint` that end point.
  """
  points = nasnet_utils.EndPoints(final_endpoint)
  reduction_indices = nasnet_utils.calc_reduction_layers(
      hparams.num_cells, hparams.num_reduction_layers)
  if stem_type == 'imagenet':
    net, cell_outputs = nasnet_utils.imagenet_stem(
        images, hparams, reduction_cell, current_step=current_step)
  elif stem_type == 'cifar':
    net, cell_outputs = _cifar_stem(images, hparams)
  else:
    raise ValueError("stem_type must be 'imagenet' or 'cifar', got %r"
                     % (stem_type,))
  if points.add('Stem', net):
    return net, points.end_points

  aux_head_cells = nasnet_utils.aux_head_cells(hparams)
  activation_fn = tf.nn.relu6 if hparams.use_bounded_activation else tf.nn.relu
  filter_scaling = 1.0
  # Drop-path depth counts every cell, the stem cells included.
  true_cell_num = 2 if stem_type == 'imagenet' else 0
  for cell_num in range(hparams.num_cells):
    # Which earlier output a normal cell after a reduction reads as its second
    # input differs between the published models: with
    # skip_reduction_layer_input (large) the one from before the reduction
    # cell's input, else the reduction cell's input.
    if hparams.skip_reduction_layer_input:
      prev_layer = cell_outputs[-2]
    if cell_num in reduction_indices:
      filter_scaling *= hparams.filter_scaling_rate
      index = reduction_indices.index(cell_num)
      net = reduction_cell(net, scope='reduction_cell_{}'.format(index),
                           filter_scaling=filter_scaling, stride=2,
                           prev_layer=cell_outputs[-2],
                           cell_num=true_cell_num, current_step=current_step)
      if points.add('Reduction_Cell_{}'.format(index), net):
        return net, points.end_points
      true_cell_num += 1
      cell_outputs.append(net)
    if not hparams.skip_reduction_layer_input:
      prev_layer = cell_outputs[-2]
    net = normal_cell(net, scope='cell_{}'.format(cell_num),
                      filter_scaling=filter_scaling, stride=1,
                      prev_layer=prev_layer, cell_num=true_cell_num,
                      current_step=current_step)
    if points.add('Cell_{}'.format(cell_num), net):
      return net, points.end_points
    true_cell_num += 1
    if (hparams.use_aux_head and cell_num in aux_head_cells and num_classes
        and is_training):
      nasnet_utils.build_aux_head(activation_fn(net), points.end_points,
                                  num_classes, hparams,
                                  scope='aux_{}'.format(cell_num))
    cell_outputs.append(net)

  return nasnet_utils.classifier(net, points, num_classes, hparams)


def _build(images, num_classes, is_training, config, default_config,
           stem_type, final_endpoint=None, current_step=None):
  """The shared body of nasnet_cifar, nasnet_mobile and nasnet_large."""
  hparams = nasnet_utils.training_hparams(config, default_config, is_training)
  images = nasnet_utils.to_data_format(images, hparams.data_format)
  current_step = nasnet_utils.drop_path_step(hparams, current_step)
  # Drop-path depth counts the two reduction cells (and the stem cells).
  total_num_cells = hparams.num_cells + 2
  if stem_type == 'imagenet':
    total_num_cells += 2
  cell_args = (hparams.num_conv_filters, hparams.drop_path_keep_prob,
               total_num_cells, hparams.total_training_steps,
               hparams.use_bounded_activation)
  normal_cell = nasnet_utils.NasNetANormalCell(*cell_args)
  reduction_cell = nasnet_utils.NasNetAReductionCell(*cell_args)
  with nasnet_utils.cell_arg_scope(is_training, hparams.data_format):
    return _build_nasnet_base(images, normal_cell=normal_cell,
                              reduction_cell=reduction_cell,
                              num_classes=num_classes, hparams=hparams,
                              is_training=is_training, stem_type=stem_type,
                              final_endpoint=final_endpoint,
                              current_step=current_step)


def nasnet_cifar(images, num_classes, is_training=True, config=None,
                 current_step=None):
  """NASNet-A for CIFAR-10 (32x32): 18 cells of 32 filters after a conv stem.
  Returns (logits, end_points)."""
  return _build(images, num_classes, is_training, config, cifar_config,
                'cifar', current_step=current_step)


register_network('nasnet_cifar', nasnet_cifar, nasnet_cifar_arg_scope,
                 default_image_size=32, num_classes=10,
                 preprocessing_name='cifarnet',
                 logits_scopes=nasnet_utils.logits_scopes(cifar_config()))


def nasnet_mobile(images, num_classes, is_training=True, final_endpoint=None,
                  config=None, current_step=None):
  """NASNet-A Mobile for ImageNet (224x224): 12 cells of 44 filters after
  the ImageNet stem. Returns (logits, end_points)."""
  return _build(images, num_classes, is_training, config,
                mobile_imagenet_config, 'imagenet',
                final_endpoint=final_endpoint, current_step=current_step)


register_network('nasnet_mobile', nasnet_mobile, nasnet_mobile_arg_scope,
                 default_image_size=224,
                 logits_scopes=nasnet_utils.logits_scopes(
                     mobile_imagenet_config()),
                 published=('nasnet-a_mobile_04_10_2017.tar.gz', 74.0, 91.6))


def nasnet_large(images, num_classes, is_training=True, final_endpoint=None,
                 config=None, current_step=None):
  """NASNet-A Large for ImageNet (331x331): 18 cells of 168 filters after
  the ImageNet stem. Returns (logits, end_points)."""
  return _build(images, num_classes, is_training, config,
                large_imagenet_config, 'imagenet',
                final_endpoint=final_endpoint, current_step=current_step)


register_network('nasnet_large', nasnet_large, nasnet_large_arg_scope,
                 default_image_size=331,
                 logits_scopes=nasnet_utils.logits_scopes(
                     large_imagenet_config()),
                 published=('nasnet-a_large_04_10_2017.tar.gz', 82.7, 96.2))

# TF-Slim's names of the three functions.
build_nasnet_cifar = nasnet_cifar
build_nasnet_mobile = nasnet_mobile
build_nasnet_large = nasnet_large
