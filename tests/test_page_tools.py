"""The bench scripts that run every page of some sets with ``bench.run_bench``'s page options
(``page_tool``, ``add_page_options``): bad data or parameters stop them with status 2 and a
message, before any page runs."""

from __future__ import annotations

import pytest

from bench import angle_errors, em_gain, steering

TOOLS = [em_gain, angle_errors, steering]


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.__name__.rsplit(".", 1)[-1])
def test_a_missing_data_folder_exits_2(tool, tmp_path, capsys):
    assert tool.main(["--data", str(tmp_path / "none")]) == 2
    assert "no data folder" in capsys.readouterr().err


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.__name__.rsplit(".", 1)[-1])
def test_an_unknown_parameter_exits_2(tool, tmp_path, capsys):
    assert tool.main(["--data", str(tmp_path), "--set", "bogus=1"]) == 2
    assert "bogus" in capsys.readouterr().err
