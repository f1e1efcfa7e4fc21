"""The input-queued switch's recording and the tables replayed from it (``switch/tables.py``).

Hand-made visits pin the occupancy series and the time-weighted mean; the star fabrics
of ``test_input_queued.py`` check the tables against what the switch and its ports saw:
peaks, grants against messages crossed, head-of-line contention, credit stalls.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import simpy
from switch.test_input_queued import (
    CELL,
    TWO_VCS,
    InPort,
    OutPort,
    Routing,
    arrive_now,
    backlog,
    inject_tenants,
    one_path,
    star,
    switch_of,
)

from sitssim.fabric.ports import CreditedPort
from sitssim.fabric.transport import Transport
from sitssim.link.credit_link import N_CLASSES, CreditLink
from sitssim.scenario import SwitchParams
from sitssim.switch.input_queued import input_queued_model
from sitssim.switch.tables import (
    ARBITRATION_COLUMNS,
    MANAGEMENT,
    OCCUPANCY_COLUMNS,
    VC_COLUMNS,
    MessageColumns,
    occupancy,
    switch_tables,
    time_weighted_mean,
    visits,
)


def tables_of(t: Transport, tenants: tuple[str, ...] = ("default",)) -> dict[str, pd.DataFrame]:
    """The switch tables of transport ``t``'s run, its credit stalls as the credits stage
    tabulates them."""
    rows = [
        (p.channel, pool // N_CLASSES, start, end)
        for p in t.ports
        if isinstance(p, CreditedPort)
        for pool, start, end, _, _ in p.credit.stalls
    ]
    credits = pd.DataFrame(rows, columns=["link_id", "vc", "start_ns", "end_ns"])
    columns = MessageColumns(
        np.asarray(t.vc), np.asarray(t.tenant), np.asarray(t.size), tenant_names=tenants
    )
    return switch_tables([switch_of(t)], t.fabric, columns, credits, t.env.now)


# --- the replay, on hand-made visits ------------------------------------------------------


def test_the_occupancy_series_and_its_time_weighted_mean_on_a_hand_made_case() -> None:
    # Input 0, VC 0: message 0 in at 0, out at 10; message 1 in at 10, out at 30. At 10
    # the arrival comes first: 2 held for an instant, 1 after it. Over [0, 40]: 1 held
    # for 30 ns, so the mean is 0.75 (the instant at 2 weighs nothing).
    visited = pd.DataFrame(
        {
            "input": [0, 0, 1],
            "msg": [0, 1, 2],
            "t_in": [0.0, 10.0, 5.0],
            "t_out": [10.0, 30.0, np.nan],
            "output": [0, 0, -1],
        }
    )
    vc = np.array([0, 0, 1])
    series = occupancy(visited, vc)
    assert list(series.columns) == ["input", "vc", "t_ns", "occupancy", "instant_peak"]
    lane = series[(series["input"] == 0) & (series["vc"] == 0)]
    assert lane["t_ns"].tolist() == [0.0, 10.0, 30.0]
    assert lane["occupancy"].tolist() == [1, 1, 0]
    assert lane["instant_peak"].tolist() == [1, 2, 0]
    # Message 2 (VC 1 of input 1) never left: its buffer holds it to the end.
    other = series[series["input"] == 1]
    assert other[["vc", "t_ns", "occupancy"]].values.tolist() == [[1, 5.0, 1]]
    mean = time_weighted_mean(series, 40.0)
    assert mean[(0, 0)] == pytest.approx(0.75)
    assert mean[(1, 1)] == pytest.approx(35.0 / 40.0)


def test_the_log_and_the_waiting_messages_of_a_switch_with_stand_in_ports() -> None:
    env = simpy.Environment()
    out = OutPort(env, busy=10.0)
    model = input_queued_model(SwitchParams(model="input_queued", input_buffer=4))
    sw = model(3, "sw", 40.0, Routing(out), [9, 9, 9], lambda _m: None, env)  # type: ignore[arg-type]
    in_a, in_b = InPort(), InPort()
    arrive_now(env, sw, [(0, in_a), (1, in_b), (2, in_a)])
    env.run(until=15.0)
    # Two crossings so far (at 0 and 10), message 2 still waiting at input 0.
    assert sw.log == [0.0, 0.0, 0, 0, 0, 0.0, 10.0, 1, 1, 0]
    assert sw.waiting() == [(0.0, 0, 2)]
    visited = visits(sw)
    assert visited["msg"].tolist() == [0, 1, 2]
    assert visited["output"].tolist() == [0, 0, -1]
    assert np.isnan(visited["t_out"].iloc[2])
    series = occupancy(visited, np.zeros(3, dtype=np.int64))
    lane = series[series["input"] == 0]
    # Two in at 0, one out at once; the second stays.
    assert lane[["t_ns", "occupancy", "instant_peak"]].values.tolist() == [[0.0, 1, 2]]
    assert series.groupby("input")["instant_peak"].max().tolist() == sw.peak
    # Both inputs asked at 0 and at 10 (message 2 then headed input 0): two grants, two
    # requests unmatched for want of the one output.
    assert (sw.allocations, sw.requests, sw.refused) == (2, 4, 0)


class ByMessage:
    """Routes each message to the output port its entry names."""

    def __init__(self, outs: dict[int, OutPort]) -> None:
        self.outs = outs

    def route(self, node: object, msg: int, in_port: object) -> OutPort:
        return self.outs[msg]


def test_a_head_for_a_busy_output_is_no_request() -> None:
    # Input a sends messages 0-2 to output A (busy 10 ns each), input b 3-4 to B (25 ns).
    # Allocations at 0 (both ask), 10 and 20 (A is free; b's head waits for B, busy, and
    # does not ask) and 25 (b asks): five requests, five grants, none unmatched.
    env = simpy.Environment()
    out_a, out_b = OutPort(env, busy=10.0), OutPort(env, busy=25.0)
    routing = ByMessage({0: out_a, 1: out_a, 2: out_a, 3: out_b, 4: out_b})
    model = input_queued_model(SwitchParams(model="input_queued", input_buffer=4))
    sw = model(5, "sw", 40.0, routing, [9] * 5, lambda _m: None, env)  # type: ignore[arg-type]
    in_a, in_b = InPort(), InPort()
    arrive_now(env, sw, [(0, in_a), (1, in_a), (2, in_a), (3, in_b), (4, in_b)])
    env.run()
    assert [t for _, _, t in out_a.sent] == [0.0, 10.0, 20.0]
    assert [t for _, _, t in out_b.sent] == [0.0, 25.0]
    assert (sw.allocations, sw.requests, sw.refused) == (4, 5, 0)


# --- the tables of star fabrics ------------------------------------------------------------


@pytest.mark.parametrize("switch", [{}, {"voq": True, "allocator": "islip"}])
def test_the_tables_of_a_backlogged_star_agree_with_the_switch(switch: dict[str, object]) -> None:
    n, cells = 4, 300
    t = star(n, input_buffer=1000, **switch)
    backlog(t, n, cells, seed=3)
    t.run()
    sw = switch_of(t)
    tables = tables_of(t)
    vc = tables["vc"]
    assert list(vc.columns) == VC_COLUMNS
    # One row per input (VC 0), every cell counted once, its bytes with it.
    assert vc["port"].tolist() == [f"s{i}" for i in range(n)]
    assert vc["messages"].tolist() == [cells] * n
    assert (vc["bytes"] == cells * CELL).all()
    assert vc["tenants"].tolist() == ["default"] * n
    assert (vc["waiting_at_end"] == 0).all()
    # Peaks: the table's, the series' maxima and the switch's own counter agree.
    by_input = dict(zip([f"s{i}" for i in range(n)], sw.peak, strict=True))
    assert dict(zip(vc["port"], vc["peak_occupancy"], strict=True)) == by_input
    series = tables["vc_occupancy"]
    assert list(series.columns) == OCCUPANCY_COLUMNS
    assert series.groupby("port")["instant_peak"].max().to_dict() == by_input
    assert max(sw.peak) > 10
    # Little's law, exactly: the occupancy's integral over the run is the cells' total
    # wait in the buffer (a mean computed with a wrong interval would break it).
    span = t.env.now
    np.testing.assert_allclose(
        vc["mean_occupancy"] * span, vc["messages"] * vc["mean_wait_ns"], rtol=1e-9
    )
    # Each series ends empty once the run has drained.
    assert (series.groupby("port")["occupancy"].last() == 0).all()
    arbitration = tables["switch_arbitration"]
    assert list(arbitration.columns) == ARBITRATION_COLUMNS
    row = arbitration.iloc[0]
    crossed = sum(p.messages for p in sw.out_ports)
    assert row["grants"] == crossed == n * cells
    assert row["grants"] == tables["switch_crossings"]["crossings"].sum()
    # Unmatched requests are what the counters leave beyond the grants: never negative
    # (requests counted short, or grants counted twice, would make them so).
    assert row["unmatched_output"] >= 0
    assert row["unmatched_credit"] == 0
    assert row["allocations"] == sw.allocations
    assert row["mean_matching"] == pytest.approx(row["grants"] / row["allocations"])
    assert 1 < row["mean_matching"] <= n
    assert row["unmatched_output"] > 0
    assert row["peak_occupancy"] == max(sw.peak)
    # Uniform random traffic: every input has a fair share of every output.
    assert 0.9 < row["jain_min"] <= row["jain_mean"] <= 1.0
    shares = tables["switch_crossings"].groupby("output")["output_share"].sum()
    np.testing.assert_allclose(shares, 1.0)
    if not switch:
        # Head-of-line blocking: FIFO heads contending for one output go unmatched, and a
        # matching (one per cell time, the outputs freeing together) fills near Karol's
        # 0.655 of the four outputs, less the drain at the end.
        assert row["unmatched_output"] > 0.25 * row["requests"]
        assert 0.55 < row["mean_matching"] / n < 0.7


def test_a_lone_message_is_granted_at_once_and_leaves_no_unmatched_request() -> None:
    t = star(2)
    t.inject(t.node_id["s0"], t.node_id["r1"], CELL, 0, 0, 0)
    t.run()
    tables = tables_of(t)
    row = tables["switch_arbitration"].iloc[0]
    assert (row["allocations"], row["requests"], row["grants"]) == (1, 1, 1)
    assert (row["unmatched_output"], row["unmatched_credit"]) == (0, 0)
    assert row["jain_min"] == row["jain_mean"] == 1.0
    series = tables["vc_occupancy"]
    # In and across at one instant: held for no time, yet seen at that instant.
    assert series[["port", "occupancy", "instant_peak"]].values.tolist() == [["s0", 0, 1]]
    vc = tables["vc"].set_index("port")
    assert vc.loc["s0", "mean_occupancy"] == 0.0
    assert vc.loc["s0", "max_wait_ns"] == 0.0
    assert tables["switch_crossings"][["input", "output", "crossings"]].values.tolist() == [
        ["s0", "r1", 1]
    ]


def test_credit_stalls_at_an_output_are_its_ports_and_requests_go_unmatched_for_credit() -> None:
    # Two header credits on the switch->receiver channel: the head waits for credit.
    def downstream_only(c):  # type: ignore[no-untyped-def]
        return CreditLink(c.id, 2 if c.src == "sw" else 1000, 64_000, 100.0, CELL)

    t = star(1, credits=downstream_only)
    backlog(t, 1, 40, seed=0)
    t.run()
    tables = tables_of(t)
    channel = t.fabric.channel_index[("sw", "r0")]
    port = t.ports[channel]
    assert isinstance(port, CreditedPort)
    stalls = port.credit.stalls
    vc = tables["vc"].set_index("port")
    # The stalls belong to the port towards r0, which took nothing in: a row of its own.
    assert vc.loc["r0", "credit_stalls"] == len(stalls) >= 10
    assert vc.loc["r0", "credit_stall_ns"] == pytest.approx(sum(e - s for _, s, e, _, _ in stalls))
    assert vc.loc["r0", "messages"] == 0 and vc.loc["r0", "link"] == "r0>sw"
    assert vc.loc["s0", "credit_stalls"] == 0 and vc.loc["s0", "messages"] == 40
    row = tables["switch_arbitration"].iloc[0]
    assert row["grants"] == 40
    assert row["unmatched_credit"] >= 10
    # One input only: nothing to lose to another input, so every request not granted was
    # refused for credit (a request counted for a busy output would show here).
    assert row["unmatched_output"] == 0


def test_each_vc_has_its_row_its_tenants_and_its_own_stalls() -> None:
    # Tenant A on VC 0, B on VC 1, one header credit per (VC, class) at the output.
    t = one_path(2, 1, TWO_VCS)
    inject_tenants(t, [k % 2 for k in range(40)])
    t.run()
    tables = tables_of(t, tenants=("A", "B"))
    vc = tables["vc"]
    s0 = vc[vc["port"] == "s0"]
    assert s0[["vc", "tenants", "messages"]].values.tolist() == [[0, "A", 20], [1, "B", 20]]
    per_tenant = tables["vc_tenants"]
    assert per_tenant[["port", "vc", "tenant", "messages"]].values.tolist() == [
        ["s0", 0, "A", 20],
        ["s0", 1, "B", 20],
    ]
    # Stalls at the output towards r0, split by VC as the credit link recorded them.
    port = t.ports[t.fabric.channel_index[("sw", "r0")]]
    assert isinstance(port, CreditedPort)
    expected = pd.Series([pool // N_CLASSES for pool, *_ in port.credit.stalls]).value_counts()
    r0 = vc[vc["port"] == "r0"].set_index("vc")["credit_stalls"]
    assert r0.to_dict() == expected.sort_index().to_dict()
    assert set(r0.index) == {0, 1}
    series = tables["vc_occupancy"]
    assert set(zip(series["port"], series["vc"], strict=True)) == {("s0", 0), ("s0", 1)}


def test_the_switchs_own_traffic_enters_by_the_management_input() -> None:
    t = star(2)
    t.inject(t.node_id["sw"], t.node_id["r0"], CELL, 0, 0, 0)
    t.inject(t.node_id["s1"], t.node_id["r0"], CELL, 0, 0, 0)
    t.run()
    vc = tables_of(t)["vc"]
    assert sorted(vc["port"]) == sorted([MANAGEMENT, "s1"])
    assert vc.set_index("port").loc[MANAGEMENT, "link"] == ""


def test_a_switch_that_carried_nothing_has_empty_tables_with_their_columns() -> None:
    t = star(2)
    t.run()
    tables = tables_of(t)
    assert set(tables) == {
        "vc",
        "vc_tenants",
        "vc_occupancy",
        "switch_arbitration",
        "switch_crossings",
    }
    for name in ("vc", "vc_tenants", "vc_occupancy", "switch_crossings"):
        assert tables[name].empty, name
    assert list(tables["vc_occupancy"].columns) == OCCUPANCY_COLUMNS
    row = tables["switch_arbitration"].iloc[0]
    assert (row["allocations"], row["grants"], row["mean_matching"]) == (0, 0, 0.0)
