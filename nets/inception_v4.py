"""Inception-v4, the TF-Slim graph of the published checkpoint.

Szegedy, Ioffe, Vanhoucke, Alemi: "Inception-v4, Inception-ResNet and the Impact
of Residual Connections on Learning", http://arxiv.org/abs/1602.07261.

A stem (Conv2d_1a..Mixed_5a), then 4 Inception-A blocks (Mixed_5b-e) at 35x35,
Reduction-A (Mixed_6a), 7 Inception-B blocks (Mixed_6b-h) at 17x17, Reduction-B
(Mixed_7a) and 3 Inception-C blocks (Mixed_7b-d) at 8x8. The auxiliary head
reads Mixed_6h.
"""
import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets import inception_utils
from nets.registry import register_network

tf1 = tf.compat.v1


conv = inception_utils.conv
avg_pool = inception_utils.avg_pool
max_pool = inception_utils.max_pool
split = inception_utils.split
towers = inception_utils.towers


def _block(default_scope, branches, inputs, scope, reuse):
  """`branches` side by side (towers) in `scope` (default `default_scope`),
  stride 1 and 'SAME' unless a layer says."""
  with slim.arg_scope([slim.conv2d, slim.avg_pool2d, slim.max_pool2d],
                      stride=1, padding='SAME'):
    with tf1.variable_scope(scope, default_scope, [inputs], reuse=reuse):
      return towers(inputs, *branches)


_INCEPTION_A = (
    [conv(96, [1, 1], 'Conv2d_0a_1x1')],
    [conv(64, [1, 1], 'Conv2d_0a_1x1'), conv(96, [3, 3], 'Conv2d_0b_3x3')],
    [conv(64, [1, 1], 'Conv2d_0a_1x1'), conv(96, [3, 3], 'Conv2d_0b_3x3'),
     conv(96, [3, 3], 'Conv2d_0c_3x3')],
    [avg_pool([3, 3], 'AvgPool_0a_3x3'), conv(96, [1, 1], 'Conv2d_0b_1x1')])


def block_inception_a(inputs, scope=None, reuse=None):
  """Inception-A (35x35): 1x1, 1x1-3x3, 1x1-3x3-3x3 and avg-pool-1x1 towers."""
  return _block('BlockInceptionA', _INCEPTION_A, inputs, scope, reuse)


_REDUCTION_A = (
    [conv(384, [3, 3], 'Conv2d_1a_3x3', stride=2, padding='VALID')],
    [conv(192, [1, 1], 'Conv2d_0a_1x1'),
     conv(224, [3, 3], 'Conv2d_0b_3x3'),
     conv(256, [3, 3], 'Conv2d_1a_3x3', stride=2, padding='VALID')],
    [max_pool([3, 3], 'MaxPool_1a_3x3', stride=2, padding='VALID')])


def block_reduction_a(inputs, scope=None, reuse=None):
  """Reduction-A (35x35 -> 17x17): strided 3x3, 1x1-3x3-strided 3x3,
  max-pool."""
  return _block('BlockReductionA', _REDUCTION_A, inputs, scope, reuse)


_INCEPTION_B = (
    [conv(384, [1, 1], 'Conv2d_0a_1x1')],
    [conv(192, [1, 1], 'Conv2d_0a_1x1'),
     conv(224, [1, 7], 'Conv2d_0b_1x7'),
     conv(256, [7, 1], 'Conv2d_0c_7x1')],
    [conv(192, [1, 1], 'Conv2d_0a_1x1'),
     conv(192, [7, 1], 'Conv2d_0b_7x1'),
     conv(224, [1, 7], 'Conv2d_0c_1x7'),
     conv(224, [7, 1], 'Conv2d_0d_7x1'),
     conv(256, [1, 7], 'Conv2d_0e_1x7')],
    [avg_pool([3, 3], 'AvgPool_0a_3x3'),
     conv(128, [1, 1], 'Conv2d_0b_1x1')])


def block_inception_b(inputs, scope=None, reuse=None):
  """Inception-B (17x17): factorised 7x7 towers (1x7 / 7x1 pairs)."""
  return _block('BlockInceptionB', _INCEPTION_B, inputs, scope, reuse)


_REDUCTION_B = (
    [conv(192, [1, 1], 'Conv2d_0a_1x1'),
     conv(192, [3, 3], 'Conv2d_1a_3x3', stride=2, padding='VALID')],
    [conv(256, [1, 1], 'Conv2d_0a_1x1'),
     conv(256, [1, 7], 'Conv2d_0b_1x7'),
     conv(320, [7, 1], 'Conv2d_0c_7x1'),
     conv(320, [3, 3], 'Conv2d_1a_3x3', stride=2, padding='VALID')],
    [max_pool([3, 3], 'MaxPool_1a_3x3', stride=2, padding='VALID')])


def block_reduction_b(inputs, scope=None, reuse=None):
  """Reduction-B (17x17 -> 8x8): two strided conv towers and a max-pool."""
  return _block('BlockReductionB', _REDUCTION_B, inputs, scope, reuse)


_INCEPTION_C = (
    [conv(256, [1, 1], 'Conv2d_0a_1x1')],
    [conv(384, [1, 1], 'Conv2d_0a_1x1'),
     split(conv(256, [1, 3], 'Conv2d_0b_1x3'),
           conv(256, [3, 1], 'Conv2d_0c_3x1'))],
    [conv(384, [1, 1], 'Conv2d_0a_1x1'),
     conv(448, [3, 1], 'Conv2d_0b_3x1'),
     conv(512, [1, 3], 'Conv2d_0c_1x3'),
     split(conv(256, [1, 3], 'Conv2d_0d_1x3'),
           conv(256, [3, 1], 'Conv2d_0e_3x1'))],
    [avg_pool([3, 3], 'AvgPool_0a_3x3'),
     conv(256, [1, 1], 'Conv2d_0b_1x1')])


def block_inception_c(inputs, scope=None, reuse=None):
  """Inception-C (8x8): towers that end in parallel 1x3 and 3x1 convs."""
  return _block('BlockInceptionC', _INCEPTION_C, inputs, scope, reuse)


def _mixed_3a(net):
  return towers(
      net,
      [max_pool([3, 3], 'MaxPool_0a_3x3', stride=2, padding='VALID')],
      [conv(96, [3, 3], 'Conv2d_0a_3x3', stride=2, padding='VALID')])


def _mixed_4a(net):
  return towers(
      net,
      [conv(64, [1, 1], 'Conv2d_0a_1x1'),
       conv(96, [3, 3], 'Conv2d_1a_3x3', padding='VALID')],
      [conv(64, [1, 1], 'Conv2d_0a_1x1'), conv(64, [1, 7], 'Conv2d_0b_1x7'),
       conv(64, [7, 1], 'Conv2d_0c_7x1'),
       conv(96, [3, 3], 'Conv2d_1a_3x3', padding='VALID')])


def _mixed_5a(net):
  return towers(
      net,
      [conv(192, [3, 3], 'Conv2d_1a_3x3', stride=2, padding='VALID')],
      [max_pool([3, 3], 'MaxPool_1a_3x3', stride=2, padding='VALID')])


def _stages():
  """(end point, fn(net, scope) -> net) in graph order, stem first."""
  def scoped(fn):
    def build(net, scope):
      with tf1.variable_scope(scope):
        return fn(net)
    return build

  stages = [
      ('Conv2d_1a_3x3', lambda net, scope: slim.conv2d(
          net, 32, [3, 3], stride=2, padding='VALID', scope=scope)),
      ('Conv2d_2a_3x3', lambda net, scope: slim.conv2d(
          net, 32, [3, 3], padding='VALID', scope=scope)),
      ('Conv2d_2b_3x3', lambda net, scope: slim.conv2d(
          net, 64, [3, 3], scope=scope)),
      ('Mixed_3a', scoped(_mixed_3a)),
      ('Mixed_4a', scoped(_mixed_4a)),
      ('Mixed_5a', scoped(_mixed_5a)),
  ]
  stages += [('Mixed_5' + c, block_inception_a) for c in 'bcde']
  stages += [('Mixed_6a', block_reduction_a)]
  stages += [('Mixed_6' + c, block_inception_b) for c in 'bcdefgh']
  stages += [('Mixed_7a', block_reduction_b)]
  stages += [('Mixed_7' + c, block_inception_c) for c in 'bcd']
  return stages


def inception_v4_base(inputs, final_endpoint='Mixed_7d', scope=None):
  """Builds Inception-v4 from `inputs` up to `final_endpoint` (inclusive).

  Args:
    inputs: [batch, height, width, channels] float tensor.
    final_endpoint: one of 'Conv2d_1a_3x3', 'Conv2d_2a_3x3', 'Conv2d_2b_3x3',
      'Mixed_3a', 'Mixed_4a', 'Mixed_5a', 'Mixed_5b'..'Mixed_5e', 'Mixed_6a',
      'Mixed_6b'..'Mixed_6h', 'Mixed_7a', 'Mixed_7b'..'Mixed_7d'.
    scope: optional variable scope (default 'InceptionV4').

  Returns:
    (net, end_points): the tensor at `final_endpoint` and an ordered dict of
    every end point built.

  Raises:
    ValueError: if `final_endpoint` is not one of the above.
  """
  stages = _stages()
  if final_endpoint not in [name for name, _ in stages]:
    raise ValueError('unknown final_endpoint %r (known: %s)' % (
        final_endpoint, ', '.join(name for name, _ in stages)))
  end_points = {}
  with tf1.variable_scope(scope, 'InceptionV4', [inputs]):
    with slim.arg_scope([slim.conv2d, slim.max_pool2d, slim.avg_pool2d],
                        stride=1, padding='SAME'):
      net = inputs
      for name, build in stages:
        net = build(net, name)
        end_points[name] = net
        if name == final_endpoint:
          return net, end_points


inception_v4_arg_scope = inception_utils.inception_arg_scope


def inception_v4(inputs, num_classes=1001, is_training=True,
                 dropout_keep_prob=0.8, reuse=None, scope='InceptionV4',
                 create_aux_logits=True):
  """Inception-v4 classifier.

  Args:
    inputs: [batch, height, width, channels] float tensor.
    num_classes: number of classes; 0 or None omits the classifier (and the
      auxiliary head) and returns the pooled features, before dropout.
    is_training: batch norm and dropout in training mode.
    dropout_keep_prob: keep probability of the dropout before the logits.
    reuse: reuse the variables of `scope`.
    scope: variable scope.
    create_aux_logits: build the auxiliary head (end point 'AuxLogits'); the
      published checkpoint holds its variables, so it is on by default.

  Returns:
    (logits [batch, num_classes] or pooled features [batch, 1, 1, 1536],
    end_points).
  """
  with tf1.variable_scope(scope, 'InceptionV4', [inputs], reuse=reuse) as scope:
    with slim.arg_scope([slim.batch_norm, slim.dropout],
                        is_training=is_training):
      net, end_points = inception_v4_base(inputs, scope=scope)
      with slim.arg_scope([slim.conv2d, slim.max_pool2d, slim.avg_pool2d],
                          stride=1, padding='SAME'):
        if create_aux_logits and num_classes:
          end_points['AuxLogits'] = inception_utils.aux_logits(
              end_points['Mixed_6h'], num_classes, 'AvgPool_1a_5x5',
              'Conv2d_2a', 'Aux_logits')
        return inception_utils.logits_head(
            net, end_points, num_classes, 'AvgPool_1a',
            lambda net: slim.flatten(
                slim.dropout(net, dropout_keep_prob, scope='Dropout_1b'),
                scope='PreLogitsFlatten'))


register_network('inception_v4', inception_v4, inception_v4_arg_scope,
                 default_image_size=299, num_classes=1001,
                 preprocessing_name='inception',
                 logits_scopes=('InceptionV4/Logits', 'InceptionV4/AuxLogits'),
                 published=('inception_v4_2016_09_09.tar.gz', 80.2, 95.2))
