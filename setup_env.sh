# Creates .venv with the pinned requirements when it is missing or
# requirements.txt changed, then activates it. Source it (`. ./setup_env.sh`,
# as demo.sh and test.sh do): it changes nothing in the calling shell but the
# venv's activation - no shell options, traps or variables - and a failed
# step returns non-zero (exits, when the file is run rather than sourced).
_slim_zoo_setup_env() {
  local root python stamp want
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)" || return
  python="${PYTHON:-python3}"
  stamp="$root/.venv/.requirements.sha256"
  want="$(sha256sum "$root/requirements.txt" | cut -d' ' -f1)" || return
  [ -n "$want" ] || { echo "setup_env.sh: cannot read $root/requirements.txt" >&2; return 1; }
  if [ ! -x "$root/.venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "Setting up $root/.venv with requirements.txt ..."
    "$python" -m venv "$root/.venv" &&
      "$root/.venv/bin/python" -m pip install --quiet --upgrade pip &&
      "$root/.venv/bin/python" -m pip install --quiet -r "$root/requirements.txt" &&
      echo "$want" > "$stamp" ||
      { echo "setup_env.sh: setting up $root/.venv failed (see above)" >&2; return 1; }
  fi
  # shellcheck disable=SC1091
  . "$root/.venv/bin/activate"
}
if _slim_zoo_setup_env; then
  unset -f _slim_zoo_setup_env
else
  unset -f _slim_zoo_setup_env
  return 1 2>/dev/null || exit 1  # return ends a sourcing; run, the file exits
fi
