"""The test process is a TF 1 program, as the scripts are and as the users'
1.x code the runner serves: graph mode, and `tf.compat.v1.layers` (which the
tests' model_fns use, as such code does) routed to tf-keras. Importing the
project sets neither (tests/test_compat.py checks that in a fresh process).

Also here, how the suite is run (README "The two commands"):
- tiers: a test is `slow` when marked so, or when tests/durations.json
  recorded it at QUICK_LIMIT_SECONDS or more; every other test is `quick`
  (`./test.sh -m quick`, the check before a commit: every package, a few
  minutes); the full suite runs both.
- order: the two xdist workers (pytest.ini: `-n 2 --dist loadgroup
  --no-loadscope-reorder`) take work units from the front of one queue, in
  the collection's order, as they become free. A unit is a test module (its
  module fixtures built once), or a single long test (`work_units`). Units are ordered longest first by the
  seconds recorded in tests/durations.json (`python tests/durations.py
  <junit xml>` rewrites it): the longest-processing-time-first rule, so the
  short units fill in at the end and neither worker idles while the other
  runs a long test. Expensive things many modules build are built once per
  run and shared by both workers (tests/shared.py). A test that uses a
  module-scoped fixture stays in its module's unit however long it is: on
  its own it could run on the other worker, which would build the fixture
  (a trained model, an export) a second time.
"""
import gc
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_compat  # noqa: E402,F401

sys.path.insert(0, os.path.join(ROOT, 'tests'))
import scripts  # noqa: E402
import shared  # noqa: E402
from deployment import warm_start  # noqa: E402

# pytest's name of the running test, in every process it starts, changes with
# each test and is read by no script: the launcher's warm interpreter
# (deployment/warm_start.py) serves tasks whatever its value.
warm_start.RUNTIME_VARIABLES.append('PYTEST_CURRENT_TEST')

tf.compat.v1.disable_eager_execution()

# The test processes build hundreds of large graphs: millions of Python
# objects, most of them in reference cycles (an op and its graph). CPython's
# default thresholds (700, 10, 10) run a collection every 700 allocations and
# a full one every 70,000, each walking TensorFlow's own ~400,000 objects as
# well; here a full one comes every 20 million allocations (a few per large
# network, so the graphs of finished tests are still freed as the suite
# goes), and what collection imported is frozen out of its reach
# (pytest_collection_finish). test_nets.py's 40 published-graph checks:
# 84 -> 73 s.
gc.set_threshold(100000, 20, 10)
# TensorFlow reads TF_USE_LEGACY_KERAS at the first use of tf.compat.v1.layers;
# it is unset again so that the scripts the tests run start as users' do.
outer = os.environ.pop('TF_USE_LEGACY_KERAS', None)
os.environ['TF_USE_LEGACY_KERAS'] = '1'
assert tf.compat.v1.layers.Dense.__module__.startswith('tf_keras')
del os.environ['TF_USE_LEGACY_KERAS']
if outer is not None:
  os.environ['TF_USE_LEGACY_KERAS'] = outer


DURATIONS = os.path.join(ROOT, 'tests', 'durations.json')
# Seconds assumed for a test with no recorded duration (a new one).
UNKNOWN_SECONDS = 2.0
# A test recorded at this many seconds or more is slow, marked or not.
QUICK_LIMIT_SECONDS = 4.0
# A test of this many seconds is a work unit of its own (see the module doc);
# a module's shorter tests stay together, in their order.
SOLO_SECONDS = 20.0


def _recorded_seconds():
  try:
    with open(DURATIONS) as f:
      return json.load(f)
  except (OSError, ValueError):
    return {}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
  del config
  seconds = _recorded_seconds()
  for item in items:
    if item.get_closest_marker('slow') is None:
      if seconds.get(item.nodeid, 0.0) >= QUICK_LIMIT_SECONDS:
        item.add_marker(pytest.mark.slow)
      else:
        item.add_marker(pytest.mark.quick)
  units = work_units(items, lambda item: seconds.get(item.nodeid,
                                                     UNKNOWN_SECONDS))
  items[:] = []
  for name, unit, _ in units:
    for item in unit:
      if name is not None:
        item.add_marker(pytest.mark.xdist_group(name))
      items.append(item)


def pytest_collection_finish(session):
  del session
  gc.freeze()  # the modules and the collected tests live as long as the run


def work_units(items, seconds_of):
  """[(xdist group name or None for a test of its own, [items], seconds)],
  longest first; a module's units keep its order."""
  modules = {}
  for item in items:
    modules.setdefault(item.nodeid.split('::')[0], []).append(item)
  units = []
  for module, tests in modules.items():
    solo = [t for t in tests if seconds_of(t) >= SOLO_SECONDS and
            not _uses_module_fixtures(t)]
    rest = [t for t in tests if t not in solo]
    units += [(None, [t], seconds_of(t)) for t in solo]
    if rest:
      units.append((module, rest, sum(seconds_of(t) for t in rest)))
  order = {id(item): i for i, item in enumerate(items)}
  return sorted(units, key=lambda u: (-u[2], order[id(u[1][0])]))


def _uses_module_fixtures(item):
  fixtures = getattr(item, '_fixtureinfo', None)
  return fixtures is not None and any(
      definition.scope in ('module', 'class', 'package')
      for definitions in fixtures.name2fixturedefs.values()
      for definition in definitions)


def _convert_digits(directory):
  converted = scripts.run('download_and_convert_data.py',
                          '--dataset_name=digits', '--dataset_dir=%s' % directory,
                          timeout=300)
  assert converted.returncode == 0, converted.stderr[-3000:]


@pytest.fixture(scope='session')
def digits(tmp_path_factory):
  """The bundled digits converted by the script, as a user does: the records
  directory the cluster tests train on, converted once per run and shared by
  the workers (tests/shared.py): read it, never change it."""
  return shared.artifact(tmp_path_factory, 'digits', _convert_digits)


@pytest.fixture(scope='session')
def digits_dir(digits):
  """`digits` as a path string (shared: read it, never change it)."""
  return str(digits)
