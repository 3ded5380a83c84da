"""The builder shared by MobileNet v2, v3 and EdgeTPU: a net is a list of ops.

A conv_defs dict describes an architecture:
  {'defaults': {(layer_fn, ...): {arg: value}},   # arg_scope defaults
   'overrides': {...},                            # optional, applied after
   'spec': [op(layer_fn, num_outputs=..., stride=..., ...), ...]}
`mobilenet_base` builds the ops in order as end points 'layer_1', 'layer_2',
..., thinning each op's `num_outputs` with its multiplier function, and adds
the tensors named '*output' inside each layer's scope as 'layer_<i>/<name>'.
`mobilenet` puts the classifier on top: global average pool, dropout and the
1x1 convolution 'Logits/Conv2d_1c_1x1' (a legacy name the checkpoints keep).
"""
import collections
import contextlib
import inspect
import os

import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401
from nets.mobilenet import conv_blocks as blocks

tf1 = tf.compat.v1


@slim.add_arg_scope
def depth_multiplier(output_params, multiplier, divisible_by=8, min_depth=8,
                     **unused_kwargs):
  """Thins output_params['num_outputs'] in place, rounded by make_divisible."""
  if 'num_outputs' not in output_params:
    return
  output_params['num_outputs'] = blocks.make_divisible(
      output_params['num_outputs'] * multiplier, divisible_by, min_depth)


def keep_depth(output_params, multiplier):
  """A multiplier function that leaves the op's depth as specified."""
  del output_params, multiplier


Op = collections.namedtuple('Op', ['op', 'params', 'multiplier_func'])


def op(opfunc, multiplier_func=depth_multiplier, **params):
  """One layer of a spec: opfunc(net, **params), thinned by multiplier_func."""
  multiplier_func = params.pop('multiplier_transform', multiplier_func)
  return Op(opfunc, params=params, multiplier_func=multiplier_func)


def with_last_layer_kept(conv_defs):
  """conv_defs whose last op is not thinned by the depth multiplier.

  'Fine-grain classification mode' (MobileNet v2 paper): thin networks keep
  a full-width embedding, which helps on ImageNet-like problems.
  """
  spec = list(conv_defs['spec'])
  spec[-1] = spec[-1]._replace(multiplier_func=keep_depth)
  return dict(conv_defs, spec=spec)


@contextlib.contextmanager
def _arg_scopes(defaults):
  """Enters slim.arg_scope(functions, **args) for each item of `defaults`."""
  with contextlib.ExitStack() as stack:
    for functions, args in dict(defaults).items():
      stack.enter_context(slim.arg_scope(functions, **args))
    yield


def _batch_norm_mode(is_training):
  """Forces batch norm's mode; None leaves it to the enclosing arg_scope."""
  if is_training is None:
    return contextlib.nullcontext()
  return slim.arg_scope([slim.batch_norm], is_training=is_training)


def _takes_argument(fn, name):
  try:
    return name in inspect.signature(fn).parameters
  except (TypeError, ValueError):  # builtins without a signature
    return False


@contextlib.contextmanager
def _scope_all(scope, default_scope):
  """A variable scope and the name scope it created, so op names match it."""
  with tf1.variable_scope(scope, default_name=default_scope) as s, \
      tf1.name_scope(s.original_name_scope):
    yield s


@slim.add_arg_scope
def mobilenet_base(inputs, conv_defs, multiplier=1.0, final_endpoint=None,
                   output_stride=None, use_explicit_padding=False, scope=None,
                   is_training=False):
  """Builds the layers of `conv_defs` on `inputs`, without the classifier.

  Args:
    inputs: [batch, height, width, channels] tensor.
    conv_defs: dict with 'spec' (list of op(...)), 'defaults' and optionally
      'overrides' (arg_scope settings), see the module docstring.
    multiplier: depth multiplier (> 0) handed to each op's multiplier function.
    final_endpoint: the last 'layer_<i>' to build; None builds all.
    output_stride: None, 1 or an even number: caps the input/output
      resolution ratio, replacing further strides by atrous rates.
    use_explicit_padding: pad explicitly and use 'VALID' convolutions.
    scope: variable scope ('Mobilenet' by default).
    is_training: batch-norm mode; True, False (inference even inside a
      training arg_scope), or None to leave it to the arg_scope.

  Returns:
    (net, end_points): the last layer's output and an ordered dict of
    'layer_<i>' and 'layer_<i>/<name>output' tensors.

  Raises:
    ValueError: multiplier <= 0 or output_stride not None, 1 or even.
  """
  if multiplier <= 0:
    raise ValueError('multiplier must be greater than zero, got %r'
                     % multiplier)
  if output_stride is not None and (
      output_stride == 0 or (output_stride > 1 and output_stride % 2)):
    raise ValueError('output_stride must be None, 1 or a multiple of 2, got %r'
                     % output_stride)
  overrides = dict(conv_defs.get('overrides', {}))
  if use_explicit_padding:
    overrides[(slim.conv2d, slim.separable_conv2d)] = {'padding': 'VALID'}

  with _scope_all(scope, 'Mobilenet'), _batch_norm_mode(is_training), \
      _arg_scopes(conv_defs.get('defaults', {})), _arg_scopes(overrides):
    current_stride = 1  # stride of the activations so far
    rate = 1  # atrous rate once output_stride is reached
    net = inputs
    end_points = collections.OrderedDict()
    block_end_points = collections.OrderedDict()
    graph = tf1.get_default_graph()
    for i, opdef in enumerate(conv_defs['spec']):
      params = dict(opdef.params)
      opdef.multiplier_func(params, multiplier)
      stride = params.get('stride', 1)
      if output_stride is not None and current_stride == output_stride:
        # Keep the resolution: this layer runs at stride 1 and the dilation
        # of every later layer grows by its stride instead.
        layer_stride, layer_rate = 1, rate
        rate *= stride
      else:
        layer_stride, layer_rate = stride, 1
        current_stride *= stride
      params['stride'] = layer_stride
      if layer_rate > 1 and tuple(params.get('kernel_size', ())) != (1, 1):
        params['rate'] = layer_rate
      if use_explicit_padding:
        # Blocks pad their own inner convolutions; a plain layer gets its
        # input padded here.
        if _takes_argument(opdef.op, 'use_explicit_padding'):
          params['use_explicit_padding'] = True
        elif 'kernel_size' in params:
          net = blocks.fixed_padding(net, params['kernel_size'], layer_rate)

      end_point = 'layer_%d' % (i + 1)
      first_new_op = len(graph.get_operations())
      net = opdef.op(net, **params)
      end_points[end_point] = net
      # The block's named tensors ('expansion_output', 'output', ...) live in
      # the scope of the layer's output.
      layer_scope = os.path.dirname(net.name)
      for t in graph.get_operations()[first_new_op:]:
        if os.path.dirname(t.name) == layer_scope and t.name.endswith('output'):
          block_end_points[end_point + '/' + os.path.basename(t.name)] = (
              t.outputs[0])
      if end_point == final_endpoint:
        break
    end_points.update(block_end_points)
    return net, end_points


def global_pool(input_tensor, pool_op=tf.nn.avg_pool2d):
  """Average over all positions: [batch, 1, 1, depth].

  An average pool with a full-size window (better supported on mobile
  hardware than reduce_mean); reduce_mean when the size is unknown.
  """
  height, width = input_tensor.get_shape().as_list()[1:3]
  if height is None or width is None:
    output = tf.reduce_mean(input_tensor, [1, 2], keepdims=True)
  else:
    output = pool_op(input_tensor, ksize=[1, height, width, 1],
                     strides=[1, 1, 1, 1], padding='VALID')
  output.set_shape([None, 1, 1, None])
  return output


@slim.add_arg_scope
def mobilenet(inputs,
              num_classes=1001,
              prediction_fn=slim.softmax,
              reuse=None,
              scope='Mobilenet',
              base_only=False,
              **mobilenet_args):
  """MobileNet classifier: mobilenet_base, global pool, dropout, 1x1 logits.

  Inference mode by default; build under training_scope() to train.

  Args:
    inputs: [batch, height, width, channels] tensor.
    num_classes: number of classes; 0 or None returns the pooled features
      ([batch, 1, 1, depth], before dropout) instead of logits.
    prediction_fn: turns logits into end_points['Predictions'] (None: skip).
    reuse: reuse the variables of `scope`.
    scope: variable scope.
    base_only: return mobilenet_base's output (no pooling, no logits).
    **mobilenet_args: passed to mobilenet_base (conv_defs, multiplier,
      final_endpoint, output_stride, use_explicit_padding, is_training).

  Returns:
    (logits, end_points); logits are [batch, num_classes].

  Raises:
    ValueError: `inputs` is not of rank 4.
  """
  is_training = mobilenet_args.get('is_training', False)
  if len(inputs.get_shape().as_list()) != 4:
    raise ValueError('expected inputs of rank 4, got shape %s' % inputs.shape)

  with tf1.variable_scope(scope, 'Mobilenet', reuse=reuse) as scope:
    inputs = tf.identity(inputs, 'input')
    net, end_points = mobilenet_base(inputs, scope=scope, **mobilenet_args)
    if base_only:
      return net, end_points

    net = tf.identity(net, name='embedding')
    with tf1.variable_scope('Logits'):
      net = global_pool(net)
      end_points['global_pool'] = net
      if not num_classes:
        return net, end_points
      net = slim.dropout(net, scope='Dropout', is_training=is_training)
      logits = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                           normalizer_fn=None,
                           biases_initializer=tf.zeros_initializer(),
                           scope='Conv2d_1c_1x1')
      logits = tf.squeeze(logits, [1, 2])
      logits = tf.identity(logits, name='output')
    end_points['Logits'] = logits
    if prediction_fn:
      end_points['Predictions'] = prediction_fn(logits, 'Predictions')
  return logits, end_points


def build_family(input_tensor, conv_defs, family, depth_multiplier,
                 keep_last_layer, **kwargs):
  """The body of a family's `mobilenet`: `mobilenet` over `conv_defs` thinned
  by `depth_multiplier`, the last layer kept whole if `keep_last_layer`.

  The families take depth_multiplier=, so the builder's multiplier= is
  refused rather than silently overridden.
  """
  if 'multiplier' in kwargs:
    raise ValueError('%s takes depth_multiplier=, not multiplier=' % family)
  if keep_last_layer:
    conv_defs = with_last_layer_kept(conv_defs)
  return mobilenet(input_tensor, conv_defs=conv_defs,
                   multiplier=depth_multiplier, **kwargs)


def training_scope(is_training=True,
                   weight_decay=0.00004,
                   stddev=0.09,
                   dropout_keep_prob=0.8,
                   bn_decay=0.997):
  """The arg_scope MobileNet v2/v3 were trained with.

  The network's own `is_training` argument still decides batch norm and
  dropout, so building with is_training=False inside this scope gives the
  inference graph.

  Args:
    is_training: default mode of batch norm, dropout and the builders; None
      leaves batch norm's mode unset.
    weight_decay: L2 weight decay of the (non-depthwise) convolutions.
    stddev: stddev of the truncated-normal weight initializer; negative
      selects Xavier initialization.
    dropout_keep_prob: keep probability of the dropout before the logits
      (None leaves slim's default).
    bn_decay: decay of the batch-norm moving averages (None: slim's default).

  Returns:
    An arg_scope to use with slim.arg_scope.
  """
  if stddev < 0:
    weights_initializer = slim.initializers.xavier_initializer()
  else:
    weights_initializer = tf1.truncated_normal_initializer(stddev=stddev)
  batch_norm_args = {k: v for k, v in
                     (('decay', bn_decay), ('is_training', is_training))
                     if v is not None}
  dropout_args = {k: v for k, v in (('is_training', is_training),
                                    ('keep_prob', dropout_keep_prob))
                  if v is not None}
  with slim.arg_scope(
      [slim.conv2d, slim.fully_connected, slim.separable_conv2d],
      weights_initializer=weights_initializer,
      normalizer_fn=slim.batch_norm), \
      slim.arg_scope([mobilenet_base, mobilenet], is_training=is_training), \
      slim.arg_scope([slim.batch_norm], **batch_norm_args), \
      slim.arg_scope([slim.dropout], **dropout_args), \
      slim.arg_scope([slim.conv2d],
                     weights_regularizer=slim.l2_regularizer(weight_decay)), \
      slim.arg_scope([slim.separable_conv2d], weights_regularizer=None) as sc:
    return sc
