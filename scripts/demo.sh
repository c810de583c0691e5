#!/usr/bin/env bash
# Set up, then run the main job on the bundled sample page: the GUI when a display is there;
# otherwise the same run offscreen, writing the outputs and a screenshot of the window.
# Usage: bash scripts/demo.sh [PAGE]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
page=${1:-resources/sample/170025120000003_0074.jpg}
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  exec .venv/bin/tlgui "$page"
fi
out=out/demo
mkdir -p "$out"
echo "demo: no display; segmenting offscreen into $out/" >&2
.venv/bin/tlseg segment "$page" -o "$out" --overwrite
QT_QPA_PLATFORM=offscreen .venv/bin/tlgui --screenshot "$out/window.png" --run "$page"
stem=$(basename "${page%.*}")
echo "demo: wrote $out/$stem.{dat,labels.png,overlay.png,page.xml,alto.xml,json} and the window's screenshot $out/window.png"
