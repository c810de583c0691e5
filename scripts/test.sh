#!/usr/bin/env bash
# Set up, then run the whole test suite (offline; Qt offscreen) and ruff.
# Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export QT_QPA_PLATFORM=offscreen
.venv/bin/ruff check engine tlgui tests bench
.venv/bin/python -m pytest -q "$@"
