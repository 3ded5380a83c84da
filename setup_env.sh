# Sourced by demo.sh and test.sh: creates .venv with the pinned requirements
# when it is missing or requirements.txt changed, then activates it.
set -e
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
STAMP="$ROOT/.venv/.requirements.sha256"
WANT="$(sha256sum "$ROOT/requirements.txt" | cut -d' ' -f1)"
if [ ! -x "$ROOT/.venv/bin/python" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "Setting up $ROOT/.venv with requirements.txt ..."
  "$PYTHON" -m venv "$ROOT/.venv"
  "$ROOT/.venv/bin/python" -m pip install --quiet --upgrade pip
  "$ROOT/.venv/bin/python" -m pip install --quiet -r "$ROOT/requirements.txt"
  echo "$WANT" > "$STAMP"
fi
# shellcheck disable=SC1091
. "$ROOT/.venv/bin/activate"
# TensorFlow's C++ logs off (0 brings them back; see quiet_tensorflow.py).
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-3}"
