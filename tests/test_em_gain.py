"""bench/em_gain.py: stage 8 on EM's start, first and last snapshot, scored as the pipeline's."""

from __future__ import annotations

import pytest
from synthetic import make_page, run_on_label_set, save_page

import engine.pipeline as pipeline
from bench import em_gain
from bench.steering import ground_truth
from engine.metric import line_metric
from engine.params import Parameters


@pytest.fixture(scope="module")
def curved_page(tmp_path_factory):
    return save_page(make_page("curved", seed=1), tmp_path_factory.mktemp("em_gain"))


def test_stages_are_snapshot_zero_one_and_the_last(curved_page, monkeypatch):
    image, labels = curved_page
    seen = []
    real_finish = pipeline.finish

    def recording_finish(prep, snapshot, params=None):
        seen.append(snapshot.iteration)
        return real_finish(prep, snapshot, params)

    monkeypatch.setattr(pipeline, "finish", recording_finish)
    out = em_gain.score_snapshots(str(image), str(labels), Parameters().to_json())
    assert out["iterations"] >= 2  # the page runs EM past its first iteration
    assert seen == [0, 1, out["iterations"]]


@pytest.fixture(scope="module")
def touching_page(tmp_path_factory):
    # Rows whose strokes touch: some lines match at 0.5 but not at the 0.75 threshold.
    return save_page(make_page("touching", seed=1), tmp_path_factory.mktemp("em_gain_touching"))


def test_last_stage_scores_what_the_pipeline_labels(touching_page):
    image, labels = touching_page
    out = em_gain.score_snapshots(str(image), str(labels), Parameters().to_json())
    _, _, seg = pipeline.segment(str(image), Parameters())
    truth, scored = ground_truth(labels, image, seg.labels.shape)  # as run_bench reads it
    score = line_metric(truth, seg.labels, scored, em_gain.LINE_THRESHOLD)
    assert out["last"] == score
    assert score.n_gt > 0


def test_main_runs_every_page_of_a_set(tmp_path, capsys):
    page = make_page("straight", seed=2)
    status, out_csv = run_on_label_set(em_gain.main, page, tmp_path)
    assert status == 0
    table = capsys.readouterr().out
    n_gt = int(page.labels.max())
    assert any(row.split()[:2] == ["synth", str(n_gt)] for row in table.splitlines())
    rows = out_csv.read_text().splitlines()
    assert rows[0].startswith("set,page,gt,iterations,start_correct") and rows[1].startswith(f"synth,p,{n_gt},")
