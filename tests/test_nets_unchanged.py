"""Every network computes what it computed when the goldens were written.

Refactoring a family (shared skeletons, shared heads) must not change a single
number: each case builds a network in a fresh graph, gives every variable
values drawn from its own name (so the creation order does not matter),
runs one fixed input and compares the output and two end points with
tests/data/nets_unchanged.npz.

Tolerance: 1e-5 of the array's largest magnitude. The same graph on the same
machine gives the same bits; the margin covers oneDNN choosing another
reduction order (another thread count, a fused op where two were), which
moves float32 results by a few ulps, never by 1e-5.

Regenerate (only when a network is meant to change, saying so in the commit):
  ./.venv/bin/python tests/test_nets_unchanged.py --write
"""
import fnmatch
import glob
import os
import sys
import zlib

import numpy as np
import pytest
import tensorflow as tf

if __name__ == '__main__':  # run as a script: the project root on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))
import nets  # noqa: E402
from nets import nets_factory  # noqa: E402

tf1 = tf.compat.v1
GOLDEN = os.path.join(os.path.dirname(__file__), 'data', 'nets_unchanged.npz')
NUM_CLASSES = 7
# Samples kept of an array larger than this (evenly spaced, flattened).
SAMPLES = 64
# The smallest input each network accepts with its defaults (a 1x1 logits map
# needs 224 for vgg/alexnet and inception_v1, 231 for overfeat); at least 64
# elsewhere so the deep stages see more than one pixel. Video: 8 frames.
IMAGE_SIZE = {'lenet': 28, 'cifarnet': 32, 'nasnet_cifar': 32,
              'alexnet_v2': 224, 'inception_v1': 224, 'overfeat': 231,
              'vgg_*': 224, 'inception_v3': 128, 'inception_v4': 128,
              'inception_resnet_v2': 128}
NUM_FRAMES = 8
# Large graphs (their cost is building them, not running them): still run
# in CI, deselected by the quick subset (-m "not slow").
HEAVY = ('vgg_*', 'overfeat', 'inception_v4', 'inception_v3',
         'inception_resnet_v2', 'resnet_*_101', 'resnet_*_152', 'resnet_*_200',
         'nasnet_*', 'pnasnet_*', 'i3d', 's3dg')

# Beyond each registered network with its defaults: the options of the
# families whose code is shared (features, global pool, dense prediction,
# a prediction map).
OPTIONS = [
    ('alexnet_v2', 0, dict(global_pool=True)),
    ('vgg_a', NUM_CLASSES, dict(fc_conv_padding='SAME', spatial_squeeze=False)),
    ('resnet_v1_50', 0, {}),
    ('resnet_v1_50', NUM_CLASSES, dict(store_non_strided_activations=True)),
    ('resnet_v2_50', NUM_CLASSES, dict(global_pool=False, output_stride=16,
                                       spatial_squeeze=False)),
    ('mobilenet_v2', 0, {}),
    ('mobilenet_v3_small', 0, {}),
]
# Some of the options need another input size than the defaults.
OPTION_IMAGE_SIZE = {'vgg_a': 64}


def _matches(name, patterns):
  return any(fnmatch.fnmatch(name, p) for p in patterns)


def _image_size(name, kwargs):
  if kwargs and name in OPTION_IMAGE_SIZE:
    return OPTION_IMAGE_SIZE[name]
  for pattern, size in IMAGE_SIZE.items():
    if fnmatch.fnmatch(name, pattern):
      return size
  return 64


def _case_id(name, num_classes, kwargs):
  parts = [name] + (['features'] if not num_classes else []) + [
      '%s=%s' % item for item in sorted(kwargs.items())]
  return ','.join(parts)


def cases():
  """(case id, name, num_classes, kwargs) of every case."""
  every = [(n, NUM_CLASSES, {}) for n in nets_factory.list_models()] + OPTIONS
  return [(_case_id(*c),) + c for c in every]


def _param(case):
  marks = [pytest.mark.slow] if _matches(case[1], HEAVY) else []
  return pytest.param(*case, id=case[0], marks=marks)


def _variable_value(name, shape):
  """Variance-preserving values seeded by the variable's name: O(1) logits
  that differ between classes (fresh initialisers give some networks zero
  logits and others 1e12)."""
  rng = np.random.default_rng(zlib.crc32(name.encode()))
  last = name.split('/')[-1]
  if last in ('moving_variance', 'gamma'):
    return rng.uniform(0.5, 1.5, shape).astype(np.float32)
  if len(shape) >= 2:  # weights: fan-in of one output
    fan_in = np.prod(shape[:-2] if 'depthwise' in last else shape[:-1])
    value = rng.standard_normal(shape, dtype=np.float32)
    return value / np.float32(np.sqrt(fan_in))
  return (0.1 * rng.standard_normal(shape, dtype=np.float32))


def _sample(array):
  flat = np.asarray(array, np.float32).ravel()
  if flat.size <= SAMPLES:
    return flat
  return flat[np.linspace(0, flat.size - 1, SAMPLES).astype(int)]


def _pick_end_points(end_points, output):
  """Two end points: the middle one and the last one before the output."""
  keys = [k for k, v in end_points.items() if v is not output]
  return sorted({keys[len(keys) // 2], keys[-1]})


def run_case(name, num_classes, kwargs, end_point_names=None):
  """{'output': samples, <end point>: samples} of one case."""
  info = nets_factory.get_info(name)
  shape = info.input_shape(2, _image_size(name, kwargs),
                           NUM_FRAMES if info.num_frames else None)
  images = np.random.default_rng(1234).uniform(-1, 1, shape).astype(np.float32)
  with tf.Graph().as_default():
    fn = nets_factory.get_network_fn(name, num_classes)
    output, end_points = fn(tf.constant(images), **kwargs)
    if end_point_names is None:
      end_point_names = _pick_end_points(end_points, output)
    # The values are fed in place of the initializers' outputs: one run, and
    # no op added per variable (an assign per variable costs 20% more).
    variables = tf1.global_variables()
    feeds = {v.initial_value: _variable_value(v.op.name, v.shape.as_list())
             for v in variables}
    # Grappler's rewrites cost seconds per large graph and move no value by
    # more than the tolerance.
    config = tf1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    with tf1.Session(config=config) as sess:
      sess.run(tf1.variables_initializer(variables), feed_dict=feeds)
      values = sess.run([output] + [end_points[k] for k in end_point_names])
  result = {'output': _sample(values[0])}
  result.update(zip(end_point_names, map(_sample, values[1:])))
  return result


def _golden():
  with np.load(GOLDEN) as data:
    golden = {}
    for key in data.files:
      case, what = key.split('|', 1)
      golden.setdefault(case, {})[what] = data[key]
  return golden


GOLDENS = _golden() if os.path.exists(GOLDEN) else {}


def test_every_registered_network_has_a_golden():
  missing = [c[0] for c in cases() if c[0] not in GOLDENS]
  assert not missing, ('no golden for %s: run python '
                       'tests/test_nets_unchanged.py --write' % missing)


@pytest.mark.parametrize('case,name,num_classes,kwargs',
                         [_param(c) for c in cases()])
def test_network_computes_what_it_computed(case, name, num_classes, kwargs):
  want = GOLDENS.get(case)
  if want is None:
    pytest.skip('no golden for %s' % case)
  got = run_case(name, num_classes, kwargs,
                 sorted(k for k in want if k != 'output'))
  assert sorted(got) == sorted(want)
  for key, value in want.items():
    scale = float(np.max(np.abs(value)))
    assert got[key].shape == value.shape, key
    error = float(np.max(np.abs(got[key] - value)))
    assert error <= 1e-5 * scale, (key, error, scale)


def test_families_register_networks_and_helpers_do_not():
  """The layout rule of nets/__init__.py, checked on the sources."""
  root = os.path.dirname(os.path.dirname(nets.__file__))
  checked = []
  for path in sorted(glob.glob(os.path.join(root, 'nets', '**', '*.py'),
                               recursive=True)):
    module = os.path.relpath(path, root)[:-3].replace(os.sep, '.')
    if module.endswith('__init__') or module in ('nets.registry',
                                                 'nets.nets_factory'):
      continue
    with open(path) as f:
      registers = 'register_network(' in f.read()
    checked.append((module, registers, nets.is_family(module)))
  assert [c for c in checked if c[1] != c[2]] == []
  assert sum(c[2] for c in checked) >= 17


def write_goldens():
  """Writes GOLDEN from the current code; refuses outputs that would make a
  weak golden (not finite, or the same for every class)."""
  arrays = {}
  for case, name, num_classes, kwargs in cases():
    result = run_case(name, num_classes, kwargs)
    output = result['output']
    if not np.all(np.isfinite(output)) or np.std(output) < 1e-3:
      raise SystemExit('%s: weak golden output %s' % (case, output))
    for key, value in result.items():
      arrays['%s|%s' % (case, key)] = value
    print(case, 'output scale %.3g' % np.max(np.abs(output)), flush=True)
  np.savez_compressed(GOLDEN, **arrays)
  print('wrote', GOLDEN)


if __name__ == '__main__':
  if sys.argv[1:] != ['--write']:
    raise SystemExit('usage: %s --write' % sys.argv[0])
  write_goldens()
