"""Properties of the token pipeline in whole runs, per clause.

``token.passthrough``: across any pipeline depth, batch and fabric delays, the
frames each forwarding stage sends are the frames it received, in order per
request, the multiset entering stage 0 is the one reaching the last stage, and
the clause passes; one renumbering stage anywhere makes it fail.
``token.emit_window``: in the same runs, whatever the measured hints, the
emitter never sends a frame sooner than its window after its request's previous
(its failing side is the judge's property in test_token_properties.py).

Each example is a whole run; the ci profile draws 10 conforming pipelines (all pass)
and 10 with a renumbering stage (the oracle, ``forwarded_as_received``, finds changed
frames in all 10, and the clause fails in each).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import event, given, settings
from hypothesis import strategies as st
from properties.budget import examples

from sitssim.scenario import scenario_from_data
from sitssim.simulation import RunResult, simulate

TINY = {
    "name": "tiny",
    "n_layers": 4,
    "hidden": 128,
    "n_heads": 4,
    "n_kv_heads": 2,
    "head_dim": 32,
    "ffn_hidden": 256,
    "vocab": 5000,
}
GPUS = 4
MS = 1_000_000


@st.composite
def pipelines(draw: st.DrawFn) -> dict:
    """A star of GPUs round one switch, every link with its own flight time and width."""
    depth = draw(st.integers(1, GPUS))
    delays = draw(st.lists(st.integers(1, 20_000), min_size=GPUS, max_size=GPUS))
    lanes = draw(st.lists(st.sampled_from([1, 4, 16]), min_size=GPUS, max_size=GPUS))
    nodes = [{"id": "s0", "kind": "switch"}] + [{"id": f"g{i}", "kind": "gpu"} for i in range(GPUS)]
    links = {
        f"l{i}": {"rate": "64GT/s", "lanes": lanes[i], "propagation": f"{delays[i]}ns"}
        for i in range(GPUS)
    }
    return {
        "name": "pipeline_property",
        "seed": draw(st.integers(0, 1000)),
        "duration": "1us",
        "topology": {
            "kind": "graph",
            "nodes": nodes,
            "edges": [{"a": f"g{i}", "b": "s0", "link": f"l{i}"} for i in range(GPUS)],
        },
        "links": links,
        "workloads": [
            {
                "kind": "inference",
                "name": "pp",
                "model": TINY,
                "gpu": "A100-80GB",
                "stages": [[f"g{s}"] for s in range(depth)],
                "batch": draw(st.integers(1, 3)),
                "requests": {
                    "kind": "generator",
                    "count": draw(st.integers(1, 3)),
                    "prompt_tokens": draw(st.integers(1, 64)),
                    "generated_tokens": {"dist": "uniform", "low": 1, "high": 4},
                    "interval": f"{draw(st.integers(1, 50))}us",
                },
            }
        ],
    }


def run(data: dict) -> RunResult:
    return simulate(scenario_from_data(data))


def forwarded_as_received(tokens: pd.DataFrame) -> bool:
    """Each non-sampling stage sends, per request and in order, exactly what it received."""
    key = ["token_id", "ts_logical"]
    samplers = set(tokens.loc[tokens["born"], "stage"])
    for stage in set(tokens["to_stage"]) - samplers - {"client"}:
        got = tokens[tokens["to_stage"] == stage].sort_values("t_arrive_ns", kind="stable")
        sent = tokens[tokens["stage"] == stage].sort_values("t_emit_ns", kind="stable")
        for request in set(got["request"]) | set(sent["request"]):
            a = got.loc[got["request"] == request, key].to_numpy()
            b = sent.loc[sent["request"] == request, key].to_numpy()
            if a.shape != b.shape or not np.array_equal(a, b):
                return False
    return True


def verdict(result: RunResult, clause: str) -> str:
    return next(v.verdict for v in result.verdicts if v.id == clause)


# Each example is a whole run (fabric, engine, judges): a quarter of the profile's examples
# keeps this file within its share of the CI budget.
WHOLE_RUNS = settings(max_examples=examples(10))


@WHOLE_RUNS
@given(pipelines())
def test_token_passthrough_and_emit_window_hold_across_depth_and_fabric_delays(data):
    result = run(data)
    tokens = result.tables["tokens"]
    reqs = result.tables["requests"]
    born = tokens[tokens["born"] & (tokens["to_stage"] == "emitter")]
    assert len(born) == reqs["generated_tokens"].sum()
    # Every frame fed back enters stage 0 and reaches the last stage.
    depth = len(data["workloads"][0]["stages"])
    fed = tokens[tokens["born"] & (tokens["to_stage"] == "stage0")]
    assert len(fed) == (reqs["generated_tokens"] - 1).sum() * (depth > 1)
    last = tokens[tokens["to_stage"] == f"stage{depth - 1}"] if depth > 1 else fed
    assert sorted(map(tuple, fed[["token_id", "ts_logical"]].to_numpy())) == sorted(
        map(tuple, last[["token_id", "ts_logical"]].to_numpy())
    )
    assert forwarded_as_received(tokens)
    assert verdict(result, "token.passthrough") == "pass"
    # token.emit_window: whatever the hints, no frame leaves before its window.
    emitted = tokens[tokens["stage"] == "emitter"]
    for _, stream in emitted.groupby("request"):
        gaps = np.diff(stream["t_emit_ns"].to_numpy())
        hints = stream["latency_hint"].to_numpy()[1:]
        # The spec's window, restated: hint + 5 ms if the hint is positive, else 5 ms.
        windows = np.where(hints > 0, hints + 5, 5) * MS
        assert (gaps >= windows).all()


@WHOLE_RUNS
@given(pipelines(), st.data())
def test_token_passthrough_flags_a_renumbering_stage(data, choice):
    depth = len(data["workloads"][0]["stages"])
    stage = choice.draw(st.sampled_from([*range(depth - 1), "emitter"]))
    field = choice.draw(st.sampled_from(["token_id", "ts_logical"]))
    data["faults"] = [{"kind": "renumber_tokens", "stage": stage, "field": field}]
    result = run(data)
    tokens = result.tables["tokens"]
    name = "emitter" if stage == "emitter" else f"stage{stage}"
    changed = not forwarded_as_received(tokens)
    event("frames changed: fail" if changed else "frames as received: pass")
    assert verdict(result, "token.passthrough") == ("fail" if changed else "pass")
    # A stage that restamps from its own counter only goes unnoticed if its counter
    # happens to reproduce the originals, which the sampler's clock and ids rule out
    # beyond a single frame.
    if (tokens["stage"] == name).sum() > 1:
        assert changed
