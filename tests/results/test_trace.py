"""Perfetto trace and inference figures, written by ``write_results``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sitssim.results.inference_plots import write_inference_figures
from sitssim.results.report import write_results
from sitssim.scenario import scenario_from_data
from sitssim.simulation import simulate

TINY = {
    "name": "tiny",
    "n_layers": 4,
    "hidden": 256,
    "n_heads": 8,
    "n_kv_heads": 2,
    "head_dim": 32,
    "ffn_hidden": 512,
    "vocab": 1000,
}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    data = {
        "name": "trace_test",
        "seed": 2,
        "duration": "1us",
        "topology": {"kind": "fat_tree", "gpus": 4, "levels": 1, "radix": 4},
        "workloads": [
            {
                "kind": "inference",
                "model": TINY,
                "stages": [["gpu0", "gpu1"], ["gpu2", "gpu3"]],
                "requests": {
                    "kind": "generator",
                    "count": 2,
                    "prompt_tokens": 8,
                    "generated_tokens": 3,
                    "interval": "1us",
                },
            }
        ],
    }
    result = simulate(scenario_from_data(data))
    out = tmp_path_factory.mktemp("trace") / "out"
    write_results(result, out, wall_s=1.0, figures=False)
    return result, out


def test_trace_has_every_span_on_every_gpu_of_its_stage(written):
    result, out = written
    events = json.loads((out / "trace.json").read_text())["traceEvents"]
    meta = [e for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    names = {e["pid"]: e["args"]["name"] for e in meta}
    assert set(names.values()) == {"gpu0", "gpu1", "gpu2", "gpu3", "tokens"}
    spans = result.tables["inference_spans"]
    complete = pd.DataFrame([e for e in events if e["ph"] == "X"])
    complete["gpu"] = complete["pid"].map(names)
    for kind, track in (("compute", 0), ("all_reduce", 1), ("send", 2)):
        expected = spans[spans["kind"] == kind]
        assert len(expected)
        got = complete[complete["cat"] == kind]
        assert len(got) == 2 * len(expected)  # two GPUs per stage
        assert set(got["tid"]) == {track}
    for _, gpu in complete[complete["cat"] == "compute"].groupby("gpu"):
        gpu = gpu.sort_values("ts")
        ends = (gpu["ts"] + gpu["dur"]).to_numpy()
        assert (gpu["ts"].to_numpy()[1:] >= ends[:-1] - 1e-9).all()
    np.testing.assert_allclose(
        np.sort(complete.loc[complete["gpu"] == "gpu0", "ts"].to_numpy()),
        np.sort(spans.loc[spans["stage"] == "stage0", "t_start_ns"].to_numpy() / 1e3),
    )


def test_trace_marks_each_sampled_and_emitted_token(written):
    result, out = written
    events = json.loads((out / "trace.json").read_text())["traceEvents"]
    instants = [e for e in events if e["ph"] == "i"]
    tokens = result.tables["tokens"]
    assert len(instants) == 2 * result.tables["requests"]["tokens"].sum()
    assert (
        sum(e["name"].startswith("emit") for e in instants)
        == (tokens["to_stage"] == "client").sum()
    )


def test_ttft_tpot_figure_is_written_per_inference_workload(written, tmp_path):
    result, _ = written
    write_inference_figures(result.tables, "trace_test", tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["inference_0_ttft_tpot.png"]
    assert (tmp_path / "inference_0_ttft_tpot.png").stat().st_size > 0
