"""How the suite is cut into work units for the two workers (conftest.py):
the units reach xdist's scheduler, a module's fixtures are built once, and
the longest units go first."""
import pytest

import conftest


def test_this_tests_group_reaches_the_scheduler(request):
  """Under `-n 2 --dist loadgroup` xdist appends `@<group>` to a grouped
  test's id and schedules by it. pytest 9.2 with pytest-xdist 3.8 drops the
  suffix (requirements.txt): a module's tests then scatter over both
  workers and its fixtures are built twice while every test passes."""
  if not (hasattr(request.config, 'workerinput') and
          getattr(request.config.option, 'loadgroup', False)):
    pytest.skip('not run by an xdist worker with --dist loadgroup')
  assert request.node.get_closest_marker('xdist_group')
  assert request.node.nodeid.endswith('@tests/test_scheduling.py'), (
      'xdist groups do not reach the scheduler (%s): this pytest-xdist does '
      'not work with this pytest; see requirements.txt' % request.node.nodeid)


class _Item(object):

  def __init__(self, nodeid, module_fixture=False):
    self.nodeid = nodeid
    self.module_fixture = module_fixture


@pytest.fixture
def items(monkeypatch):
  monkeypatch.setattr(conftest, '_uses_module_fixtures',
                      lambda item: item.module_fixture)
  return [_Item('tests/a.py::short'), _Item('tests/a.py::long'),
          _Item('tests/a.py::long_with_fixture', module_fixture=True),
          _Item('tests/b.py::one'), _Item('tests/c.py::one')]


def test_long_tests_are_units_of_their_own_unless_they_share_a_fixture(
    items):
  seconds = {'tests/a.py::short': 1.0, 'tests/a.py::long': 50.0,
             'tests/a.py::long_with_fixture': 30.0, 'tests/b.py::one': 40.0,
             'tests/c.py::one': 3.0}
  units = conftest.work_units(items, lambda item: seconds[item.nodeid])
  assert [(name, [i.nodeid for i in unit], total)
          for name, unit, total in units] == [
              (None, ['tests/a.py::long'], 50.0),
              (None, ['tests/b.py::one'], 40.0),
              ('tests/a.py', ['tests/a.py::short', 'tests/a.py::long_with_fixture'],
               31.0),
              ('tests/c.py', ['tests/c.py::one'], 3.0)]


def test_recorded_durations_are_keyed_by_plain_node_ids():
  """conftest looks tests up by the id they have before xdist's suffix."""
  recorded = conftest._recorded_seconds()
  assert len(recorded) > 1000
  assert not [k for k in recorded if '@' in k or '::' not in k]
