#!/usr/bin/env bash
# Set up everything tlgui needs on a fresh Debian-like machine: the system libraries Qt loads
# even offscreen, a virtual environment in .venv and the project with its test tools.
# Idempotent: a second run only checks. Usage: bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: Python >= 3.11 is needed (found: $("$PY" --version 2>&1 || echo none))" >&2
  exit 1
fi

# Qt's xcb/offscreen platform plugins link against these even without a display.
QT_LIBS="libgl1 libegl1 libxkbcommon0 libfontconfig1 libdbus-1-3 libglib2.0-0"
if command -v dpkg >/dev/null 2>&1; then
  missing=""
  for p in $QT_LIBS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
      echo "setup: installing system libraries:$missing" >&2
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    else
      echo "setup: Qt needs system libraries that are missing. Run:" >&2
      echo "  sudo apt-get update && sudo apt-get install -y$missing" >&2
      exit 1
    fi
  fi
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  "$PY" -m venv .venv
fi
# Reinstall only when the dependencies change (a stamp of pyproject.toml's hash).
stamp=.venv/.tlgui-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || ! .venv/bin/python -c 'import engine, tlgui, pytest' 2>/dev/null; then
  echo "setup: installing Python packages into .venv (a few minutes the first time)" >&2
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".[test]"
  echo "$want" > "$stamp"
fi
echo "setup: ready (.venv/bin/tlseg, .venv/bin/tlgui)" >&2
