"""Prints, as one JSON line, what tests/test_warm_start.py compares between a
task started as a new Python and one forked from a warm interpreter; then
runs until SIGTERM (then exits 42) if asked to (`wait`), else exits with
the status it is given.

    python tests/warm_program.py STATUS [wait]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import quiet_tensorflow  # noqa: E402,F401  pylint: disable=unused-import
import gc  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

print(json.dumps({
    'argv': sys.argv,
    'path0': sys.path[1],  # [0] is the project root this file inserted
    'cwd': os.getcwd(),
    'main': __name__,
    'file': __file__,
    'environ': {k: v for k, v in os.environ.items() if k != 'WARM_PROBE'},
    'tf_logger': logging.getLogger('tensorflow').level,
    'sigint': repr(signal.getsignal(signal.SIGINT)),
    'sigterm': repr(signal.getsignal(signal.SIGTERM)),
    'sigchld': repr(signal.getsignal(signal.SIGCHLD)),
    'graph_mode': not tf.executing_eagerly(),
    'draw': float(np.random.uniform()),
    'ppid': os.getppid(),
    'gc_frozen': gc.get_freeze_count(),
}), flush=True)
print('to stderr', file=sys.stderr, flush=True)
if sys.argv[2:] == ['wait']:
  signal.signal(signal.SIGTERM, lambda *_: sys.exit(42))
  while True:
    time.sleep(0.1)
sys.exit(int(sys.argv[1]))
