"""bench/seed_spread.py: the spread of several benchmark runs, one per draw of the samples."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from bench.seed_spread import main, page_spread, read_run, set_spread

FIELDS = ["set", "page", "status", "FM", "line_IU", "correct"]


def write_run(path: Path, totals: dict[str, tuple[float, float]], pages: dict[tuple[str, str], tuple[str, int]]
              ) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        for (name, page), (status, correct) in pages.items():
            w.writerow({"set": name, "page": page, "status": status, "FM": "", "line_IU": "", "correct": correct})
        for name, (fm, iu) in totals.items():
            w.writerow({"set": name, "page": "TOTAL", "status": "ok", "FM": fm, "line_IU": iu, "correct": ""})
    return path


def test_set_means_and_ranges_and_the_most_variable_pages_first(tmp_path: Path) -> None:
    a = write_run(tmp_path / "s0.csv", {"poilus": (0.68, 0.815), "ALL": (0.55, 0.672)},
                  {("poilus", "p1"): ("ok", 20), ("poilus", "p2"): ("ok", 5), ("poilus", "p3"): ("ok", 7)})
    b = write_run(tmp_path / "s1.csv", {"poilus": (0.62, 0.768), "ALL": (0.53, 0.641)},
                  {("poilus", "p1"): ("ok", 16), ("poilus", "p2"): ("ok", 5), ("poilus", "p3"): ("ok", 8)})
    runs = [read_run(a), read_run(b)]
    spread = {s["set"]: s for s in set_spread([t for t, _ in runs])}
    assert spread["poilus"]["fm_mean"] == pytest.approx(65.0)
    assert spread["poilus"]["iu_range"] == pytest.approx(4.7)
    assert spread["ALL"]["fm_range"] == pytest.approx(2.0)
    pages, left_out = page_spread([p for _, p in runs])
    assert [p for _, p, _ in pages] == ["p1", "p3", "p2"]
    assert pages[0][2] == [20, 16]
    assert left_out == []


def test_a_page_failed_in_one_run_is_named_not_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path / "s0.csv", {"cremma": (0.7, 0.7)}, {("cremma", "x"): ("ok", 3), ("cremma", "y"): ("ok", 9)})
    b = write_run(tmp_path / "s1.csv", {"cremma": (0.6, 0.6)},
                  {("cremma", "x"): ("failed", 0), ("cremma", "y"): ("ok", 4)})
    assert main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "cremma/y: 9 / 4" in out
    assert "cremma/x:" not in out
    assert "left out (missing or failed in a CSV): cremma/x" in out


def test_not_a_benchmark_csv_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other.csv"
    other.write_text("set,page,status\nx,y,ok\n", encoding="utf-8")
    a = write_run(tmp_path / "s0.csv", {"cremma": (0.7, 0.7)}, {("cremma", "x"): ("ok", 3)})
    assert main([str(a), str(other)]) == 2
    assert "no TOTAL rows" in capsys.readouterr().err


def test_region_partitions_compared_on_the_ink() -> None:
    """bench/region_stability.py: the same partition under other region numbers is no
    change; moving one component moves its share of the ink."""
    import numpy as np

    from bench.region_stability import partition_mismatch
    from engine.postprocess import component_owners

    # Each component's region, as region_stability reads it (samples of components 1, 1, 2, 3, 3).
    regions = component_owners(np.array([0, 0, 1, 1, 1]), np.array([1, 1, 2, 3, 3]))
    assert regions.tolist() == [-1, 0, 1, 1]
    weight = np.array([0.0, 2.0, 1.0, 3.0])
    assert partition_mismatch(np.array([-1, 0, 1, 1]), np.array([-1, 5, 2, 2]), weight) == 0.0
    assert partition_mismatch(np.array([-1, 0, 1, 1]), np.array([-1, 0, 0, 1]), weight) == pytest.approx(1.0 / 6.0)
