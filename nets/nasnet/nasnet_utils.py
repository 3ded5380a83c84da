"""Cell machinery shared by NASNet-A and PNASNet (TF-Slim's `nasnet_utils`).

A cell reads two hidden states (the outputs of the previous two cells), runs
five "combinations" (comb_iter_0..4): each applies one searched operation to
each of two hidden states it picks and adds the results, appending a new hidden
state. The hidden states no combination consumed are concatenated as the
cell's output. The searched operations are named by strings:

  'separable_KxK_N'  N stacked (relu, KxK separable conv, batch norm) layers
  'avg_pool_KxK'     SAME average / max pooling (plus a 1x1 conv + batch norm
  'max_pool_KxK'     when the channel count must change)
  'none'             identity (a 1x1 conv + batch norm if it must stride or
                     change channels)

Scope names (`cell_N/comb_iter_i/left/separable_5x5_1`, `beginning_bn`,
`prev_1x1`, `path1_conv`, `cell_output/reduction_1`, ...) are those of the
published checkpoints. `data_format` and `is_training` reach the helpers here
through `slim.arg_scope`, as the builders in nasnet.py and pnasnet.py set them.

The skeleton both families build on is here too: their hyper-parameters
(`config`), the ImageNet stem, the auxiliary head, the classifier and the
end-point bookkeeping. A helper: it registers no network.
"""
import contextlib
import copy
import types

import tensorflow as tf
import tf_slim as slim

import tf_compat  # noqa: F401

tf1 = tf.compat.v1

DATA_FORMAT_NHWC = 'NHWC'
DATA_FORMAT_NCHW = 'NCHW'
# With `use_bounded_activation` (for quantized inference) activations are
# relu6 and branch outputs are clipped to the same range.
CLIP_BY_VALUE_CAP = 6


def calc_reduction_layers(num_cells, num_reduction_layers):
  """Indices of the cells preceded by a reduction, evenly spaced.

  18 cells with 2 reductions -> [6, 12]; 12 cells -> [4, 8].
  """
  return [int(float(pool_num) / (num_reduction_layers + 1) * num_cells)
          for pool_num in range(1, num_reduction_layers + 1)]


def _check_data_format(data_format):
  if data_format not in (DATA_FORMAT_NHWC, DATA_FORMAT_NCHW):
    raise ValueError("data_format must be 'NHWC' or 'NCHW', got %r"
                     % (data_format,))


@slim.add_arg_scope
def get_channel_index(data_format=DATA_FORMAT_NHWC):
  """The channel axis of a 4-D tensor in `data_format`."""
  _check_data_format(data_format)
  return 3 if data_format == DATA_FORMAT_NHWC else 1


@slim.add_arg_scope
def get_channel_dim(shape, data_format=DATA_FORMAT_NHWC):
  """The (static) channel count of a 4-D `shape` in `data_format`."""
  if len(shape) != 4:
    raise ValueError('expected a 4-D shape, got %s' % (shape,))
  return int(shape[get_channel_index(data_format=data_format)])


def _spatial_axes(data_format):
  _check_data_format(data_format)
  return [1, 2] if data_format == DATA_FORMAT_NHWC else [2, 3]


@slim.add_arg_scope
def global_avg_pool(x, data_format=DATA_FORMAT_NHWC):
  """Averages away the height and width of a 4-D `x`: [N, C]."""
  if x.shape.ndims != 4:
    raise ValueError('global_avg_pool expects a 4-D tensor, got %s' % x.shape)
  return tf.reduce_mean(x, _spatial_axes(data_format))


@slim.add_arg_scope
def factorized_reduction(net, output_filters, stride,
                         data_format=DATA_FORMAT_NHWC):
  """Maps `net` to `output_filters` channels, striding without losing pixels.

  Stride 1 is a plain 1x1 conv + batch norm. Otherwise two 1x1 convs read the
  strided grid and the grid shifted by one pixel (so every pixel is seen by
  one of them), each giving half of the channels (the second gets the odd one).
  """
  if stride == 1:
    net = slim.conv2d(net, output_filters, 1, scope='path_conv')
    return slim.batch_norm(net, scope='path_bn')
  if data_format == DATA_FORMAT_NHWC:
    strides = [1, stride, stride, 1]
    pad = [[0, 0], [0, 1], [0, 1], [0, 0]]
  else:
    strides = [1, 1, stride, stride]
    pad = [[0, 0], [0, 0], [0, 1], [0, 1]]
  concat_axis = get_channel_index(data_format=data_format)

  # A 1x1 VALID average pool with a stride is a strided subsample.
  path1 = tf.nn.avg_pool2d(net, [1, 1, 1, 1], strides, 'VALID',
                           data_format=data_format)
  path1 = slim.conv2d(path1, output_filters // 2, 1, scope='path1_conv')

  # Pad bottom/right with zeros and drop the first row and column: the same
  # subsample, one pixel down and right.
  shifted = tf.pad(net, pad)
  if data_format == DATA_FORMAT_NHWC:
    shifted = shifted[:, 1:, 1:, :]
  else:
    shifted = shifted[:, :, 1:, 1:]
  path2 = tf.nn.avg_pool2d(shifted, [1, 1, 1, 1], strides, 'VALID',
                           data_format=data_format)
  path2 = slim.conv2d(path2, output_filters // 2 + output_filters % 2, 1,
                      scope='path2_conv')

  net = tf.concat([path1, path2], axis=concat_axis)
  return slim.batch_norm(net, scope='final_path_bn')


@slim.add_arg_scope
def drop_path(net, keep_prob, is_training=True):
  """Zeroes whole examples of `net` with probability 1 - keep_prob, rescaling
  the kept ones by 1 / keep_prob; the identity when not training."""
  if not is_training:
    return net
  noise_shape = [tf.shape(net)[0], 1, 1, 1]
  keep = tf.floor(keep_prob + tf1.random_uniform(noise_shape, dtype=tf.float32))
  keep = tf.cast(keep, net.dtype)
  return net * tf.cast(1.0 / keep_prob, net.dtype) * keep


def _square_kernel(spec, operation):
  """'5x5' -> 5."""
  height, width = spec.split('x')
  if height != width:
    raise ValueError('rectangular filters are not supported: %r' % operation)
  return int(height)


def _separable_info(operation):
  """'separable_5x5_2' -> (kernel 5, 2 layers); no count means one layer."""
  parts = operation.split('_')
  num_layers = 1 if 'x' in parts[-1] else int(parts[-1])
  return _square_kernel(parts[1], operation), num_layers


def _pooling_info(operation):
  """'avg_pool_3x3' -> ('avg', 3)."""
  parts = operation.split('_')
  return parts[0], _square_kernel(parts[-1], operation)


def _stacked_separable_conv(net, stride, operation, filter_size,
                            use_bounded_activation):
  """Runs 'separable_KxK_N': N x (relu, separable conv, batch norm); only the
  first layer strides."""
  kernel_size, num_layers = _separable_info(operation)
  activation_fn = tf.nn.relu6 if use_bounded_activation else tf.nn.relu
  for layer in range(1, num_layers + 1):
    net = activation_fn(net)
    net = slim.separable_conv2d(
        net, filter_size, kernel_size, depth_multiplier=1, stride=stride,
        scope='separable_{0}x{0}_{1}'.format(kernel_size, layer))
    net = slim.batch_norm(
        net, scope='bn_sep_{0}x{0}_{1}'.format(kernel_size, layer))
    stride = 1
  return net


def _pooling(net, stride, operation, use_bounded_activation):
  """Runs 'avg_pool_KxK' or 'max_pool_KxK' with SAME padding."""
  pooling_type, kernel_size = _pooling_info(operation)
  if use_bounded_activation:
    net = tf.nn.relu6(net)
  if pooling_type == 'avg':
    return slim.avg_pool2d(net, kernel_size, stride=stride, padding='SAME')
  if pooling_type == 'max':
    return slim.max_pool2d(net, kernel_size, stride=stride, padding='SAME')
  raise NotImplementedError('unimplemented pooling type %r in %r'
                            % (pooling_type, operation))


class NasNetABaseCell(object):
  """A searched cell, called like a layer: `cell(net, scope=..., ...)`.

  Args:
    num_conv_filters: filters of every operation at filter_scaling 1.
    operations: the 10 operation strings, (left, right) for each of the 5
      combinations in order.
    used_hiddenstates: 0/1 per hidden state (2 inputs + 5 combinations); the
      unused ones are concatenated as the cell output.
    hiddenstate_indices: the 10 hidden-state indices the operations read.
    drop_path_keep_prob: final keep probability of drop-path (1.0 disables).
    total_num_cells: cells in the network (for the per-layer drop-path ramp).
    total_training_steps: steps over which drop-path ramps up.
    use_bounded_activation: relu6 and clipping instead of relu.
  """

  def __init__(self, num_conv_filters, operations, used_hiddenstates,
               hiddenstate_indices, drop_path_keep_prob, total_num_cells,
               total_training_steps, use_bounded_activation=False):
    self._num_conv_filters = num_conv_filters
    self._operations = operations
    self._used_hiddenstates = used_hiddenstates
    self._hiddenstate_indices = hiddenstate_indices
    self._drop_path_keep_prob = drop_path_keep_prob
    self._total_num_cells = total_num_cells
    self._total_training_steps = total_training_steps
    self._use_bounded_activation = use_bounded_activation

  @property
  def _activation_fn(self):
    return tf.nn.relu6 if self._use_bounded_activation else tf.nn.relu

  def __call__(self, net, scope=None, filter_scaling=1, stride=1,
               prev_layer=None, cell_num=-1, current_step=None):
    """Builds the cell on `net` (and `prev_layer`, the output before it).

    `cell_num` (counting stem and reduction cells) scales drop-path by depth;
    `current_step` (default: the global step) scales it over training.
    """
    # One cell object builds every cell of its kind, so the per-call settings
    # live on it for the duration of the call.
    self._cell_num = cell_num
    self._filter_scaling = filter_scaling
    self._filter_size = int(self._num_conv_filters * filter_scaling)

    with tf1.variable_scope(scope):
      hidden = self._cell_base(net, prev_layer)
      for iteration in range(5):
        with tf1.variable_scope('comb_iter_{}'.format(iteration)):
          left_idx, right_idx = self._hiddenstate_indices[2 * iteration:
                                                          2 * iteration + 2]
          left_op, right_op = self._operations[2 * iteration:2 * iteration + 2]
          with tf1.variable_scope('left'):
            h1 = self._apply_conv_operation(hidden[left_idx], left_op, stride,
                                            left_idx < 2, current_step)
          with tf1.variable_scope('right'):
            h2 = self._apply_conv_operation(hidden[right_idx], right_op,
                                            stride, right_idx < 2,
                                            current_step)
          with tf1.variable_scope('combine'):
            h = h1 + h2
            if self._use_bounded_activation:
              h = tf.nn.relu6(h)
          hidden.append(h)
      with tf1.variable_scope('cell_output'):
        return self._combine_unused_states(hidden)

  def _reduce_prev_layer(self, prev_layer, curr_layer):
    """Matches `prev_layer` to the cell's size and filters (or uses
    `curr_layer` when there is none)."""
    if prev_layer is None:
      return curr_layer
    curr_num_filters = self._filter_size
    prev_num_filters = get_channel_dim(prev_layer.shape)
    # Axis 2 is the width in NHWC and the height in NCHW; either tells
    # whether the previous layer is spatially larger (before a reduction).
    if int(curr_layer.shape[2]) != int(prev_layer.shape[2]):
      prev_layer = self._activation_fn(prev_layer)
      prev_layer = factorized_reduction(prev_layer, curr_num_filters, stride=2)
    elif curr_num_filters != prev_num_filters:
      prev_layer = self._activation_fn(prev_layer)
      prev_layer = slim.conv2d(prev_layer, curr_num_filters, 1,
                               scope='prev_1x1')
      prev_layer = slim.batch_norm(prev_layer, scope='prev_bn')
    return prev_layer

  def _cell_base(self, net, prev_layer):
    """The two input hidden states: [1x1-projected net, matched prev_layer]."""
    prev_layer = self._reduce_prev_layer(prev_layer, net)
    net = self._activation_fn(net)
    net = slim.conv2d(net, self._filter_size, 1, scope='1x1')
    net = slim.batch_norm(net, scope='beginning_bn')
    return [net, prev_layer]

  def _apply_conv_operation(self, net, operation, stride,
                            is_from_original_input, current_step):
    """Applies one operation string to a hidden state."""
    # Only the cell inputs are strided; new hidden states already are.
    if stride > 1 and not is_from_original_input:
      stride = 1
    input_filters = get_channel_dim(net.shape)
    filter_size = self._filter_size
    bounded = self._use_bounded_activation
    if 'separable' in operation:
      net = _stacked_separable_conv(net, stride, operation, filter_size,
                                    bounded)
      if bounded:
        net = tf.clip_by_value(net, -CLIP_BY_VALUE_CAP, CLIP_BY_VALUE_CAP)
    elif operation == 'none':
      if bounded:
        net = tf.nn.relu6(net)
      if stride > 1 or input_filters != filter_size:
        if not bounded:
          net = tf.nn.relu(net)
        net = slim.conv2d(net, filter_size, 1, stride=stride, scope='1x1')
        net = slim.batch_norm(net, scope='bn_1')
        if bounded:
          net = tf.clip_by_value(net, -CLIP_BY_VALUE_CAP, CLIP_BY_VALUE_CAP)
    elif 'pool' in operation:
      net = _pooling(net, stride, operation, bounded)
      if input_filters != filter_size:
        net = slim.conv2d(net, filter_size, 1, stride=1, scope='1x1')
        net = slim.batch_norm(net, scope='bn_1')
      if bounded:
        net = tf.clip_by_value(net, -CLIP_BY_VALUE_CAP, CLIP_BY_VALUE_CAP)
    else:
      raise ValueError('unimplemented cell operation %r' % (operation,))

    if operation != 'none':
      net = self._apply_drop_path(net, current_step=current_step)
    return net

  def _combine_unused_states(self, hidden):
    """Concatenates the hidden states no combination consumed, first matching
    their size and filters to the last one's."""
    used_hiddenstates = self._used_hiddenstates
    if len(used_hiddenstates) != len(hidden):
      raise ValueError('used_hiddenstates has %d entries for %d hidden states'
                       % (len(used_hiddenstates), len(hidden)))
    final_height = int(hidden[-1].shape[2])
    final_num_filters = get_channel_dim(hidden[-1].shape)
    for idx, used in enumerate(used_hiddenstates):
      if used:
        continue
      curr_height = int(hidden[idx].shape[2])
      curr_num_filters = get_channel_dim(hidden[idx].shape)
      if final_height != curr_height or final_num_filters != curr_num_filters:
        stride = 2 if final_height != curr_height else 1
        with tf1.variable_scope('reduction_{}'.format(idx)):
          hidden[idx] = factorized_reduction(hidden[idx], final_num_filters,
                                             stride)
    unused = [h for h, used in zip(hidden, used_hiddenstates) if not used]
    return tf.concat(unused, axis=get_channel_index())

  def _apply_drop_path(self, net, current_step=None, use_summaries=False,
                       drop_connect_version='v3'):
    """Drop-path with a keep probability ramped from 1 to drop_path_keep_prob.

    'v2' ramps with depth: cell k of n keeps 1 - (k+1)/n * (1 - p); 'v1' ramps
    with training progress: current_step / total_training_steps (capped at 1);
    'v3' (the published setting) applies both.
    """
    keep_prob = self._drop_path_keep_prob
    if keep_prob >= 1.0:
      return net
    if drop_connect_version not in ('v1', 'v2', 'v3'):
      raise ValueError('drop_connect_version must be v1, v2 or v3, got %r'
                       % (drop_connect_version,))
    if drop_connect_version in ('v2', 'v3'):
      if self._cell_num == -1:
        raise ValueError('drop-path by depth needs the cell_num of the cell')
      layer_ratio = (self._cell_num + 1) / float(self._total_num_cells)
      if use_summaries:
        with tf.device('/cpu:0'):
          tf1.summary.scalar('layer_ratio', layer_ratio)
      keep_prob = 1 - layer_ratio * (1 - keep_prob)
    if drop_connect_version in ('v1', 'v3'):
      if current_step is None:
        current_step = tf1.train.get_or_create_global_step()
      current_step = tf.cast(current_step, tf.float32)
      current_ratio = tf.minimum(
          1.0, current_step / self._total_training_steps)
      if use_summaries:
        with tf.device('/cpu:0'):
          tf1.summary.scalar('current_ratio', current_ratio)
      keep_prob = 1 - current_ratio * (1 - keep_prob)
    if use_summaries:
      with tf.device('/cpu:0'):
        tf1.summary.scalar('drop_path_keep_prob', keep_prob)
    return drop_path(net, keep_prob)


class SearchedCell(NasNetABaseCell):
  """A cell whose searched architecture is a table of its class: OPERATIONS,
  USED_HIDDENSTATES and HIDDENSTATE_INDICES (as in NasNetABaseCell)."""
  OPERATIONS = USED_HIDDENSTATES = HIDDENSTATE_INDICES = ()

  def __init__(self, num_conv_filters, drop_path_keep_prob, total_num_cells,
               total_training_steps, use_bounded_activation=False):
    super(SearchedCell, self).__init__(
        num_conv_filters, list(self.OPERATIONS),
        list(self.USED_HIDDENSTATES), list(self.HIDDENSTATE_INDICES),
        drop_path_keep_prob, total_num_cells, total_training_steps,
        use_bounded_activation)


class NasNetANormalCell(SearchedCell):
  """The NASNet-A normal cell (keeps the spatial size)."""

  OPERATIONS = ('separable_5x5_2', 'separable_3x3_2',
                'separable_5x5_2', 'separable_3x3_2',
                'avg_pool_3x3', 'none',
                'avg_pool_3x3', 'avg_pool_3x3',
                'separable_3x3_2', 'none')
  USED_HIDDENSTATES = (1, 0, 0, 0, 0, 0, 0)
  HIDDENSTATE_INDICES = (0, 1, 1, 1, 0, 1, 1, 1, 0, 0)


class NasNetAReductionCell(SearchedCell):
  """The NASNet-A reduction cell (built with stride 2)."""

  OPERATIONS = ('separable_5x5_2', 'separable_7x7_2',
                'max_pool_3x3', 'separable_7x7_2',
                'avg_pool_3x3', 'separable_5x5_2',
                'none', 'avg_pool_3x3',
                'separable_3x3_2', 'max_pool_3x3')
  USED_HIDDENSTATES = (1, 1, 1, 0, 0, 0, 0)
  HIDDENSTATE_INDICES = (0, 1, 0, 1, 0, 1, 3, 2, 2, 0)


# -- the skeleton NASNet-A and PNASNet share: stems, heads, end points --------
class HParams(types.SimpleNamespace):
  """A bag of hyper-parameters (stands in for tf.contrib.training.HParams)."""

  def set_hparam(self, name, value):
    if not hasattr(self, name):
      raise ValueError('unknown hyper-parameter %r' % (name,))
    setattr(self, name, value)

  def values(self):
    return dict(vars(self))


def model_config(**hparams):
  """The HParams of a published model: `hparams` over the values all the
  published NASNet-A and PNASNet models share."""
  shared = dict(dense_dropout_keep_prob=0.5, filter_scaling_rate=2.0,
                use_aux_head=1, num_reduction_layers=2, data_format='NHWC',
                total_training_steps=250000, use_bounded_activation=False)
  return HParams(**dict(shared, **hparams))


def training_hparams(config, default_config, is_training):
  """A private copy of the config; drop-path is off outside training."""
  hparams = default_config() if config is None else copy.deepcopy(config)
  if not is_training:
    hparams.set_hparam('drop_path_keep_prob', 1.0)
  return hparams


def drop_path_step(hparams, current_step):
  """The step drop-path ramps with: `current_step`, else the global step.

  Fetched here, before any cell scope is entered, so a global step created on
  first use is named 'global_step' rather than 'cell_0/.../global_step'.
  """
  if current_step is None and hparams.drop_path_keep_prob < 1.0:
    current_step = tf1.train.get_or_create_global_step()
  return current_step


@contextlib.contextmanager
def cell_arg_scope(is_training, data_format):
  """Routes `is_training` and `data_format` to every layer a cell builds."""
  with slim.arg_scope([slim.dropout, drop_path, slim.batch_norm],
                      is_training=is_training):
    with slim.arg_scope([slim.avg_pool2d, slim.max_pool2d, slim.conv2d,
                         slim.batch_norm, slim.separable_conv2d,
                         factorized_reduction,
                         global_avg_pool,
                         get_channel_index,
                         get_channel_dim],
                        data_format=data_format):
      yield


def to_data_format(images, data_format):
  """Inputs are NHWC; NCHW (faster on GPUs) transposes them once."""
  if data_format == DATA_FORMAT_NCHW:
    return tf.transpose(images, [0, 3, 1, 2])
  return images


def build_aux_head(net, end_points, num_classes, hparams, scope):
  """Auxiliary classifier: 5x5/3 avg pool, 1x1 conv (128), a conv spanning
  the remaining map (768), fully connected; sets end_points['AuxLogits']."""
  activation_fn = tf.nn.relu6 if hparams.use_bounded_activation else tf.nn.relu
  with tf1.variable_scope(scope):
    aux_logits = tf.identity(net)
    with tf1.variable_scope('aux_logits'):
      aux_logits = slim.avg_pool2d(aux_logits, [5, 5], stride=3,
                                   padding='VALID')
      aux_logits = slim.conv2d(aux_logits, 128, [1, 1], scope='proj')
      aux_logits = slim.batch_norm(aux_logits, scope='aux_bn0')
      aux_logits = activation_fn(aux_logits)
      if hparams.data_format == DATA_FORMAT_NHWC:
        kernel = aux_logits.shape[1:3]
      else:
        kernel = aux_logits.shape[2:4]
      aux_logits = slim.conv2d(aux_logits, 768, kernel, padding='VALID')
      aux_logits = slim.batch_norm(aux_logits, scope='aux_bn1')
      aux_logits = activation_fn(aux_logits)
      aux_logits = slim.flatten(aux_logits)
      end_points['AuxLogits'] = slim.fully_connected(aux_logits, num_classes)


def imagenet_stem(inputs, hparams, stem_cell, current_step=None):
  """3x3/2 VALID conv, then two stride-2 cells at 1/4 and 1/2 of the filters."""
  num_stem_cells = 2
  net = slim.conv2d(inputs, int(32 * hparams.stem_multiplier), [3, 3],
                    stride=2, padding='VALID', scope='conv0')
  net = slim.batch_norm(net, scope='conv0_bn')
  cell_outputs = [None, net]
  filter_scaling = 1.0 / (hparams.filter_scaling_rate ** num_stem_cells)
  for cell_num in range(num_stem_cells):
    net = stem_cell(net, scope='cell_stem_{}'.format(cell_num),
                    filter_scaling=filter_scaling, stride=2,
                    prev_layer=cell_outputs[-2], cell_num=cell_num,
                    current_step=current_step)
    cell_outputs.append(net)
    filter_scaling *= hparams.filter_scaling_rate
  return net, cell_outputs


def aux_head_cells(hparams):
  """The aux head reads the cell just before the second reduction."""
  reductions = calc_reduction_layers(
      hparams.num_cells, hparams.num_reduction_layers)
  return [reductions[1] - 1] if len(reductions) >= 2 else []


class EndPoints(object):
  """Records end points; `add` says whether building should stop there."""

  def __init__(self, final_endpoint):
    self.final_endpoint = final_endpoint
    self.end_points = {}

  def add(self, name, net):
    self.end_points[name] = net
    return bool(self.final_endpoint) and name == self.final_endpoint


def classifier(net, points, num_classes, hparams):
  """`final_layer`: relu, global average pool, dropout, fully connected."""
  activation_fn = tf.nn.relu6 if hparams.use_bounded_activation else tf.nn.relu
  with tf1.variable_scope('final_layer'):
    net = activation_fn(net)
    net = global_avg_pool(net)
    if points.add('global_pool', net) or not num_classes:
      return net, points.end_points
    net = slim.dropout(net, hparams.dense_dropout_keep_prob, scope='dropout')
    logits = slim.fully_connected(net, num_classes)
    if points.add('Logits', logits):
      return logits, points.end_points
    predictions = tf.nn.softmax(logits, name='predictions')
    if points.add('Predictions', predictions):
      return predictions, points.end_points
  return logits, points.end_points


def logits_scopes(config):
  """The classifier scopes of a config: final_layer and its aux head."""
  return ('final_layer',) + tuple(
      'aux_{}'.format(cell) for cell in aux_head_cells(config))
