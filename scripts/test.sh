#!/usr/bin/env bash
# Set up, then run the whole test suite (offline; Qt offscreen) and ruff.  The set-up includes
# Xvfb, on which tests/test_window_xcb.py opens the real window (xcb) in a child process.
# Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --xvfb
export QT_QPA_PLATFORM=offscreen
# Where setup.sh installs system packages itself, the window test must run, not be skipped.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  export TLGUI_REQUIRE_XCB=1
fi
.venv/bin/ruff check engine tlgui tests bench
.venv/bin/python -m pytest -q "$@"
