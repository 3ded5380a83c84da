"""The test process is a TF 1 program, as the scripts are and as the users'
1.x code the runner serves: graph mode, and `tf.compat.v1.layers` (which the
tests' model_fns use, as such code does) routed to tf-keras. Importing the
project sets neither (tests/test_compat.py checks that in a fresh process)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_compat  # noqa: E402,F401

tf.compat.v1.disable_eager_execution()
# TensorFlow reads TF_USE_LEGACY_KERAS at the first use of tf.compat.v1.layers;
# it is unset again so that the scripts the tests run start as users' do.
outer = os.environ.pop('TF_USE_LEGACY_KERAS', None)
os.environ['TF_USE_LEGACY_KERAS'] = '1'
assert tf.compat.v1.layers.Dense.__module__.startswith('tf_keras')
del os.environ['TF_USE_LEGACY_KERAS']
if outer is not None:
  os.environ['TF_USE_LEGACY_KERAS'] = outer


@pytest.fixture(scope='module')
def digits(tmp_path_factory):
  """The bundled digits converted by the script, as a user does: the records
  directory the cluster tests train on (one conversion per test module)."""
  directory = tmp_path_factory.mktemp('digits')
  subprocess.run([sys.executable, os.path.join(ROOT, 'download_and_convert_data.py'),
                  '--dataset_name=digits', '--dataset_dir=%s' % directory],
                 check=True, capture_output=True, timeout=300, cwd=ROOT)
  return directory
