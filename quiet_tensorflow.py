"""Keeps TensorFlow's own noise off the terminal; the scripts import it first.

What a script prints is its own: progress, results, one line per error.
TensorFlow adds three kinds of lines no user acts on, each quieted here once:

1. Start-up lines of its C++ libraries ("All log messages before
   absl::InitializeLog() ...", the oneDNN notice, "Could not find cuda
   drivers"), written to file descriptor 2 while `import tensorflow` loads the
   libraries, before TF_CPP_MIN_LOG_LEVEL is consulted. The import runs with
   descriptor 2 captured; those lines are dropped and anything else (a real
   error) is written out after it, or as it was if the import fails.
2. Later C++ log lines (on a machine without a GPU: "failed call to
   cuInit"): TF_CPP_MIN_LOG_LEVEL, 3 unless set.
3. Python: the `tensorflow` logger's INFO lines ("Graph was finalized",
   "Saving checkpoints ...") and its deprecation notices about the graph-mode
   APIs this project uses on purpose, and the deprecation warnings that
   TensorFlow, tf-keras and tf-slim raise about their own legacy layers;
   absl's INFO lines (the TFLite converter's); and, around a call wrapped in
   `quiet_native`, what native code prints unless the call fails.

TF_CPP_MIN_LOG_LEVEL=0 (or 1) in the environment turns all of this off:
TensorFlow then prints what it always did.
"""
import contextlib
import logging
import os
import re
import sys
import tempfile
import warnings

VERBOSE = os.environ.get('TF_CPP_MIN_LOG_LEVEL', '').strip() in ('0', '1')

_STARTUP_NOISE = re.compile(
    r'WARNING: All log messages before absl::InitializeLog\(\) is called'
    r'|[IW]\d{4} [\d:.]+ +\d+ [\w.]+\.cc:\d+\]')  # INFO/WARNING from C++


def is_startup_noise(line):
  """True for a C++ start-up line of TensorFlow (an INFO or WARNING line, or
  absl's note that logging is not initialized yet); errors are kept."""
  return bool(_STARTUP_NOISE.match(line))


@contextlib.contextmanager
def native_stderr_filtered(keep=lambda line: not is_startup_noise(line)):
  """Captures what native code writes to file descriptor 2 meanwhile and
  writes out only the lines `keep` accepts (every line if the block
  raises)."""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    failed = True
    try:
      yield
      failed = False
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      captured.seek(0)
      text = captured.read().decode('utf-8', 'replace')
      kept = [line for line in text.splitlines(True)
              if failed or keep(line)]
      sys.stderr.write(''.join(kept))
      sys.stderr.flush()


def quiet_native(function, *args, **kwargs):
  """function(*args, **kwargs) with native code's lines on descriptor 2
  dropped unless it fails (e.g. the TFLite converter's "fully_quantize: 0,
  ..." report) or TF_CPP_MIN_LOG_LEVEL asks for them."""
  if VERBOSE:
    return function(*args, **kwargs)
  with native_stderr_filtered(keep=lambda line: False):
    return function(*args, **kwargs)


def _not_a_deprecation_notice(record):
  """False for the notices of tensorflow/python/util/deprecation.py."""
  return record.module != 'deprecation'


def quiet():
  """Quiets TensorFlow as the module docstring says (once; idempotent)."""
  if VERBOSE:
    return
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
  if 'tensorflow' not in sys.modules:
    with native_stderr_filtered():
      import tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  logger = logging.getLogger('tensorflow')
  logger.setLevel(logging.WARNING)
  # Some of TensorFlow (the TFLite converter) logs INFO through absl, whose
  # verbosity is INFO by default; --verbosity=0 on the command line still
  # asks for those lines.
  from absl import logging as absl_logging  # pylint: disable=import-outside-toplevel
  absl_logging.set_verbosity(absl_logging.WARNING)
  logger.addFilter(_not_a_deprecation_notice)
  warnings.filterwarnings(
      'ignore', module=r'(tensorflow|tf_keras|tf_slim|keras)(\.|$)')


quiet()
