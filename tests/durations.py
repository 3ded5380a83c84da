"""Records the seconds each test took, for tests/conftest.py's ordering.

    ./test.sh --junitxml=/tmp/suite.xml
    python tests/durations.py /tmp/suite.xml     # rewrites tests/durations.json

Setup and teardown time (a module fixture's build) counts with the test that
paid it, as junit's `time` does. Run it after a full run on a quiet machine
when tests are added or get faster or slower; a test missing from the file is
taken as short (conftest.UNKNOWN_SECONDS).
"""
import json
import os
import sys
import xml.etree.ElementTree as ElementTree

HERE = os.path.dirname(os.path.abspath(__file__))


def nodeid(case):
  """junit's classname 'tests.test_x.TestY' and name -> pytest's node id."""
  parts = case.get('classname', '').split('.')
  module = parts[:2] if parts[:1] == ['tests'] else parts[:1]
  # Under --dist loadgroup xdist appends '@<group>' to a grouped test's id.
  name = case.get('name').split('@')[0]
  return '::'.join(['/'.join(module) + '.py'] + parts[len(module):] + [name])


def main(argv):
  if len(argv) != 2:
    sys.exit('usage: python tests/durations.py <junit xml of a full run>')
  seconds = {}
  for case in ElementTree.parse(argv[1]).iter('testcase'):
    seconds[nodeid(case)] = round(float(case.get('time', 0)), 2)
  path = os.path.join(HERE, 'durations.json')
  with open(path + '.tmp', 'w') as f:
    json.dump(seconds, f, indent=0, sort_keys=True)
    f.write('\n')
  os.replace(path + '.tmp', path)
  print('%d tests, %.0f s in all, written to %s' % (
      len(seconds), sum(seconds.values()), path))


if __name__ == '__main__':
  main(sys.argv)
