#!/usr/bin/env bash
# Set up everything tlgui needs on a fresh Debian-like machine: the system libraries Qt loads
# offscreen and, for a real window, on X11 (xcb); a virtual environment in .venv and the
# project with its test tools.
# Idempotent: a second run only checks. Usage: bash scripts/setup.sh [--xvfb]
#   --xvfb  also the virtual X server the window test runs on (scripts/test.sh passes it)
set -euo pipefail
cd "$(dirname "$0")/.."
with_xvfb=0
for arg in "$@"; do
  case $arg in
    --xvfb) with_xvfb=1 ;;
    *) echo "setup: unknown option $arg (usage: setup.sh [--xvfb])" >&2; exit 2 ;;
  esac
done

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: Python >= 3.11 is needed (found: $("$PY" --version 2>&1 || echo none))" >&2
  exit 1
fi

# The Debian packages of the shared libraries Qt's platform plugins link against (their ELF
# NEEDED entries, mapped with dpkg -S; the packages pull in the libraries those need).
# Offscreen (the tests, the screenshots): platforms/libqoffscreen.so, libQt6Gui, the SVG icons.
QT_LIBS="libgl1 libegl1 libx11-6 libxkbcommon0 libfontconfig1 libdbus-1-3 libglib2.0-0"
# A real window (X11): platforms/libqxcb.so, lib/libQt6XcbQpa.so.6 and
# xcbglintegrations/libqxcb-{egl,glx}-integration.so.  Without libxcb-icccm4 or
# libxcb-keysyms1 Qt only says "xcb-cursor0 or libxcb-cursor0 is needed", whatever is missing.
DISPLAY_LIBS="libx11-xcb1 libxcb1 libxcb-cursor0 libxcb-glx0 libxcb-icccm4 libxcb-image0
  libxcb-keysyms1 libxcb-randr0 libxcb-render0 libxcb-render-util0 libxcb-shape0 libxcb-shm0
  libxcb-sync1 libxcb-util1 libxcb-xfixes0 libxcb-xkb1 libxkbcommon-x11-0"
# The window test: a virtual X server (xvfb-run needs xauth).
XVFB_TOOLS="xvfb xauth"

# The packages of "$@" that are not installed (fully, not merely known to dpkg).
not_installed() {
  local p
  for p in "$@"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || printf ' %s' "$p"
  done
}

if command -v dpkg-query >/dev/null 2>&1; then
  wanted=$DISPLAY_LIBS
  [ "$with_xvfb" = 1 ] && wanted="$wanted $XVFB_TOOLS"
  # The lists are split into words on purpose (unquoted).
  needed=$(not_installed $QT_LIBS)
  optional=$(not_installed $wanted)
  if [ -n "$needed$optional" ]; then
    if [ "$(id -u)" = 0 ]; then
      echo "setup: installing system packages:$needed$optional" >&2
          apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $needed $optional >/dev/null
    else
      echo "setup: system packages are missing. Run:" >&2
      echo "  sudo apt-get update && sudo apt-get install -y$needed$optional" >&2
      if [ -n "$needed" ]; then
        echo "setup: Qt cannot start without:$needed" >&2
        exit 1
      fi
      # Only the window (and its test) need these; everything else runs offscreen.
      echo "setup: warning: without$optional tlgui opens no window on X11 and the window test is skipped; continuing" >&2
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
