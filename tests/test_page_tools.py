"""The bench scripts that run every page of some sets with ``bench.run_bench``'s page options
(``page_tool``, ``add_page_options``): bad data or parameters stop them with status 2 and a
message, before any page runs."""

from __future__ import annotations

import numpy as np
import pytest

from bench import angle_errors, crossing_lines, em_gain, steering

TOOLS = [em_gain, angle_errors, steering, crossing_lines]


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.__name__.rsplit(".", 1)[-1])
def test_a_missing_data_folder_exits_2(tool, tmp_path, capsys):
    assert tool.main(["--data", str(tmp_path / "none")]) == 2
    assert "no data folder" in capsys.readouterr().err


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.__name__.rsplit(".", 1)[-1])
def test_an_unknown_parameter_exits_2(tool, tmp_path, capsys):
    assert tool.main(["--data", str(tmp_path), "--set", "bogus=1"]) == 2
    assert "bogus" in capsys.readouterr().err


def test_crossing_pairs_counts_an_x_not_lines_that_touch_or_run_parallel():
    segs = np.array([[[0, 0], [10, 10]],   # 0: an X with 1
                     [[0, 10], [10, 0]],
                     [[10, 10], [20, 10]],  # 2: touches 0 at its end
                     [[0, 20], [10, 30]],   # 3: parallel to 0
                     [[9.5, -5], [9.5, 25]]], float)  # 4: meets 0 and 1 near their ends
    i, j = crossing_lines.crossing_pairs(segs)
    assert sorted(zip(i.tolist(), j.tolist(), strict=True)) == [(0, 1)]
    i, j = crossing_lines.crossing_pairs(segs[[1, 0]])  # the order of the lines does not matter
    assert (i.tolist(), j.tolist()) == ([0], [1])
