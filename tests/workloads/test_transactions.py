"""``kind: transactions``: ATS on the request path, ordering, the reorder buffer, bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.scenario import scenario_from_data
from sitssim.simulation import RunResult, simulate

# A root complex with one near GPU and one far one: completions overtake each other.
NEAR_AND_FAR = {
    "kind": "graph",
    "nodes": [
        {"id": "rc", "kind": "root_complex"},
        {"id": "near", "kind": "gpu"},
        {"id": "far", "kind": "gpu"},
    ],
    "edges": [{"a": "rc", "b": "near"}, {"a": "rc", "b": "far", "link": "long"}],
}
LINKS = {"default": {}, "long": {"propagation": "300ns"}}


def run(workload: dict[str, Any], duration: str = "20us", **extra: Any) -> RunResult:
    data = {
        "name": "txn",
        "duration": duration,
        "topology": extra.pop("topology", NEAR_AND_FAR),
        "links": extra.pop("links", LINKS),
        "workloads": [{"kind": "transactions", **workload}],
        **extra,
    }
    return simulate(scenario_from_data(data))


def reads_in_issue_order(result: RunResult) -> pd.DataFrame:
    txns = result.tables["transactions"]
    return txns[txns["class"] == "NP"].sort_values("request_msg")


def test_completions_overtake_but_the_rob_releases_in_issue_order() -> None:
    result = run({"interval": "100ns", "read_fraction": 1.0, "rob_depth": 16})
    reads = reads_in_issue_order(result)
    complete = reads["t_complete_ns"].to_numpy()
    assert (np.diff(complete) < 0).any(), "no completion overtook another: the test is moot"
    # In-order release: each read leaves when it and every read issued before it are back.
    np.testing.assert_allclose(reads["t_release_ns"].to_numpy(), np.maximum.accumulate(complete))
    waits = reads["rob_wait_ns"].to_numpy()
    assert (waits >= 0).all() and (waits > 0).any()


def test_depth_one_rob_serialises_reads_and_a_deeper_one_overlaps_them() -> None:
    issue_gaps = {}
    for depth in (1, 4):
        result = run({"interval": "200ns", "read_fraction": 1.0, "rob_depth": depth})
        reads = reads_in_issue_order(result)
        issue_gaps[depth] = (
            reads["t_issue_ns"].to_numpy()[1:] - reads["t_release_ns"].to_numpy()[:-1]
        )
    assert (issue_gaps[1] >= 0).all()
    assert (issue_gaps[4] < 0).any()
    stalls = run({"interval": "200ns", "read_fraction": 1.0, "rob_depth": 1}).tables["rob_stalls"]
    assert len(stalls) and (stalls["duration_ns"] > 0).all()


def test_an_atc_miss_adds_exactly_its_latency_at_zero_load() -> None:
    miss = 437.0
    result = run(
        {
            "targets": ["far"],
            "interval": "20us",
            "read_fraction": 1.0,
            "atc_hit_ratio": 0.5,
            "atc_miss_latency": f"{miss}ns",
        },
        duration="400us",
    )
    reads = reads_in_issue_order(result)
    hit = reads["atc_hit"].to_numpy()
    assert hit.any() and (~hit).any()
    delay = (reads["t_issue_ns"] - reads["t_ready_ns"]).to_numpy()
    np.testing.assert_allclose(delay[hit], 0.0, atol=1e-9)
    np.testing.assert_allclose(delay[~hit], miss)
    rtt = reads["rtt_ns"].to_numpy()
    np.testing.assert_allclose(rtt, rtt[0])
    # The requester's round trip in ``probes`` carries the miss.
    probes = result.tables["probes"].set_index("probe_id").loc[reads["request_msg"]]
    np.testing.assert_allclose(probes["rtt_ns"].to_numpy(), rtt + delay)


def test_hit_ratio_is_drawn_at_the_configured_rate() -> None:
    ratio = 0.8
    result = run(
        {
            "interval": "50ns",
            "read_fraction": 0.0,
            "atc_hit_ratio": ratio,
            "atc_miss_latency": "100ns",
        },
        duration="50us",
    )
    hits = result.tables["transactions"]["atc_hit"].to_numpy()
    n = len(hits)
    assert n > 1000
    assert abs(hits.mean() - ratio) < 4 * np.sqrt(ratio * (1 - ratio) / n)


def test_a_read_waits_for_an_earlier_write_unless_ido_separates_them() -> None:
    common = {
        "targets": ["near"],
        "interval": "20ns",
        "read_fraction": 0.5,
        "atc_hit_ratio": 0.5,
        "atc_miss_latency": "500ns",
        "requester_ids": 2,
    }

    def overtakes(result: RunResult) -> int:
        txns = result.tables["transactions"].sort_values("txn_id")
        count = 0
        issue = txns["t_issue_ns"].to_numpy()
        cls = txns["class"].to_numpy()
        rid = txns["requester_id"].to_numpy()
        for i in np.flatnonzero(cls == "NP"):
            earlier_writes = (cls[:i] == "P") & (issue[:i] > issue[i])
            count += int(earlier_writes.sum())
            if not txns["ido"].iloc[i]:
                assert not earlier_writes.any()
            else:
                assert not (earlier_writes & (rid[:i] == rid[i])).any()
        return count

    assert overtakes(run(common, duration="5us")) == 0
    assert overtakes(run({**common, "id_based_ordering": 1.0}, duration="5us")) > 0


def test_requests_and_completions_travel_in_their_own_flow_control_classes() -> None:
    tight = {"link_layer": {"credits": {"header_credits": 1, "update_delay": "200ns"}}}
    result = run({"targets": ["near"], "interval": "20ns", "read_fraction": 0.5}, **tight)
    txns = result.tables["transactions"]
    kind = result.tables["messages"].set_index("msg_id")["kind"].astype(str)
    reads = txns[txns["class"] == "NP"]
    writes = txns[txns["class"] == "P"]
    assert len(reads) and len(writes)
    assert set(kind[reads["request_msg"]]) == {"txn_read"}
    assert set(kind[writes["request_msg"]]) == {"txn_write"}
    assert set(kind[reads["completion_msg"]]) == {"txn_completion"}
    # With one header credit a class, reads stall for NP credit towards the GPU and their
    # completions for Cpl credit on the way back, each in its own class.
    stalls = result.tables["credits"]
    classes = stalls.groupby("link")["fc_class"].agg(lambda c: set(c.astype(str)))
    assert "NP" in classes["rc>near"] and "Cpl" not in classes["rc>near"]
    assert classes["near>rc"] == {"Cpl"}


def test_tso_window_sees_translation_misses() -> None:
    window = {"root_complex": {"tso_window": "2us"}}
    base = {"targets": ["far"], "interval": "2us", "read_fraction": 1.0}
    verdicts = {}
    for hit_ratio in (1.0, 0.0):
        result = run({**base, "atc_hit_ratio": hit_ratio, "atc_miss_latency": "400ns"}, **window)
        verdicts[hit_ratio] = next(v for v in result.verdicts if v.id == "fabric.tso_window")
    assert verdicts[1.0].verdict == "pass"
    assert verdicts[0.0].verdict == "fail"
    assert verdicts[0.0].measured - verdicts[1.0].measured == pytest.approx(2 * 400.0)


# --- bad input: exit 2 naming file, line and field ------------------------------------

runner = CliRunner()
HEAD = """\
version: 1
name: bad
duration: 2us
topology: {kind: direct_rc, gpus: 2}
workloads:
  - kind: transactions
    interval: 100ns
"""


@pytest.mark.parametrize(
    ("body", "line", "field", "expect"),
    [
        ("    atc_hit_ratio: 1.5\n", 8, "workloads[0].atc_hit_ratio", "at most 1"),
        ("    atc_hit_ratio: 0.9\n", 6, "workloads[0].atc_miss_latency", "atc_miss_latency"),
        ("    rob_depth: 0\n", 8, "workloads[0].rob_depth", "positive"),
        ("    targets: [gpu0, gpu7]\n", 8, "workloads[0].targets[1]", "unknown node"),
        ("    requester: nowhere\n", 8, "workloads[0].requester", "unknown node"),
        ("    targets: [gpu0, gpu0]\n", 8, "workloads[0].targets[1]", "twice"),
    ],
)
@pytest.mark.parametrize("command", ["run", "validate"])
def test_bad_input_names_file_line_and_field(
    tmp_path: Path, command: str, body: str, line: int, field: str, expect: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(HEAD + body, encoding="utf-8")
    out = tmp_path / "out"
    args = [command, str(path)] + (["--out", str(out)] if command == "run" else [])
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    message = result.stderr.strip()
    assert message.startswith(f"error: {path}:{line}: {field}: "), message
    assert expect in message
    assert not out.exists()
