#!/usr/bin/env bash
# Runs the test suite (what CI runs). Extra arguments go to pytest, e.g.
#   ./test.sh -m quick     the quick tier, before each commit (docs/testing.md)
set -e
cd "$(dirname "$0")"
. ./setup_env.sh
# TensorFlow's C++ logs off in the test processes (the scripts set this
# themselves: quiet_tensorflow.py); 0 brings them back.
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-3}"
exec python -m pytest "$@"
