"""nets.dcgan, nets.cyclegan and nets.pix2pix: TF-Slim's behaviour and TF-Slim's numbers.

First what TF-Slim's own dcgan_test, cyclegan_test and pix2pix_test check
(output shapes at the sizes they try, end points and layer depths, the
upsampling methods, the errors for bad sizes), with variable counts.

Then the reference: each of REFERENCE_CASES was built once with TF-Slim's own
dcgan.py, cyclegan.py and pix2pix.py, and its variables (names and shapes, in
creation order), end points and, for the small cases, the outputs of a fixed
input under fixed variable values were recorded in tests/data/gan_reference
(its README says how). Here each case is built with our modules, given the
same variable values and input, and must agree on all of them.

Last, docs/gans.md's example runs as written.

Re-record (only from TF-Slim's modules, never from ours):
  ./.venv/bin/python tests/test_gan_nets.py --record DIR
where DIR/slim_ref/{dcgan,cyclegan,pix2pix}.py are TF-Slim's modules.
"""
import collections
import functools
import json
import os
import re
import subprocess
import sys
import zlib

import numpy as np
import pytest
import tensorflow as tf

if __name__ == '__main__':  # run as a script: the project root on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))
import tf_compat  # noqa: E402,F401  (tf-slim on TF 2.21)
import tf_slim as slim  # noqa: E402

from nets import cyclegan, dcgan, pix2pix  # noqa: E402

tf1 = tf.compat.v1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE_DIR = os.path.join(ROOT, 'tests', 'data', 'gan_reference')
OURS = {'dcgan': dcgan, 'cyclegan': cyclegan, 'pix2pix': pix2pix}


def _input(shape):
  """A float32 input of static shape `shape` (None: unknown)."""
  return tf1.placeholder(tf.float32, shape)


def _variables():
  """[(name, shape)] of the default graph's variables, in creation order."""
  return [(v.op.name, v.shape.as_list()) for v in tf1.global_variables()]


def _run(fetches, feed_dict=None):
  """`fetches` of the default graph, its variables initialised."""
  with tf1.Session() as sess:
    sess.run(tf1.global_variables_initializer())
    return sess.run(fetches, feed_dict)


# -- DCGAN (TF-Slim's dcgan_test) --------------------------------------------
@pytest.mark.parametrize('log_size,batch_size', [(3, 3), (4, 4), (5, 5),
                                                 (6, 6)])
def test_dcgan_generator_makes_final_size_images_halving_the_depth(
    log_size, batch_size):
  final_size = 2 ** log_size
  with tf.Graph().as_default():
    image, end_points = dcgan.generator(_input([batch_size, 64]), depth=32,
                                        final_size=final_size)
  assert image.shape.as_list() == [batch_size, final_size, final_size, 3]
  assert list(end_points) == ['deconv%d' % j
                              for j in range(1, log_size)] + ['logits']
  for j in range(1, log_size):
    assert end_points['deconv%d' % j].shape[-1] == 32 * 2 ** (log_size - j - 1)


def test_dcgan_generator_runs():
  with tf.Graph().as_default():
    tf1.set_random_seed(1234)
    image, _ = dcgan.generator(tf1.random_normal([4, 16]), depth=8,
                               final_size=8)
    value = _run(image)
  assert value.shape == (4, 8, 8, 3)
  assert np.all(np.isfinite(value))


def test_dcgan_generator_rejects_a_bad_noise_rank_or_final_size():
  with tf.Graph().as_default():
    with pytest.raises(ValueError):
      dcgan.generator(_input([5, 32, 32]))
    noise = _input([3, 2])
    with pytest.raises(ValueError, match='must be a power of 2'):
      dcgan.generator(noise, final_size=30)
    with pytest.raises(ValueError, match='must be greater than 8'):
      dcgan.generator(noise, final_size=4)
    image, _ = dcgan.generator(noise, final_size=8)  # the smallest accepted
  assert image.shape.as_list() == [3, 8, 8, 3]


@pytest.mark.parametrize('log_size,batch_size', [(1, 3), (2, 4), (3, 5),
                                                 (4, 6), (5, 7)])
def test_dcgan_discriminator_gives_one_logit_per_image_doubling_the_depth(
    log_size, batch_size):
  side = 2 ** log_size
  with tf.Graph().as_default():
    logits, end_points = dcgan.discriminator(
        _input([batch_size, side, side, 3]), depth=32)
  assert logits.shape.as_list() == [batch_size, 1]
  assert list(end_points) == ['conv%d' % j
                              for j in range(1, log_size + 1)] + ['logits']
  for j in range(1, log_size + 1):
    assert end_points['conv%d' % j].shape[-1] == 32 * 2 ** (j - 1)


def test_dcgan_discriminator_runs():
  with tf.Graph().as_default():
    logits, _ = dcgan.discriminator(
        tf1.random_uniform([5, 32, 32, 3], -1, 1, seed=1), depth=8)
    value = _run(logits)
  assert value.shape == (5, 1)
  assert np.all(np.isfinite(value))


@pytest.mark.parametrize('shape,message', [
    ([5, 32, 32], 'rank 4'),
    ([5, 32, None, 3], 'must be known'),
    ([5, 32, 16, 3], 'not have equal width and height'),
    ([5, 30, 30, 3], 'not a power of 2')])
def test_dcgan_discriminator_rejects_images_it_cannot_take(shape, message):
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match=message):
      dcgan.discriminator(_input(shape))


def test_dcgan_variable_counts():
  """deconv1-3 and conv2-5 have batch norm: beta trainable, the moving mean
  and variance and the mean's two zero-debias variables not."""
  with tf.Graph().as_default():
    dcgan.generator(_input([2, 64]))
    assert len(tf1.trainable_variables()) == 3 * 2 + 2 + 2
    assert len(tf1.global_variables()) == 3 * 6 + 2 + 2
  with tf.Graph().as_default():
    dcgan.discriminator(_input([2, 32, 32, 3]))
    assert len(tf1.trainable_variables()) == 2 + 4 * 2 + 2
    assert len(tf1.global_variables()) == 2 + 4 * 6 + 2


def test_dcgan_discriminator_reuse_shares_the_variables():
  with tf.Graph().as_default():
    dcgan.discriminator(_input([2, 16, 16, 1]), depth=4)
    before = _variables()
    dcgan.discriminator(_input([2, 16, 16, 1]), depth=4, reuse=True)
    assert _variables() == before
    with pytest.raises(ValueError, match='already exists'):
      dcgan.discriminator(_input([2, 16, 16, 1]), depth=4)


@pytest.mark.parametrize('is_training,fused', [(True, False), (False, False),
                                               (True, True)])
def test_dcgan_batch_norm_options(is_training, fused):
  """Moving averages are updated in training only; `fused_batch_norm` picks
  the fused kernel."""
  with tf.Graph().as_default() as graph:
    image, _ = dcgan.generator(tf1.random_normal([2, 8], seed=1), depth=4,
                               final_size=16, is_training=is_training,
                               fused_batch_norm=fused)
    updates = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)
    value = _run(image)
  op_types = {op.type for op in graph.get_operations()}
  assert bool(updates) == is_training
  assert any(t.startswith('FusedBatchNorm') for t in op_types) == fused
  assert np.all(np.isfinite(value))


# -- CycleGAN (TF-Slim's cyclegan_test) ---------------------------------------
@pytest.mark.parametrize('shape', [[4, 32, 32, 3], [3, 128, 128, 3],
                                   [2, 80, 400, 3], [None, 32, None, 3]])
def test_cyclegan_output_has_the_input_shape(shape):
  with tf.Graph().as_default():
    images, _ = cyclegan.cyclegan_generator_resnet(_input(shape))
  assert images.shape.as_list() == shape


@pytest.mark.parametrize('kernel_size', [3, 4, 5, 6, [3, 4]])
def test_cyclegan_output_has_the_input_shape_for_any_kernel(kernel_size):
  with tf.Graph().as_default():
    images, _ = cyclegan.cyclegan_generator_resnet(
        _input([None, 32, 32, 3]), kernel_size=kernel_size, num_filters=8)
  assert images.shape.as_list() == [None, 32, 32, 3]


def test_cyclegan_generator_runs_to_tanh_plus_slope():
  with tf.Graph().as_default():
    images, end_points = cyclegan.cyclegan_generator_resnet(
        tf1.random_uniform([2, 32, 32, 3], -1, 1, seed=1), num_filters=8,
        num_resnet_blocks=2, tanh_linear_slope=0.5)
    images, logits = _run([images, end_points['logits']])
  assert list(end_points) == (
      ['encoder_0', 'encoder_1', 'encoder_2', 'resnet_block_0',
       'resnet_block_1', 'decoder1', 'decoder2', 'logits', 'predictions'])
  assert images.shape == (2, 32, 32, 3)
  np.testing.assert_allclose(images, np.tanh(logits) + 0.5 * logits,
                             rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('size', [29, 30, 31])
@pytest.mark.parametrize('dimension', ['height', 'width'])
def test_cyclegan_rejects_sizes_not_a_multiple_of_4(dimension, size):
  shape = [None, size, 32, 3] if dimension == 'height' else [None, 32, size, 3]
  with tf.Graph().as_default():
    with pytest.raises(ValueError,
                       match='The input %s must be a multiple of 4.'
                       % dimension):
      cyclegan.cyclegan_generator_resnet(_input(shape))


@pytest.mark.parametrize('method,variables', [
    ('conv2d_transpose', [('upconv/Conv2d_transpose/weights', [3, 3, 4, 6]),
                          ('upconv/Conv2d_transpose/biases', [4])]),
    ('nn_upsample_conv', [('upconv/Conv/weights', [3, 3, 6, 4]),
                          ('upconv/Conv/biases', [4])]),
    ('bilinear_upsample_conv', [('upconv/Conv/weights', [3, 3, 6, 4]),
                                ('upconv/Conv/biases', [4])])])
def test_cyclegan_upsample_methods(method, variables):
  with tf.Graph().as_default():
    up = cyclegan.cyclegan_upsample(
        tf1.random_uniform([2, 5, 7, 6], seed=1), 4, [2, 2], method=method)
    assert _variables() == variables
    value = _run(up)
  assert value.shape == (2, 10, 14, 4)


def test_cyclegan_upsample_rejects_an_unknown_method():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match=r'Unknown method: \[bicubic\]'):
      cyclegan.cyclegan_upsample(_input([1, 4, 4, 2]), 2, [2, 2], 'bicubic')


@pytest.mark.parametrize('method', ['nn_upsample_conv',
                                    'bilinear_upsample_conv'])
def test_cyclegan_generator_takes_each_upsampling(method):
  with tf.Graph().as_default():
    images, _ = cyclegan.cyclegan_generator_resnet(
        _input([1, 32, 48, 3]), num_filters=8,
        upsample_fn=functools.partial(cyclegan.cyclegan_upsample,
                                      method=method))
    names = [name for name, _ in _variables()]
  assert images.shape.as_list() == [1, 32, 48, 3]
  assert 'decoder/decoder1/upconv/Conv/InstanceNorm/gamma' in names


def test_cyclegan_variable_counts_and_weight_decay():
  """A 7x7, 2 encoder and 12 residual convolutions with instance norm
  (weights, beta, gamma), 2 transposed convolutions and the output one with
  biases; weight decay covers the 16 convolutions under the arg scope."""
  with tf.Graph().as_default():
    cyclegan.cyclegan_generator_resnet(
        _input([1, 32, 32, 3]),
        arg_scope_fn=functools.partial(cyclegan.cyclegan_arg_scope,
                                       weight_decay=1e-4))
    assert len(tf1.global_variables()) == 15 * 3 + 2 * 2 + 2
    assert len(tf1.trainable_variables()) == 51
    assert len(tf1.losses.get_regularization_losses()) == 16


# -- pix2pix (TF-Slim's pix2pix_test) -----------------------------------------
def _reduced_default_blocks():
  return [pix2pix.Block(b.num_filters // 32, b.decoder_keep_prob)
          for b in pix2pix._default_generator_blocks()]  # pylint: disable=protected-access


@pytest.mark.parametrize('method', ['nn_upsample_conv', 'conv2d_transpose'])
def test_pix2pix_generator_output_size(method):
  with tf.Graph().as_default():
    with slim.arg_scope(pix2pix.pix2pix_arg_scope()):
      logits, _ = pix2pix.pix2pix_generator(
          tf.ones((2, 256, 256, 3)), 4, blocks=_reduced_default_blocks(),
          upsample_method=method)
    assert _run(logits).shape == (2, 256, 256, 4)


def test_pix2pix_block_number_dictates_number_of_layers():
  blocks = [pix2pix.Block(64, 0.5), pix2pix.Block(128, 0)]
  with tf.Graph().as_default():
    with slim.arg_scope(pix2pix.pix2pix_arg_scope()):
      _, end_points = pix2pix.pix2pix_generator(_input([2, 256, 256, 3]), 4,
                                                blocks)
  assert list(end_points) == ['encoder0', 'encoder1', 'decoder0', 'decoder1',
                              'logits', 'predictions']


def test_pix2pix_decoder_dropout_stays_on_at_test_time():
  """As in the paper: the decoder's dropout is the generator's noise."""
  with tf.Graph().as_default():
    tf1.set_random_seed(1)
    logits, end_points = pix2pix.pix2pix_generator(
        tf.ones((1, 16, 16, 3)), 2,
        blocks=[pix2pix.Block(4, 0.5), pix2pix.Block(8, 0)],
        is_training=False)
    with tf1.Session() as sess:
      sess.run(tf1.global_variables_initializer())
      first, second = sess.run(logits), sess.run(logits)
      logits, predictions = sess.run([logits, end_points['predictions']])
  assert np.max(np.abs(first - second)) > 0
  np.testing.assert_allclose(predictions, np.tanh(logits), rtol=1e-6,
                             atol=1e-7)


def test_pix2pix_upsample_rejects_an_unknown_method():
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match=r'Unknown method: \[bicubic\]'):
      pix2pix.pix2pix_generator(_input([1, 16, 16, 3]), 2,
                                blocks=[pix2pix.Block(4, 0)],
                                upsample_method='bicubic')


def _layer_output_size(input_size, kernel_size=4, stride=2, pad=2):
  return (input_size + pad * 2 - kernel_size) // stride + 1


@pytest.mark.parametrize('pad', [2, 0])
def test_pix2pix_discriminator_four_layers(pad):
  size = 256
  for stride in (2, 2, 2, 1, 1):
    size = _layer_output_size(size, stride=stride, pad=pad)
  with tf.Graph().as_default():
    with slim.arg_scope(pix2pix.pix2pix_arg_scope()):
      logits, end_points = pix2pix.pix2pix_discriminator(
          _input([2, 256, 256, 3]), num_filters=[64, 128, 256, 512],
          padding=pad)
  assert logits.shape.as_list() == [2, size, size, 1]
  assert end_points['predictions'].shape.as_list() == [2, size, size, 1]
  assert list(end_points) == ['conv0', 'conv1', 'conv2', 'conv3', 'logits',
                              'predictions']


@pytest.mark.parametrize('kwargs,error', [
    (dict(padding=1.5), TypeError),
    (dict(padding=-1), ValueError),
    (dict(num_filters=[64]), ValueError)])
def test_pix2pix_discriminator_rejects(kwargs, error):
  kwargs = dict(dict(num_filters=[64, 128, 256, 512]), **kwargs)
  with tf.Graph().as_default():
    with slim.arg_scope(pix2pix.pix2pix_arg_scope()):
      with pytest.raises(error):
        pix2pix.pix2pix_discriminator(_input([2, 256, 256, 3]), **kwargs)


def test_pix2pix_variable_counts():
  """Generator: 5 encoder and 7 decoder convolutions with instance norm
  (weights, beta, gamma); the first and last encoder and the output one with
  biases. Discriminator: conv1-conv3 normalised, conv0 and conv4 biased."""
  with tf.Graph().as_default():
    with slim.arg_scope(pix2pix.pix2pix_arg_scope()):
      pix2pix.pix2pix_generator(_input([1, 256, 256, 3]), 3)
    assert len(tf1.global_variables()) == 12 * 3 + 3 * 2
  with tf.Graph().as_default():
    with slim.arg_scope(pix2pix.pix2pix_arg_scope()):
      pix2pix.pix2pix_discriminator(_input([1, 256, 256, 3]),
                                    [64, 128, 256, 512])
    assert len(tf1.global_variables()) == 3 * 3 + 2 * 2


# -- where they are -----------------------------------------------------------
def test_the_gan_nets_are_not_in_the_classifier_factory():
  import nets  # pylint: disable=import-outside-toplevel
  from nets import nets_factory  # pylint: disable=import-outside-toplevel
  names = set(nets_factory.networks_map)
  assert not {n for n in names if re.match('(dcgan|cyclegan|pix2pix)', n)}
  assert not {m for m in OURS if nets.is_family('nets.' + m)}


@pytest.mark.slow
def test_tf_slim_import_lines_change_no_process_mode():
  code = ('import tensorflow as tf\n'
          'from nets import dcgan\n'
          'from nets import cyclegan\n'
          'from nets import pix2pix\n'
          'print(tf.executing_eagerly(), dcgan.generator.__name__,\n'
          '      cyclegan.cyclegan_generator_resnet.__name__,\n'
          '      pix2pix.Block(64, 0.5))\n')
  result = subprocess.run([sys.executable, '-c', code], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.split('\n')[-2] == (
      'True generator cyclegan_generator_resnet '
      'Block(num_filters=64, decoder_keep_prob=0.5)')


# -- equal to TF-Slim's modules -----------------------------------------------
# module: the one of OURS (or TF-Slim's) the case builds; input_shape: of the
# float32 input; build(module, inputs) -> (output, end_points); run: whether
# outputs were recorded (the full-size cases record variables and end points
# only).
Case = collections.namedtuple('Case', 'module input_shape build run')


def _in_pix2pix_scope(build):
  def build_in_scope(m, x):
    with slim.arg_scope(m.pix2pix_arg_scope()):
      return build(m, x)
  return build_in_scope


def _small_blocks(m):
  # No dropout: the decoder's dropout is random even at test time.
  return [m.Block(4, 0), m.Block(8, 0), m.Block(8, 0)]


REFERENCE_CASES = {
    # DCGAN: batch statistics (training) and moving ones (inference).
    'dcgan_generator': Case('dcgan', [2, 8], lambda m, x: m.generator(
        x, depth=4, final_size=16, num_outputs=1), True),
    'dcgan_generator_inference': Case('dcgan', [2, 8], lambda m, x: m.generator(
        x, depth=4, final_size=16, num_outputs=1, is_training=False), True),
    'dcgan_discriminator': Case('dcgan', [2, 16, 16, 1], lambda m, x:
                                m.discriminator(x, depth=4), True),
    'dcgan_discriminator_inference': Case(
        'dcgan', [2, 16, 16, 1], lambda m, x: m.discriminator(
            x, depth=4, is_training=False), True),
    'dcgan_generator_default': Case('dcgan', [1, 64], lambda m, x:
                                    m.generator(x), False),
    'dcgan_discriminator_default': Case('dcgan', [1, 32, 32, 3], lambda m, x:
                                        m.discriminator(x), False),
    # CycleGAN: each upsampling, and the other options.
    'cyclegan_conv2d_transpose': Case(
        'cyclegan', [1, 16, 16, 3], lambda m, x: m.cyclegan_generator_resnet(
            x, num_resnet_blocks=2, num_filters=4), True),
    'cyclegan_nn_upsample_conv': Case(
        'cyclegan', [1, 16, 16, 3], lambda m, x: m.cyclegan_generator_resnet(
            x, num_resnet_blocks=2, num_filters=4,
            upsample_fn=functools.partial(m.cyclegan_upsample,
                                          method='nn_upsample_conv')), True),
    'cyclegan_bilinear_upsample_conv': Case(
        'cyclegan', [1, 16, 16, 3], lambda m, x: m.cyclegan_generator_resnet(
            x, num_resnet_blocks=2, num_filters=4,
            upsample_fn=functools.partial(m.cyclegan_upsample,
                                          method='bilinear_upsample_conv')),
        True),
    'cyclegan_options': Case(
        'cyclegan', [2, 12, 20, 2], lambda m, x: m.cyclegan_generator_resnet(
            x, num_resnet_blocks=1, num_filters=4, kernel_size=4,
            tanh_linear_slope=0.1,
            arg_scope_fn=functools.partial(
                m.cyclegan_arg_scope, instance_norm_epsilon=0.01,
                instance_norm_scale=False),
            upsample_fn=functools.partial(
                m.cyclegan_upsample, method='bilinear_upsample_conv',
                align_corners=True, pad_mode='SYMMETRIC')), True),
    'cyclegan_default': Case('cyclegan', [1, 32, 32, 3], lambda m, x:
                             m.cyclegan_generator_resnet(x), False),
    # pix2pix: each upsampling, with and without the arg scope.
    'pix2pix_generator_nn_upsample_conv': Case(
        'pix2pix', [1, 16, 16, 3], _in_pix2pix_scope(
            lambda m, x: m.pix2pix_generator(x, 2, _small_blocks(m))), True),
    'pix2pix_generator_conv2d_transpose': Case(
        'pix2pix', [1, 16, 16, 3], _in_pix2pix_scope(
            lambda m, x: m.pix2pix_generator(
                x, 2, _small_blocks(m), upsample_method='conv2d_transpose')),
        True),
    'pix2pix_generator_no_arg_scope': Case(
        'pix2pix', [1, 16, 16, 3], lambda m, x: m.pix2pix_generator(
            x, 2, _small_blocks(m)), True),
    'pix2pix_discriminator': Case(
        'pix2pix', [1, 16, 16, 3], _in_pix2pix_scope(
            lambda m, x: m.pix2pix_discriminator(x, [4, 8, 8])), True),
    'pix2pix_discriminator_options': Case(
        'pix2pix', [2, 16, 16, 3], _in_pix2pix_scope(
            lambda m, x: m.pix2pix_discriminator(
                x, [4, 8, 8], padding=1, pad_mode='SYMMETRIC',
                activation_fn=tf.nn.relu)), True),
    'pix2pix_discriminator_no_padding': Case(
        'pix2pix', [1, 32, 32, 3], _in_pix2pix_scope(
            lambda m, x: m.pix2pix_discriminator(x, [4, 8], padding=0)), True),
    'pix2pix_generator_default': Case(
        'pix2pix', [1, 256, 256, 3], _in_pix2pix_scope(
            lambda m, x: m.pix2pix_generator(x, 3)), False),
    'pix2pix_generator_default_conv2d_transpose': Case(
        'pix2pix', [1, 256, 256, 3], _in_pix2pix_scope(
            lambda m, x: m.pix2pix_generator(
                x, 3, upsample_method='conv2d_transpose')), False),
    'pix2pix_discriminator_default': Case(
        'pix2pix', [1, 256, 256, 3], _in_pix2pix_scope(
            lambda m, x: m.pix2pix_discriminator(x, [64, 128, 256, 512])),
        False),
}


def variable_value(name, shape):
  """The value a reference case gives variable `name`, drawn from its name
  (so creation order does not matter): weights scaled by their fan-in, batch
  norm's gamma near 1 and variance in [0.5, 1.5]."""
  rng = np.random.RandomState(zlib.crc32(name.encode()))
  kind = name.rsplit('/', 1)[-1]
  if kind == 'weights':
    value = rng.standard_normal(shape) / np.sqrt(np.prod(shape[:-1]))
  elif kind == 'gamma':
    value = 1.0 + 0.1 * rng.standard_normal(shape)
  elif kind == 'moving_variance':
    value = rng.uniform(0.5, 1.5, shape)
  else:
    value = 0.1 * rng.standard_normal(shape)
  return value.astype(np.float32)


def case_input(name, shape):
  return np.random.RandomState(zlib.crc32(name.encode())).uniform(
      -1, 1, shape).astype(np.float32)


def evaluate_case(name, modules, inputs=None):
  """Builds case `name` with `modules` ({'dcgan': module, ...}).

  Returns (variables [(name, shape)] in creation order, end points
  [(name, shape)] with the net's output as 'output', and, when the case
  runs, {end point: value} for the input `inputs` (default case_input) with
  every variable set to its variable_value).
  """
  case = REFERENCE_CASES[name]
  with tf.Graph().as_default():
    images = tf1.placeholder(tf.float32, case.input_shape)
    output, end_points = case.build(modules[case.module], images)
    end_points = dict(end_points, output=output)
    variables = tf1.global_variables()
    specs = [(v.op.name, v.shape.as_list()) for v in variables]
    points = [(k, v.shape.as_list()) for k, v in end_points.items()]
    if not case.run:
      return specs, points, {}
    if inputs is None:
      inputs = case_input(name, case.input_shape)
    with tf1.Session() as sess:
      for variable, spec in zip(variables, specs):
        variable.load(variable_value(*spec), sess)
      outputs = sess.run(end_points, {images: inputs})
  return specs, points, outputs


def _reference_file(module, ext):
  return os.path.join(REFERENCE_DIR, '%s.%s' % (module, ext))


@pytest.fixture(scope='module')
def reference():
  """{module: (its JSON record, its npz arrays)}."""
  loaded = {}
  for module in OURS:
    with open(_reference_file(module, 'json')) as f:
      record = json.load(f)
    with np.load(_reference_file(module, 'npz')) as arrays:
      loaded[module] = (record, dict(arrays))
  return loaded


def values_checksum(specs):
  """A number that changes if variable_value draws other values."""
  return float(sum(np.sum(variable_value(n, s), dtype=np.float64)
                   for n, s in specs))


@pytest.mark.parametrize('name', sorted(REFERENCE_CASES))
def test_equals_tf_slims_module(name, reference):
  """Variable names and shapes (in creation order), end points and outputs
  of a fixed input under fixed variable values: those of TF-Slim's module."""
  module = REFERENCE_CASES[name].module
  record, arrays = reference[module]
  want = record[name]
  specs, points, outputs = evaluate_case(name, OURS,
                                         inputs=arrays.get(name + '|input'))
  assert [list(s) for s in specs] == want['variables']
  assert [list(p) for p in points] == want['end_points']
  assert sorted(outputs) == sorted(k.split('|', 2)[2] for k in arrays
                                   if k.startswith(name + '|output|'))
  if outputs:  # the variables had the values the reference had
    assert values_checksum(specs) == pytest.approx(want['values_checksum'],
                                                   rel=1e-12)
  worst = 0.0
  for key, value in outputs.items():
    expected = arrays['%s|output|%s' % (name, key)]
    assert value.shape == expected.shape, key
    error = float(np.max(np.abs(value - expected)))
    worst = max(worst, error)
    assert error <= 1e-5 * max(1.0, float(np.max(np.abs(expected)))), (
        key, error)
  print('%s: %d variables equal, %d outputs, max |difference| %.3g'
        % (name, len(specs), len(outputs), worst))


def test_the_reference_is_small_and_covers_every_case(reference):
  size = sum(os.path.getsize(os.path.join(REFERENCE_DIR, f))
             for f in os.listdir(REFERENCE_DIR))
  assert size < 1 << 20
  recorded = {name for record, _ in reference.values() for name in record}
  assert recorded == set(REFERENCE_CASES)
  for name, case in REFERENCE_CASES.items():
    arrays = reference[case.module][1]
    assert (name + '|output|output' in arrays) == case.run


def _one_entry_a_line(records):
  """`records` as JSON with one variable or end point a line (readable
  diffs)."""
  cases = []
  for name, fields in records.items():
    lines = []
    for key, value in fields.items():
      if isinstance(value, list) and value and isinstance(value[0], list):
        value = '[\n%s]' % ',\n'.join('   ' + json.dumps(v) for v in value)
      else:
        value = json.dumps(value)
      lines.append('  %s: %s' % (json.dumps(key), value))
    cases.append(' %s: {\n%s}' % (json.dumps(name), ',\n'.join(lines)))
  return '{\n%s\n}\n' % ',\n'.join(cases)


def record(reference_root):
  """Writes tests/data/gan_reference from TF-Slim's modules, which are
  `slim_ref.dcgan`, `slim_ref.cyclegan` and `slim_ref.pix2pix` under
  `reference_root`."""
  sys.path.insert(0, reference_root)
  import importlib  # pylint: disable=import-outside-toplevel
  theirs = {m: importlib.import_module('slim_ref.' + m) for m in OURS}
  for m, module in theirs.items():
    assert module.__file__.startswith(os.path.abspath(reference_root)), (
        m, module.__file__)
  os.makedirs(REFERENCE_DIR, exist_ok=True)
  for module in OURS:
    records, arrays = {}, {}
    for name, case in sorted(REFERENCE_CASES.items()):
      if case.module != module:
        continue
      specs, points, outputs = evaluate_case(name, theirs)
      records[name] = {'input_shape': case.input_shape,
                       'variables': [[n, s] for n, s in specs],
                       'end_points': [[n, s] for n, s in points]}
      if case.run:
        records[name]['values_checksum'] = values_checksum(specs)
        arrays[name + '|input'] = case_input(name, case.input_shape)
        for key, value in outputs.items():
          if not np.all(np.isfinite(value)) or np.std(value) < 1e-3:
            raise SystemExit('%s: weak output %s' % (name, key))
          arrays['%s|output|%s' % (name, key)] = value
      print(name, len(specs), 'variables', len(outputs), 'outputs')
    with open(_reference_file(module, 'json'), 'w') as f:
      f.write(_one_entry_a_line(records))
    np.savez_compressed(_reference_file(module, 'npz'), **arrays)
  print('wrote', REFERENCE_DIR)


# -- docs/gans.md --------------------------------------------------------------
@pytest.mark.slow
def test_the_docs_dcgan_example_trains_as_written():
  with open(os.path.join(ROOT, 'docs', 'gans.md')) as f:
    blocks = re.findall(r'```python\n(.*?)```', f.read(), re.S)
  assert len(blocks) == 1
  result = subprocess.run([sys.executable, '-c', blocks[0]], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
  assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
  losses = re.findall(r'^step (\d+): discriminator loss (\S+), '
                      r'generator loss (\S+)$', result.stdout, re.M)
  assert [int(step) for step, _, _ in losses] == list(range(50, 301, 50))
  assert all(np.isfinite(float(d)) and np.isfinite(float(g))
             for _, d, g in losses)
  assert 'samples (64, 16, 16, 1)' in result.stdout


if __name__ == '__main__':
  if len(sys.argv) != 3 or sys.argv[1] != '--record':
    raise SystemExit('usage: %s --record DIR  (DIR/slim_ref/ holds TF-Slim\'s '
                     'dcgan.py, cyclegan.py, pix2pix.py)' % sys.argv[0])
  record(sys.argv[2])
