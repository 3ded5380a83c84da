"""--tflite_kernels: what runs a TFLite model in eval_image_classifier.py and
classify_image.py (serving/inference.py). A small int8 LeNet (random weights,
written by the exporter export_model.py uses) through TFLite's built-in
kernels (the default), the XNNPACK delegate and TensorFlow Lite Micro's
interpreter."""
import os
import re
import sys
import warnings

import numpy as np
import pytest

from serving import exporter, inference, micro
import scripts

# Images run through each kernel set: enough to meet XNNPACK's rounding, few
# enough for TFLM (about 30 ms an image on LeNet, and a child process).
IMAGES = 20


def run(script, *args):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  return scripts.run(script, *args, env=env, timeout=300)


def error_line(result):
  lines = [l for l in result.stderr.splitlines() if l.strip()]
  assert result.returncode == 1 and len(lines) == 1, result.stderr[-3000:]
  return lines[0]


@pytest.fixture(scope='module')
def int8_export(digits_dir, tmp_path_factory):
  """An int8 TFLite export of LeNet for digits (its weights freshly
  initialised: what runs it is under test, not what it learned), calibrated
  on random images; the arena is not measured (export_model.py's business,
  tests/test_micro.py)."""
  export_dir = str(tmp_path_factory.mktemp('tflite_kernels') / 'int8')
  spec = exporter.make_spec('lenet', 'digits', digits_dir)
  graph = exporter.RestoredGraph(spec, checkpoint=None)
  calibration = np.random.RandomState(0).uniform(-1, 1,
                                                 (20,) + spec.image_shape)
  try:
    with pytest.MonkeyPatch.context() as patch:
      patch.setattr(micro, 'available', lambda: False)
      exporter.write_tflite(graph, export_dir, 'int8', calibration)
  finally:
    graph.close()
  return export_dir


@pytest.fixture(scope='module')
def images():
  """Float images as LeNet's preprocessing gives them ([-1, 1])."""
  return np.random.RandomState(1).uniform(
      -1, 1, (IMAGES, 28, 28, 1)).astype(np.float32)


def open_tflite(export_dir, kernels=None):
  kwargs = {} if kernels is None else {'tflite_kernels': kernels}
  return inference.open_model(tflite_model=export_dir, **kwargs)


@pytest.fixture(scope='module')
def logits(int8_export, images):
  """{kernels: (dequantized logits of `images`, int8 unit, kernels_line)},
  the default's under None."""
  found = {}
  for kernels in (None,) + inference.TFLITE_KERNELS:
    model = open_tflite(int8_export, kernels)
    try:
      found[kernels] = (model.logits(images),
                        model.logits_scale,
                        model.kernels_line())
    finally:
      model.close()
  return found


def units(a, b, scale):
  """|a - b| in int8 units of the output's scale."""
  return np.round(np.abs(a - b) / scale).astype(int)


def test_default_is_the_builtin_kernels_without_a_delegate(logits):
  default, _, line = logits[None]
  assert inference.DEFAULT_TFLITE_KERNELS == 'builtin'
  np.testing.assert_array_equal(default, logits['builtin'][0])
  assert re.fullmatch(r"TFLite kernels: builtin \(LiteRT [\d.]+'s built-in "
                      r'kernels, no delegate\)', line), line


def test_default_kernels_give_tflms_int8_outputs_within_one_unit(logits):
  """Not always to the last bit: the built-in kernels' matrix products
  requantize a rare tie otherwise than TFLM's (4 of 3,600 logits of the
  person detector, 1 of LeNet's, by one unit: docs/deploying.md); XNNPACK
  more often and further. `micro` is TFLM itself."""
  tflm, scale, line = logits['micro']
  assert line.startswith("TFLite kernels: micro (TensorFlow Lite Micro's "
                         'interpreter, tflite-micro ')
  assert tflm.shape == (IMAGES, 10) and scale > 0
  builtin = logits['builtin'][0]
  assert units(builtin, tflm, scale).max() <= 1
  np.testing.assert_array_equal(np.argmax(builtin, 1), np.argmax(tflm, 1))


def test_xnnpack_is_selectable_and_runs_the_delegate(logits, int8_export):
  xnnpack, scale, line = logits['xnnpack']
  assert re.fullmatch(r'TFLite kernels: xnnpack \(LiteRT [\d.]+ with the '
                      r'XNNPACK delegate\)', line), line
  # Its int8 arithmetic is not the built-in kernels' (a unit or a few).
  assert 0 < units(xnnpack, logits['builtin'][0], scale).max() <= 3
  for kernels, delegated in (('xnnpack', True), ('builtin', False)):
    model = open_tflite(int8_export, kernels)
    assert inference._delegated(model._interpreter) is delegated, kernels  # pylint: disable=protected-access
    model.close()


def test_bad_kernels_are_one_line_naming_the_flag(int8_export):
  message = "--tflite_kernels must be one of builtin, xnnpack, micro, got 'fast'"
  with pytest.raises(ValueError, match='^%s$' % re.escape(message)):
    open_tflite(int8_export, 'fast')
  for script, rest in (('eval_image_classifier.py', '--dataset_dir=unused'),
                       ('classify_image.py', 'unused.png')):
    result = run(script, '--tflite_model=' + int8_export,
                 '--tflite_kernels=fast', rest)
    assert error_line(result) == '%s: error: %s' % (script[:-3], message)


@pytest.mark.parametrize('flags, first_line', [
    ((), r"TFLite kernels: builtin \(LiteRT [\d.]+'s built-in kernels, no "
         r'delegate\)'),
    (('--tflite_kernels=micro',), r"TFLite kernels: micro \(TensorFlow Lite "
     r"Micro's interpreter, tflite-micro \S+\)")], ids=['default', 'micro'])
def test_eval_says_which_kernels_ran_and_nothing_on_stderr(
    flags, first_line, int8_export, digits_dir):
  result = run('eval_image_classifier.py', '--dataset_name=digits',
               '--dataset_dir=' + digits_dir, '--dataset_split_name=validation',
               '--tflite_model=' + int8_export, '--batch_size=10',
               '--max_num_batches=1', *flags)
  assert result.returncode == 0, result.stderr[-3000:]
  assert re.fullmatch(first_line, result.stdout.splitlines()[0]), result.stdout
  assert re.search(r'^Accuracy = [\d.]+$', result.stdout, re.M)
  # No tf.lite.Interpreter deprecation, no XNNPACK start-up line.
  assert not result.stderr.strip(), result.stderr[-3000:]


def test_without_litert_tf_lite_runs_the_model_and_says_so_once(
    int8_export, images, logits, monkeypatch, capsys):
  monkeypatch.setitem(sys.modules, 'ai_edge_litert', None)  # not installed
  monkeypatch.setattr(inference, '_RUNTIME', None)
  with warnings.catch_warnings(record=True) as warned:
    warnings.simplefilter('always')
    model = open_tflite(int8_export)
    first, second = model.logits(images[:2]), model.logits(images[2:4])
    model.close()
  assert not [w for w in warned if 'deprecated' in str(w.message)]
  assert model.kernels_line() == (
      "TFLite kernels: builtin (tf.lite.Interpreter of TensorFlow %s's "
      'built-in kernels, no delegate)' % inference.tf.__version__)
  np.testing.assert_array_equal(np.concatenate([first, second]),
                                logits['builtin'][0][:4])
  err = capsys.readouterr().err
  assert err == ("note: ai-edge-litert is not installed: TFLite models run "
                 "with TensorFlow %s's tf.lite.Interpreter, which TensorFlow "
                 'deprecates for it (pip install -r requirements.txt)\n'
                 % inference.tf.__version__)
