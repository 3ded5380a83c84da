"""Quantization-aware training (quantization/): the rewrite computes what TF
1.15's tf.contrib.quantize computes, with its names. The reference is
contrib's own code run on our networks (tests/data/qat_reference/, its
README says how): every variable it adds (name, shape, in order) and every
fake quant (what it reads, its range kind) must be ours too."""
import gzip
import json
import os
import re
import zlib

import numpy as np
import pytest
import tensorflow as tf

import quantization
from nets import nets_factory
from nets import registry

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = os.path.join(ROOT, 'tests', 'data', 'qat_reference')
# The reference's graphs are TF 1.15's (its README): TF 1's cond, and
# dropout as x * scale * cast(mask), ops `dropout/mul` and `dropout/mul_1`,
# where TF 2 builds `dropout/Mul` and `dropout/SelectV2`. Variables and fake
# quants keep TF 1.15's names in both; the ops they read and feed are
# compared under TF 2's names.
TF2_DROPOUT_OPS = re.compile(r'(/dropout(?:_\d+)?)/mul(_1)?$')


def _tf2_op_name(name):
  return TF2_DROPOUT_OPS.sub(
      lambda m: m.group(1) + ('/SelectV2' if m.group(2) else '/Mul'), name)


def _reference(name):
  with gzip.open(os.path.join(REFERENCE, name + '.json.gz'), 'rt') as f:
    return json.load(f)


def _rewritten(name, mode, shape, quant_delay=100):
  """(graph, added variables [[name, shape]], fake quants) of `name`'s
  network built as the reference built it, then rewritten."""
  info = registry.lookup(name)
  graph = tf.Graph()
  with graph.as_default():
    images = tf1.placeholder(tf.float32, shape, name='input')
    network = nets_factory.get_network_fn(name, info.num_classes,
                                          is_training=mode == 'train')
    logits, _ = network(images)
    if mode == 'train':
      labels = tf.one_hot(tf.zeros([shape[0]], tf.int32), info.num_classes)
      tf1.losses.softmax_cross_entropy(labels, logits)
    before = {v.op.name for v in tf1.global_variables()}
    if mode == 'train':
      quantization.create_training_graph(quant_delay=quant_delay)
    else:
      quantization.create_eval_graph()
    added = [[v.op.name, v.shape.as_list()] for v in tf1.global_variables()
             if v.op.name not in before]
  return graph, added, _fake_quants(graph)


def _fake_quants(graph):
  """(name, what it reads, narrow range, the ops reading it) of each fake
  quant; a reader inside a quant_delay cond stands for the cond's readers."""
  def readers(op):
    if '/delayed_quant' in op.name:
      return {r for o in op.outputs for c in o.consumers() for r in readers(c)}
    return {op.name}
  return sorted(
      (op.name, op.inputs[0].op.name, op.get_attr('narrow_range'),
       sorted({r for c in op.outputs[0].consumers() for r in readers(c)}))
      for op in graph.get_operations()
      if op.type == 'FakeQuantWithMinMaxVars')


def _assert_as_the_reference(name, mode):
  reference = _reference(name)[mode]
  _, added, fake_quants = _rewritten(name, mode, reference['input_shape'])
  assert added == [[v[0], v[1]] for v in reference['added_variables']]
  assert fake_quants == sorted(
      (f[0], _tf2_op_name(f[1]), f[2], sorted(map(_tf2_op_name, f[3])))
      for f in reference['fake_quant'])
  return added


def test_mobilenet_v1_025_gets_tf_slims_quantization_variables_and_ops():
  added = _assert_as_the_reference('mobilenet_v1_025', 'eval')
  assert len(added) == 28 * 4  # 28 layers: weights_quant, act_quant
  assert ['MobilenetV1/MobilenetV1/Conv2d_1_depthwise/weights_quant/max',
          []] in added
  assert ['MobilenetV1/Logits/Conv2d_1c_1x1/weights_quant/min', []] in added
  added = _assert_as_the_reference('mobilenet_v1_025', 'train')
  names = [n for n, _ in added]
  assert 'fake_quantization_step' in names
  assert ('MobilenetV1/MobilenetV1/Conv2d_0/act_quant/MobilenetV1/'
          'MobilenetV1/Conv2d_0/act_quant/min/biased') in names


# One network of each family in CI (each shape the rewrite meets: plain
# convs, fully-connected layers, residual adds before and after the
# activation, hard-swish muls, a 3-D net and a NASNet refused); every network
# with QAT_ALL_NETWORKS=1 (about 15 minutes on 2 cores).
CI_NETWORKS = {'lenet': ('eval', 'train'), 'cifarnet': ('eval', 'train'),
               'overfeat': ('eval', 'train'), 'vgg_a': ('eval', 'train'),
               'alexnet_v2': ('eval', 'train'),
               'resnet_v1_50': ('eval', 'train'),
               'resnet_v2_50': ('eval', 'train'),
               'mobilenet_v3_small_minimalistic': ('eval', 'train'),
               'i3d': ('eval', 'train'), 'pnasnet_mobile': ('eval',)}


def _reference_names():
  if os.environ.get('QAT_ALL_NETWORKS') != '1':
    return sorted(CI_NETWORKS)
  return sorted(f[:-len('.json.gz')] for f in os.listdir(REFERENCE)
                if f.endswith('.json.gz'))


@pytest.mark.slow
@pytest.mark.parametrize('name', _reference_names())
def test_every_network_is_rewritten_as_the_reference_or_refused(name):
  reference = _reference(name)
  modes = CI_NETWORKS.get(name, ('eval', 'train'))
  if os.environ.get('QAT_ALL_NETWORKS') == '1':
    modes = ('eval', 'train')
  for mode in modes:
    # Where the reference failed, or left a layer in float without a word
    # (nasnet's and pnasnet's projections), the rewrite refuses, naming one.
    refused = [layer for layer, _ in reference[mode]['unquantized_layers']]
    if reference[mode]['error'] or refused:
      with pytest.raises(quantization.UnsupportedLayer,
                         match=r'^layer \S+ cannot be quantized: ') as raised:
        _rewritten(name, mode, reference[mode]['input_shape'])
      if refused:  # the layer (or its op) the reference left in float
        named = str(raised.value).split()[1]
        assert any(r == named or r.startswith(named + '/') for r in refused), (
            str(raised.value))
    else:
      _assert_as_the_reference(name, mode)


def test_a_transposed_or_3d_convolution_is_refused_naming_the_layer():
  with tf.Graph().as_default():
    images = tf1.placeholder(tf.float32, [1, 8, 8, 3])
    net = tf1.layers.conv2d(images, 4, 3, name='encode')
    tf1.layers.conv2d_transpose(net, 3, 3, name='decode')
    with pytest.raises(quantization.UnsupportedLayer,
                       match=r'^layer decode cannot be quantized: a '
                             r'transposed convolution'):
      quantization.create_eval_graph()
    assert not [op for op in tf1.get_default_graph().get_operations()
                if op.type == 'FakeQuantWithMinMaxVars']  # left as it was
  with tf.Graph().as_default():
    tf1.layers.conv3d(tf1.placeholder(tf.float32, [1, 4, 8, 8, 3]), 4, 3,
                      name='video')
    with pytest.raises(quantization.UnsupportedLayer,
                       match=r'^layer video cannot be quantized: a 3-D'):
      quantization.create_training_graph()


def test_a_graph_is_rewritten_once():
  with tf.Graph().as_default():
    tf1.layers.conv2d(tf1.placeholder(tf.float32, [1, 8, 8, 3]), 4, 3,
                      activation=tf.nn.relu)
    quantization.create_eval_graph()
    with pytest.raises(ValueError, match='already quantized'):
      quantization.create_eval_graph()


def _conv_bn(images, is_training):
  import tf_slim as slim
  with slim.arg_scope([slim.batch_norm], is_training=is_training):
    return slim.conv2d(images, 8, 3, normalizer_fn=slim.batch_norm,
                       activation_fn=tf.nn.relu6, scope='layer')


def test_quant_delay_trains_in_float_until_that_step_then_fake_quantized():
  """Before quant_delay runs the folded layer computes what batch norm
  computes; from it on, its output lies on the fake quant's grid."""
  rng = np.random.RandomState(0)
  images = rng.uniform(-1, 1, [4, 6, 6, 3]).astype(np.float32)
  outputs = {}
  for delay in (None, 2):
    with tf.Graph().as_default():
      tf1.set_random_seed(0)
      # The batch size unknown, as the trainer's input is: the fold counts
      # the batch (Bessel's correction) when the graph runs.
      x = tf1.placeholder(tf.float32, (None,) + images.shape[1:])
      # The layer's reader: the rewrite puts the fake quant before it.
      y = tf.identity(_conv_bn(x, is_training=True))
      if delay is not None:
        quantization.create_training_graph(quant_delay=delay)
      with tf1.Session() as session:
        session.run(tf1.global_variables_initializer())
        outputs[delay] = [session.run(y, {x: images}) for _ in range(3)]
        if delay is not None:
          step = [v for v in tf1.global_variables()
                  if v.op.name == 'fake_quantization_step'][0]
          assert session.run(step) == 3
          low, high = session.run(
              [v for v in tf1.global_variables()
               if v.op.name in ('layer/act_quant/min', 'layer/act_quant/max')])
  float_run, delayed = outputs[None], outputs[2]
  np.testing.assert_allclose(delayed[0], float_run[0], atol=1e-5)
  assert np.abs(delayed[2] - float_run[2]).max() > 1e-3  # now quantized
  scale = (high - low) / 255.0
  levels = (delayed[2] - low) / scale
  np.testing.assert_allclose(levels, np.round(levels), atol=2e-3)


# -- through the scripts, as TF-Slim's users run them ------------------------
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_train_with_quantize_delay_then_eval_and_export_as_tf_slims_scripts(
    digits_dir, tmp_path):
  from test_training import EVAL, LENET_FLAGS, TRAIN, run
  train_dir = str(tmp_path / 'qat')
  trained = run(TRAIN, *LENET_FLAGS, '--dataset_dir=' + digits_dir,
                '--train_dir=' + train_dir, '--max_number_of_steps=150',
                '--quantize_delay=50', '--log_every_n_steps=50')
  assert trained.returncode == 0, trained.stderr[-3000:]
  names = dict(tf.train.list_variables(train_dir))
  for layer in ('conv1', 'conv2', 'fc3', 'fc4'):
    for quantizer in ('weights_quant', 'act_quant'):
      assert 'LeNet/%s/%s/min' % (layer, quantizer) in names
  assert tf.train.load_variable(train_dir, 'fake_quantization_step') == 150
  low = tf.train.load_variable(train_dir, 'LeNet/conv1/weights_quant/min')
  high = tf.train.load_variable(train_dir, 'LeNet/conv1/weights_quant/max')
  weights = tf.train.load_variable(train_dir, 'LeNet/conv1/weights')
  # the last step's weights before their update: within one step of them
  assert abs(low - weights.min()) < 0.05 and abs(high - weights.max()) < 0.05
  with open(os.path.join(train_dir, 'training.json')) as f:
    assert json.load(f)['quantize_delay'] == 50

  evaluated = run(EVAL, '--dataset_name=digits', '--dataset_dir=' + digits_dir,
                  '--dataset_split_name=validation',
                  '--checkpoint_path=' + train_dir,
                  '--eval_dir=' + str(tmp_path / 'eval'))
  assert evaluated.returncode == 0, evaluated.stderr[-3000:]
  assert '--quantize' in evaluated.stdout.splitlines()[0], evaluated.stdout
  accuracy = float(evaluated.stdout.split('Accuracy = ')[1].split()[0])
  as_float = run(EVAL, '--dataset_name=digits', '--dataset_dir=' + digits_dir,
                 '--dataset_split_name=validation', '--quantize=false',
                 '--checkpoint_path=' + train_dir,
                 '--eval_dir=' + str(tmp_path / 'eval_float'))
  assert as_float.returncode == 0, as_float.stderr[-3000:]
  float_accuracy = float(as_float.stdout.split('Accuracy = ')[1].split()[0])
  assert accuracy > 0.8 and abs(accuracy - float_accuracy) <= 0.02, (
      accuracy, float_accuracy)

  graph_file = str(tmp_path / 'frozen.pb')
  exported = run('export_inference_graph.py', '--checkpoint_path=' + train_dir,
                 '--output_file=' + graph_file, '--batch_size=1')
  assert exported.returncode == 0, exported.stderr[-3000:]
  graph_def = tf1.GraphDef()
  with open(graph_file, 'rb') as f:
    graph_def.ParseFromString(f.read())
  fake_quants = [n for n in graph_def.node
                 if n.op == 'FakeQuantWithMinMaxVars']
  assert len(fake_quants) == 8
  assert 'LeNet/conv1/weights_quant/FakeQuantWithMinMaxVars' in {
      n.name for n in fake_quants}

  # A float checkpoint has no ranges: one line, nothing written.
  float_dir = str(tmp_path / 'float')
  with tf.Graph().as_default():
    network = nets_factory.get_network_fn('lenet', 10)
    network(tf1.placeholder(tf.float32, [1, 28, 28, 3]))
    tf1.train.get_or_create_global_step()
    with tf1.Session() as session:
      session.run(tf1.global_variables_initializer())
      tf1.train.Saver().save(session, os.path.join(float_dir, 'model.ckpt'))
  refused = run('export_inference_graph.py', '--model_name=lenet',
                '--dataset_name=digits', '--dataset_dir=' + digits_dir,
                '--checkpoint_path=' + float_dir, '--quantize',
                '--output_file=' + str(tmp_path / 'refused.pb'),
                '--batch_size=1')
  assert refused.returncode == 1
  assert refused.stderr.strip().splitlines()[-1] == (
      "export_inference_graph: error: --quantize: checkpoint '%s' holds no "
      'quantization ranges (weights_quant, act_quant): it was trained without '
      '--quantize_delay; drop --quantize, or train it quantized'
      % os.path.join(float_dir, 'model.ckpt'))
  assert not os.path.exists(str(tmp_path / 'refused.pb'))


def _recipe_value(name, shape):
  """The reference's value of a float variable (qat_reference/README_json's
  recipe, also in tests/data/qat_reference/README.md)."""
  value = np.random.RandomState(zlib.crc32(name.encode('utf-8'))).normal(
      size=shape) * 0.1
  if name.endswith(('gamma', 'moving_variance')):
    value = np.abs(value) + 0.5
  return value.astype(np.float32)


def test_mobilenet_v1_025_eval_graph_computes_contribs_logits_from_its_ranges():
  """Numbers, not names: contrib's eval graph of mobilenet_v1_025 (folded
  depthwise and pointwise convs, the logits layer) on the same weights,
  moving statistics and ranges gave these logits; ours, restoring those
  ranges by name, gives the same."""
  values = np.load(os.path.join(REFERENCE, 'mobilenet_v1_025_values.npz'))
  images = np.random.RandomState(0).uniform(-1, 1, [2, 128, 128, 3]).astype(
      np.float32)
  assert np.isclose(images.astype(np.float64).sum(), values['input_check/sum'])
  with tf.Graph().as_default():
    network = nets_factory.get_network_fn('mobilenet_v1_025', 1001)
    logits, _ = network(tf1.constant(images))
    model = {v.op.name: v for v in tf1.global_variables()}
    quantization.create_eval_graph()
    with tf1.Session() as session:
      for variable in tf1.global_variables():
        name = variable.op.name
        if name in model:
          value = values.get('moving_stats/' + name)
          if value is None:
            value = _recipe_value(name, variable.shape.as_list())
        else:  # a range, by its TF-Slim name
          value = values[name]
        variable.load(value, session)
      got = session.run(quantization.quantized_output(logits))
  np.testing.assert_allclose(got, values['eval/logits'], rtol=1e-4, atol=1e-4)
  assert not np.allclose(got, values['eval_initial_ranges/logits'], atol=1e-3)
