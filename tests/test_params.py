"""Parameters: validation names the field and its range, JSON round trip, unknown fields."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.params import PREPARATION_FIELDS, ParameterError, Parameters


def test_defaults_are_valid_and_follow_the_paper() -> None:
    p = Parameters()
    assert p.sample_ratio == 0.05
    assert p.update_rule == "bethe"
    assert p.orientation_range == (-40.0, 40.0)
    assert Parameters(multi_oriented=True).orientation_range == (-90.0, 90.0)
    assert abs(sum(p.moments) - 1.0) < 1e-3
    # Section 5.1 values the default keeps; K and the iteration cap differ (docs/paper.md).
    assert (p.r, p.epsilon, p.t_o, p.t_r, p.c_v) == (0.3, 1e-3, 2.0, 0.08, 1.0)
    assert (p.kl_tolerance, p.max_em_iterations) == (1e-3, 15)
    assert (p.unary_form, p.line_prior_rule, p.final_labelling, p.preset_name) == (
        "plateau", "log_ratio", "profile", "default")


@pytest.mark.parametrize(("name", "value"), [
    ("sample_ratio", 0.0), ("sample_ratio", 1.5), ("sample_ratio", -0.1),
    ("seed", -1), ("seed", 2**32),
    ("sauvola_k", 0.0), ("t_r", 1.0), ("epsilon", 0.5), ("damping", 1.0),
    ("max_em_iterations", 0), ("mp_max_sweeps", 0), ("snapshot_top_k", 65),
    ("orientation_min", -91.0), ("orientation_step", 0.0), ("kl_tolerance", 0.0),
    ("region_threshold", 1e9), ("c_v", 0.0),
])
def test_out_of_range_names_the_field_and_range(name: str, value: float) -> None:
    with pytest.raises(ParameterError, match=name) as info:
        Parameters(**{name: value})
    assert "outside" in str(info.value)


@pytest.mark.parametrize(("name", "value"), [
    ("sample_ratio", math.nan), ("sample_ratio", math.inf), ("sample_ratio", "0.1"),
    ("seed", 1.5), ("max_em_iterations", 2.5), ("seed", True), ("r", None),
    ("multi_oriented", "yes"), ("merge_fragments", 1),
    ("update_rule", "gibbs"), ("regression", "ols"),
    ("moments", (0.5, 0.5)), ("moments", (0.9, 0.05, 0.01)), ("moments", (1.2, -0.1, -0.1)),
    ("moments", "abc"),
])
def test_bad_type_or_choice_names_the_field(name: str, value: object) -> None:
    with pytest.raises(ParameterError, match=name):
        Parameters(**{name: value})


def test_contradictory_orientation_range() -> None:
    with pytest.raises(ParameterError, match="orientation_min") as info:
        Parameters(orientation_min=30.0, orientation_max=-30.0)
    assert "orientation_max" in str(info.value)


def test_whole_floats_become_ints() -> None:
    p = Parameters(seed=3.0, max_em_iterations=20.0)
    assert p.seed == 3 and isinstance(p.seed, int)
    assert isinstance(p.max_em_iterations, int)


def test_json_round_trip_of_defaults_and_changes(tmp_path) -> None:
    for p in (Parameters(), Parameters(seed=7, sample_ratio=0.1, update_rule="convex",
                                       regression="paper", multi_oriented=True,
                                       moments=(0.9, 0.08, 0.02))):
        text = p.to_json()
        assert json.loads(text)["seed"] == p.seed
        assert Parameters.from_json(text) == p
        assert Parameters.from_dict(p.to_dict()) == p
        f = tmp_path / "p.json"
        f.write_text(text)
        assert Parameters.load(f) == p


def test_to_dict_is_plain_json_and_complete() -> None:
    d = Parameters().to_dict()
    assert "_extra" not in d
    assert isinstance(d["moments"], list)
    assert set(PREPARATION_FIELDS) <= set(d)
    json.dumps(d)  # no tuples or numpy types left


def test_unknown_field_rejected_everywhere() -> None:
    with pytest.raises(ParameterError, match="sample_rate"):
        Parameters.from_dict({"sample_rate": 0.1})
    with pytest.raises(ParameterError, match="bogus"):
        Parameters.from_json('{"seed": 1, "bogus": 2}')
    with pytest.raises(ParameterError, match="bogus"):
        Parameters().replace(bogus=1)
    with pytest.raises(ParameterError, match="_extra"):
        Parameters().replace(_extra={"x": 1})


def test_bad_json_and_files(tmp_path) -> None:
    with pytest.raises(ParameterError, match="JSON"):
        Parameters.from_json("{seed: 1")
    with pytest.raises(ParameterError, match="object"):
        Parameters.from_json("[1, 2]")
    missing = tmp_path / "nope.json"
    with pytest.raises(ParameterError, match="nope.json"):
        Parameters.load(missing)


def test_replace_validates_again() -> None:
    p = Parameters()
    assert p.replace(seed=5).seed == 5
    assert p.seed == 0  # frozen: the original is untouched
    with pytest.raises(ParameterError, match="sample_ratio"):
        p.replace(sample_ratio=2.0)


@settings(max_examples=60, deadline=None)
@given(ratio=st.floats(min_value=1e-6, max_value=1.0), seed=st.integers(0, 2**32 - 1),
       damping=st.floats(min_value=0.0, max_value=0.99))
def test_any_valid_values_round_trip_exactly(ratio: float, seed: int, damping: float) -> None:
    p = Parameters(sample_ratio=ratio, seed=seed, damping=damping)
    assert Parameters.from_json(p.to_json()) == p


@settings(max_examples=60, deadline=None)
@given(ratio=st.one_of(st.floats(max_value=0.0), st.floats(min_value=1.0, exclude_min=True)))
def test_any_invalid_ratio_is_rejected(ratio: float) -> None:
    with pytest.raises(ParameterError, match="sample_ratio"):
        Parameters(sample_ratio=ratio)
