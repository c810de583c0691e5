"""The benchmark's environment record: what its timings and memory depend on besides the code."""

from __future__ import annotations

import re

import cv2
import numpy as np

from bench import run_bench


def test_environment_names_the_libraries_installed_and_the_commit(monkeypatch: object) -> None:
    monkeypatch.setattr(run_bench, "LIBRARIES", ("numpy", "opencv-python-headless", "no-such-package-here"))
    env = run_bench.environment()
    libs = env["libraries"]
    assert libs["numpy"] == np.__version__
    assert libs["opencv-python-headless"].startswith(cv2.__version__.split("-")[0])
    assert libs["no-such-package-here"] is None
    assert env["cpus"] >= 1 and len(env["load_average"]) == 3
    # In a git checkout: the commit checked out, and whether tracked files differ from it.
    if env["commit"] is not None:
        assert re.fullmatch(r"[0-9a-f]{40}", env["commit"]) and isinstance(env["modified"], bool)
