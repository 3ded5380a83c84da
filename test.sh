#!/usr/bin/env bash
# Runs the test suite (what CI runs). Extra arguments go to pytest, e.g.
#   ./test.sh -m "not slow"     the quick subset
set -e
cd "$(dirname "$0")"
. ./setup_env.sh
exec python -m pytest "$@"
