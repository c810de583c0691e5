"""The bench scripts that run every page of some sets with ``bench.run_bench``'s page options
(``page_tool``, ``add_page_options``): bad data or parameters stop them with status 2 and a
message, before any page runs."""

from __future__ import annotations

import numpy as np
import pytest

from bench import angle_errors, crossing_lines, em_gain, part_margins, steering

TOOLS = [em_gain, angle_errors, steering, crossing_lines, part_margins]


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


def test_part_ink_is_the_ink_nearer_to_the_part_than_to_the_rest_of_its_region():
    components = np.zeros((20, 40), np.int32)
    components[5:8, 2:38] = 1  # one stroke along the page, rows 5-7
    samples = np.array([[5, 5], [15, 7], [25, 5], [35, 7]], float)
    # The box of samples 0 and 1 (x 5-15, y 5-7): all of it nearer to them than to 2 and 3.
    ink = part_margins.part_ink(components, samples, np.array([0, 1]), np.arange(4))
    assert len(ink) == 3 * 11 and ink[:, 0].min() == 5 and ink[:, 0].max() == 15
    # Samples 0 and 2: their box (x 5-25) less the pixels nearer to sample 1.
    ink = part_margins.part_ink(components, samples, np.array([0, 2]), np.arange(4))
    d = {k: np.hypot(ink[:, 0] - samples[k, 0], ink[:, 1] - samples[k, 1]) for k in range(4)}
    assert 0 < len(ink) < 3 * 21 and (np.minimum(d[0], d[2]) <= d[1]).all()
    assert {5.0, 25.0} <= set(ink[:, 0].tolist()) and 15.0 not in set(ink[:, 0].tolist())
    # Only the region's samples compete: alone, sample 2's box is its own pixel.
    alone = part_margins.part_ink(components, samples, np.array([2]), np.array([2]))
    assert alone.tolist() == [[25.0, 5.0]]


def test_the_ratio_is_one_at_the_rows_own_angle_and_low_across_them():
    rng = np.random.default_rng(0)
    # Six rows 30 px apart, written at 0 deg, 3 px thick.
    rows = np.concatenate([np.c_[rng.uniform(0, 600, 400), 30 * k + rng.normal(0, 1.5, 400)]
                           for k in range(6)])
    assert part_margins.ratio_at(rows, 12.0, 0.0) == pytest.approx(1.0, abs=0.05)
    assert part_margins.ratio_at(rows, 12.0, 90.0) < 0.3
    again = part_margins.redraw_ratios(rows, 300, 12.0, 90.0, 5)
    assert again.shape == (5,) and (again < 0.5).all()
