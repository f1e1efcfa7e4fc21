"""The ``kind: tenant_requests`` driver (``sitssim.workloads.tenant_requests``).

On a small star fabric (three GPUs on one input-queued switch, credited links, a quota
table that gives two tenants a VC per class and one a single VC): requests are dealt in
turn over the tenants, every completion answers its request on the tenant's Cpl VC, the
tag space bounds each requester's outstanding requests at every instant, ``load`` is the
completions' share of each requester's own link bandwidth, and the ``tenants`` table adds
up. The ACK-timeout accounting (on time, late, pending, not issued) is checked on a run
whose turnaround is beyond the timeout and, for the cases a finished run cannot show, on
a request log built by hand.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sitssim.config.tenant_requests_config import TenantRequestsWorkload
from sitssim.fabric.messages import FC_CLASS_OF_KIND, KIND_TENANT_REQUEST, KIND_TENANT_RESPONSE
from sitssim.link.credit_link import FC_CLASSES
from sitssim.link.credits import FcClass
from sitssim.scenario import scenario_from_data
from sitssim.simulation import RunResult, simulate
from sitssim.workloads.tenant_requests import TENANT_COLUMNS, TenantRequestRun

TAGS = 4
TURNAROUND_NS = 100.0
DURATION_NS = 20_000.0
LOAD = 0.3
RESPONSE_BYTES = 256
# A tenant's classes are dealt over its VCs in order (P, NP, Cpl over [first, second]):
# A and B keep requests and completions apart, C has one VC for both.
QUOTA = {"A": [1, 1, 0, 0], "B": [0, 0, 1, 1], "C": [1, 0, 0, 0]}
EXPECTED_VC = {"A": {"NP": 1, "Cpl": 0}, "B": {"NP": 3, "Cpl": 2}, "C": {"NP": 0, "Cpl": 0}}


def star_data(workload: dict[str, Any], duration: str = "20us") -> dict[str, Any]:
    """g0, g1 and g2 on switch ``sw``; g2's link has a quarter of the others' lanes, so the
    requesters' bandwidths differ."""
    return {
        "name": "tenant_star",
        "seed": 3,
        "duration": duration,
        "topology": {
            "kind": "graph",
            "nodes": [
                {"id": "g0", "kind": "gpu"},
                {"id": "g1", "kind": "gpu"},
                {"id": "g2", "kind": "gpu"},
                {"id": "sw", "kind": "switch"},
            ],
            "edges": [
                {"a": "g0", "b": "sw"},
                {"a": "g1", "b": "sw"},
                {"a": "g2", "b": "sw", "link": "narrow"},
            ],
        },
        "links": {
            "default": {"rate": "64GT/s", "lanes": 16, "propagation": "5ns"},
            "narrow": {"rate": "64GT/s", "lanes": 4, "propagation": "5ns"},
        },
        "link_layer": {
            "credits": {
                "header_credits": 8,
                "data_credits": 128,
                "max_payload": "256B",
                "update_delay": "10ns",
            }
        },
        "switch": {"model": "input_queued", "vcs_per_port": 4, "vc_quota": {"table": QUOTA}},
        "tenants": [{"name": name} for name in QUOTA],
        "workloads": [workload],
    }


@pytest.fixture(scope="module")
def loaded() -> RunResult:
    """The star loaded beyond what four tags carry: requests queue for tags."""
    return simulate(
        scenario_from_data(
            star_data(
                {
                    "kind": "tenant_requests",
                    "name": "reads",
                    "load": LOAD,
                    "tags": TAGS,
                    "turnaround": f"{TURNAROUND_NS:g}ns",
                    "response_bytes": f"{RESPONSE_BYTES}B",
                }
            )
        )
    )


def requests_and_answers(run: RunResult) -> tuple[pd.DataFrame, pd.DataFrame]:
    m = run.tables["messages"]
    requests = m[m["kind"] == "tenant_request"].set_index("msg_id")
    responses = m[m["kind"] == "tenant_response"]
    return requests, responses


def test_the_run_finished_without_a_stall(loaded: RunResult) -> None:
    # Everything below reads a finished run: no observed deadlock, every request answered.
    deadlocks = loaded.tables["deadlocks"]
    assert not (deadlocks["kind"] == "observed").any()
    requests, responses = requests_and_answers(loaded)
    assert len(requests) == len(responses) > 3000


def test_requests_are_dealt_evenly_over_the_tenants(loaded: RunResult) -> None:
    requests, _ = requests_and_answers(loaded)
    # Dealt in turn at each requester: there its tenants' counts differ by at most one ...
    for src, mine in requests.groupby("src", observed=True):
        counts = mine["tenant"].value_counts()
        assert set(counts.index) == set(QUOTA), src
        assert counts.max() - counts.min() <= 1, (src, counts.to_dict())
    # ... so over the fabric by at most the number of requesters.
    offered = loaded.tables["tenants"].set_index("tenant")["offered"]
    assert offered.max() - offered.min() <= 3
    assert offered.sum() == len(requests)


def test_every_completion_answers_its_request_on_the_tenants_cpl_vc(loaded: RunResult) -> None:
    requests, responses = requests_and_answers(loaded)
    assert responses["parent"].is_unique
    asked = requests.loc[responses["parent"].to_numpy()]
    np.testing.assert_array_equal(responses["src"].astype(str), asked["dst"].astype(str))
    np.testing.assert_array_equal(responses["dst"].astype(str), asked["src"].astype(str))
    np.testing.assert_array_equal(responses["tenant"].astype(str), asked["tenant"].astype(str))
    np.testing.assert_array_equal(responses["workload"], asked["workload"])
    # Made after its request came in and the turnaround passed.
    made = responses["t_inject_ns"].to_numpy() - asked["t_deliver_ns"].to_numpy()
    assert made.min() >= TURNAROUND_NS - 1e-6
    assert (responses["bytes"] == RESPONSE_BYTES).all()
    assert FC_CLASSES[FC_CLASS_OF_KIND[KIND_TENANT_REQUEST]] is FcClass.NP
    assert FC_CLASSES[FC_CLASS_OF_KIND[KIND_TENANT_RESPONSE]] is FcClass.CPL
    for tenant, vcs in EXPECTED_VC.items():
        assert set(requests.loc[requests["tenant"] == tenant, "vc"]) == {vcs["NP"]}, tenant
        assert set(responses.loc[responses["tenant"] == tenant, "vc"]) == {vcs["Cpl"]}, tenant


def test_the_tags_bound_each_requesters_outstanding_requests_at_every_instant(
    loaded: RunResult,
) -> None:
    requests, responses = requests_and_answers(loaded)
    done = responses.set_index("parent")["t_deliver_ns"]
    for src, mine in requests.groupby("src", observed=True):
        issued = mine["t_inject_ns"].to_numpy()
        answered = done.loc[mine.index].to_numpy()
        # At a tie a completion frees its tag before the request it lets go is issued.
        times = np.concatenate([answered, issued])
        steps = np.concatenate([-np.ones(len(answered)), np.ones(len(issued))])
        order = np.lexsort((steps, times))
        outstanding = np.cumsum(steps[order])
        assert outstanding.max() == TAGS, src
        assert outstanding.min() >= 0, src


def test_load_is_the_completions_share_of_each_requesters_link_bandwidth(
    loaded: RunResult,
) -> None:
    requests, _ = requests_and_answers(loaded)
    bandwidth = loaded.fabric.injection_bytes_per_ns
    assert bandwidth["g0"] == pytest.approx(4 * bandwidth["g2"])
    for src, n in requests.groupby("src", observed=True).size().items():
        # Poisson arrivals: mean interval response_bytes / (load * bandwidth).
        expected = DURATION_NS * LOAD * bandwidth[str(src)] / RESPONSE_BYTES
        assert abs(n - expected) < 5 * math.sqrt(expected), (src, n, expected)
    total_gbps = loaded.tables["tenants"]["offered_gbps"].sum()
    fabric_gbps = 8 * LOAD * sum(bandwidth[g] for g in ("g0", "g1", "g2"))
    assert total_gbps == pytest.approx(fabric_gbps, rel=0.05)


def test_interval_is_the_mean_time_between_one_requesters_requests() -> None:
    interval = 50.0
    run = simulate(
        scenario_from_data(
            star_data({"kind": "tenant_requests", "interval": f"{interval:g}ns", "tags": 64})
        )
    )
    requests, _ = requests_and_answers(run)
    expected = DURATION_NS / interval
    counts = requests.groupby("src", observed=True).size()
    assert len(counts) == 3
    for src, n in counts.items():
        assert abs(n - expected) < 5 * math.sqrt(expected), (src, n)


def test_the_tenants_table_adds_up(loaded: RunResult) -> None:
    table = loaded.tables["tenants"]
    assert tuple(table.columns) == TENANT_COLUMNS
    assert list(table["tenant"]) == list(QUOTA)
    requests, responses = requests_and_answers(loaded)
    # A finished run issues everything it offered and hears every answer.
    assert (table["offered"] == table["issued"]).all()
    assert (table["on_time"] + table["ack_timeouts"] + table["pending"] == table["issued"]).all()
    assert (table["completed"] <= table["issued"]).all()
    np.testing.assert_allclose(
        table["ack_timeout_pct"], 100 * table["ack_timeouts"] / table["issued"]
    )
    latency = (responses.set_index("parent")["t_deliver_ns"] - requests["t_inject_ns"]).dropna()
    last_on_time = float(responses["t_deliver_ns"].max())
    delivered_ns = max(last_on_time, DURATION_NS)
    for row in table.itertuples():
        mine = requests["tenant"] == row.tenant
        assert row.issued == mine.sum()
        assert row.completed == (responses["tenant"] == row.tenant).sum()
        lat = latency.loc[requests.index[mine]]
        assert row.mean_latency_ns == pytest.approx(lat.mean())
        assert row.p99_latency_ns == pytest.approx(np.percentile(lat, 99))
        assert row.offered_gbps == pytest.approx(row.offered * RESPONSE_BYTES * 8 / DURATION_NS)
        assert row.delivered_gbps == pytest.approx(row.on_time * RESPONSE_BYTES * 8 / delivered_ns)
        assert row.throughput_loss_pct == pytest.approx(
            100 * (1 - row.delivered_gbps / row.offered_gbps)
        )


def test_completions_beyond_the_ack_timeout_are_counted_late() -> None:
    run = simulate(
        scenario_from_data(
            star_data(
                {
                    "kind": "tenant_requests",
                    "interval": "400ns",
                    "turnaround": "1500ns",
                    "ack_timeout": "1us",
                },
                duration="10us",
            )
        )
    )
    table = run.tables["tenants"]
    assert (table["issued"] > 0).all()
    assert (table["completed"] == table["issued"]).all()
    assert (table["ack_timeouts"] == table["issued"]).all()
    assert (table["on_time"] == 0).all() and (table["pending"] == 0).all()
    assert (table["ack_timeout_pct"] == 100.0).all()
    assert (table["delivered_gbps"] == 0.0).all()
    assert (table["throughput_loss_pct"] == 100.0).all()
    assert (table["mean_latency_ns"] > 1500.0).all()


def hand_run(issue: list[float], complete: list[float], tenant: list[int]) -> TenantRequestRun:
    """A run's request log written by hand: timeout 1 us, window 0 to 10 us."""
    wl = TenantRequestsWorkload.model_validate(
        {"kind": "tenant_requests", "interval": "100ns", "ack_timeout": "1us", "stop": "10us"}
    )
    # ``rows`` reads the log only; the transport is for the events it was filled by.
    run = TenantRequestRun(index=0, wl=wl, tenants=[0, 1], transport=SimpleNamespace())  # type: ignore[arg-type]
    run.stop_ns = 10_000.0
    run.t_issue, run.t_complete, run.tenant = issue, complete, tenant
    return run


def test_on_time_late_timed_out_pending_and_waiting_requests_are_told_apart() -> None:
    nan = math.nan
    run = hand_run(
        # on time (exactly at the timeout), late, never answered and older than the
        # timeout, never answered and younger, not issued (waiting for a tag); tenant 1:
        # never answered and exactly as old as the timeout.
        issue=[0.0, 0.0, 100.0, 1500.0, nan, 1000.0],
        complete=[1000.0, 1000.5, nan, nan, nan, nan],
        tenant=[0, 0, 0, 0, 0, 1],
    )
    rows = pd.DataFrame(run.rows(2000.0, ["x", "y"]), columns=list(TENANT_COLUMNS))
    x, y = rows.iloc[0], rows.iloc[1]
    assert (x["offered"], x["issued"], x["completed"]) == (5, 4, 2)
    assert (x["on_time"], x["ack_timeouts"], x["pending"]) == (1, 2, 1)
    assert x["ack_timeout_pct"] == 50.0
    assert x["mean_latency_ns"] == pytest.approx(1000.25)
    assert x["delivered_gbps"] == pytest.approx(1 * 256 * 8 / 10_000.0)
    assert x["offered_gbps"] == pytest.approx(5 * 256 * 8 / 10_000.0)
    assert (y["offered"], y["issued"], y["completed"]) == (1, 1, 0)
    assert (y["on_time"], y["ack_timeouts"], y["pending"]) == (0, 0, 1)
    assert math.isnan(y["mean_latency_ns"])
