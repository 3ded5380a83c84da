"""Keeps TensorFlow's own noise off the terminal, and its start-up short; the
scripts import it first.

What a script prints is its own: progress, checkpoints, results, one line per
error. TensorFlow adds lines no user acts on, each quieted once, where it
comes from:

1. Start-up lines of its C++ libraries ("All log messages before
   absl::InitializeLog() ...", the oneDNN notice, "Could not find cuda
   drivers"), written to file descriptor 2 while `import tensorflow` loads the
   libraries, before TF_CPP_MIN_LOG_LEVEL is consulted. The import runs with
   descriptor 2 captured; those lines are dropped and anything else (a real
   error) is written out after it, or as it was if the import fails.
2. Later C++ log lines (on a machine without a GPU, the ERROR "failed call to
   cuInit"): TF_CPP_MIN_LOG_LEVEL, 3 unless set.
3. The `tensorflow` logger's INFO lines ("Graph was finalized", "Saving
   checkpoints ..."): its level is WARNING. absl's INFO lines (the TFLite
   converter's): absl's verbosity is WARNING.
4. Deprecation notices about calls TensorFlow, tf-keras and tf-slim make
   themselves (the Saver's `get_checkpoint_mtimes`, the optimizers' slot
   initializers, ...): the notice names its call site, and those inside
   these packages are dropped (a notice about a call in the project is a bug
   to fix, so it shows). And the two warnings tf-slim 1.1.0 causes by
   building its layers through TensorFlow's legacy layers (`layer.apply`,
   `tf.layers.flatten`): ignored by their exact text, nothing else.
5. Around a call wrapped in `quiet_native`, what native code prints unless the
   call fails.

Start-up: `import tensorflow` imports Keras 3 whole (TensorFlow's
__init__ loads keras.src.optimizers to register them), and Keras 3 loads
its optional integrations with what is installed: scikit-learn with SciPy's
statistics for its scikit-learn wrappers, matplotlib.pyplot for its image
gallery; tf-slim loads scikit-learn for its metric-learning cluster loss.
The scripts use none of them, and they cost about 1.3 of the 6 CPU-seconds
a script takes to import TensorFlow and tf-slim (every task of a cluster
pays that at each start). So both are imported here with `sklearn` and
`matplotlib` unavailable, which each handles as "not installed"; those two
import as usual afterwards (the digits converter's scikit-learn, the
confusion matrix's matplotlib). A library user's process is left alone:
only the scripts import this module.

absl's `--verbosity=N` (`-v N`, in every script) turns all of this off and
TensorFlow prints what it always did, at that level: N is absl's (-1 WARNING,
0 INFO, 1 and more also TensorFlow's VLOG(N)), for the Python loggers (absl
applies it) and for the C++ logs (set here, before TensorFlow is imported:
it reads them once). TF_CPP_MIN_LOG_LEVEL=0 (or 1) in the environment turns
the quieting off as well.
"""
import contextlib
import importlib.util
import logging
import os
import re
import sys
import tempfile
import warnings


def verbosity_in(argv):
  """absl's --verbosity (-v) as given in argv, or None: read before absl
  parses the flags, since TensorFlow's C++ log level must be set before it is
  imported."""
  value = None
  for i, arg in enumerate(argv[1:], 1):
    if arg == '--':
      break
    match = re.fullmatch(r'--?(?:v|verbosity)(?:=(.*))?', arg)
    if match:
      value = match.group(1)
      if value is None and i + 1 < len(argv):
        value = argv[i + 1]
  try:
    return int(value)
  except (TypeError, ValueError):
    return None  # absl reports a bad value when it parses the flags


def _use_verbosity(level):
  """TensorFlow's C++ logs at absl's level: -1 WARNING, 0 INFO, N > 0 VLOG(N)."""
  os.environ['TF_CPP_MIN_LOG_LEVEL'] = str(min(max(-level, 0), 3))
  if level > 0:
    os.environ['TF_CPP_MAX_VLOG_LEVEL'] = str(level)


VERBOSITY = verbosity_in(sys.argv)
if VERBOSITY is not None:
  _use_verbosity(VERBOSITY)
VERBOSE = (VERBOSITY is not None or
           os.environ.get('TF_CPP_MIN_LOG_LEVEL', '').strip() in ('0', '1'))
# What tf-slim 1.1.0's layers make TensorFlow's legacy layers say (see 4.).
TF_SLIM_DEPRECATIONS = (r'`layer\.apply` is deprecated',
                        r'`tf\.layers\.flatten` is deprecated')

_LIBRARIES = ('tensorflow', 'tf_keras', 'tf_slim')


def _library_dirs():
  """Where the packages whose own deprecated calls are not ours to fix live."""
  dirs = []
  for name in _LIBRARIES:
    spec = importlib.util.find_spec(name)
    if spec is not None:
      dirs.extend(os.path.join(d, '') for d in spec.submodule_search_locations)
  return tuple(dirs)


def not_a_library_deprecation_notice(record, library_dirs=None):
  """False for a notice of tensorflow/python/util/deprecation.py whose call
  site (its first argument, 'file:line') is inside one of _LIBRARIES."""
  if record.module != 'deprecation' or not record.args:
    return True
  call_site = str(record.args[0])
  return not call_site.startswith(library_dirs or _library_dirs())


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
  ..." report) or --verbosity or TF_CPP_MIN_LOG_LEVEL asks for them."""
  if VERBOSE:
    return function(*args, **kwargs)
  with native_stderr_filtered(keep=lambda line: False):
    return function(*args, **kwargs)


# What TensorFlow (through Keras 3) and tf-slim load at their import only
# for integrations the scripts never use (module docstring, "Start-up").
OPTIONAL_INTEGRATIONS = ('sklearn', 'matplotlib')


class _Unavailable(object):
  """A meta path finder for which `names` (top-level packages) are not
  installed."""

  def __init__(self, names):
    self.names = names

  def find_spec(self, fullname, path=None, target=None):
    if fullname.split('.')[0] in self.names:
      raise ModuleNotFoundError('%s: not while TensorFlow is imported'
                                % fullname, name=fullname)
    return None


@contextlib.contextmanager
def without_modules(names):
  """Meanwhile `names` (not yet imported) cannot be imported."""
  finder = _Unavailable([n for n in names if n not in sys.modules])
  sys.meta_path.insert(0, finder)
  try:
    yield
  finally:
    sys.meta_path.remove(finder)


def import_tensorflow():
  """Imports TensorFlow and tf-slim without their optional integrations
  (module docstring, "Start-up")."""
  with without_modules(OPTIONAL_INTEGRATIONS):
    import tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    import tf_slim  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import


def quiet():
  """Quiets TensorFlow as the module docstring says (once; idempotent)."""
  if VERBOSE:
    if 'tensorflow' not in sys.modules:
      import_tensorflow()
    return
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
  if 'tensorflow' not in sys.modules:
    with native_stderr_filtered():
      import_tensorflow()
  logger = logging.getLogger('tensorflow')
  logger.setLevel(logging.WARNING)
  # Some of TensorFlow (the TFLite converter) logs INFO through absl, whose
  # verbosity is INFO by default.
  from absl import logging as absl_logging  # pylint: disable=import-outside-toplevel
  absl_logging.set_verbosity(absl_logging.WARNING)
  library_dirs = _library_dirs()
  logger.addFilter(
      lambda record: not_a_library_deprecation_notice(record, library_dirs))
  for message in TF_SLIM_DEPRECATIONS:
    warnings.filterwarnings('ignore', message=message, category=UserWarning)


quiet()
