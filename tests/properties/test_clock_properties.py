"""Hypothesis checks of the clock clauses (link.ts_injection, fabric.skew_budget) and the
synchronisation they rest on. Each clause has one check whose draws fall on both sides of
it, the verdict against the rule applied by the test to the run's tables."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
import simpy
from hypothesis import event, given
from hypothesis import strategies as st

from sitssim.config.clock_params import MAX_PPM, ClockConfig, ClockStepBack
from sitssim.errors import Locator
from sitssim.fabric.clocks import build_clocks
from sitssim.fabric.routing import Router
from sitssim.fabric.topology import Channel, build_fabric
from sitssim.fabric.transport import Transport
from sitssim.link.flit import flit_time_ns
from sitssim.link.ordered_sets import ordered_sets_table
from sitssim.scenario import Scenario, scenario_from_data
from sitssim.spec.clock_clauses import max_allowed_skew
from sitssim.spec.registry import JUDGES, RunContext
from sitssim.stages.clocks import attach_clocks, clock_section
from sitssim.stages.schedule import scenario_schedule

HORIZON_NS = 200_000.0
ORDERED_SET_FLITS = 740
SPACING_NS = ORDERED_SET_FLITS * flit_time_ns(16, 64.0)


def _link(a: str, b: str) -> list[Channel]:
    return [
        Channel(i, src, dst, "default", 64.0, 16, 1, "flit256", 1.5, 118.0)
        for i, (src, dst) in enumerate(((a, b), (b, a)))
    ]


def _judge(table: pd.DataFrame) -> Any:
    """Run the link.ts_injection judge on an ordered-set table alone."""
    return JUDGES["link.ts_injection"](RunContext(tables={"ordered_sets": table}))


drifts = st.one_of(
    st.just({"kind": "none"}),
    st.builds(
        lambda r: {"kind": "linear", "ppm_per_ms": r},
        st.floats(-1000, 1000, allow_nan=False),
    ),
    st.builds(
        lambda s: {"kind": "random_walk", "ppm_per_sqrt_ms": s},
        st.floats(0, 1000, allow_nan=False),
    ),
)
clock_configs = st.builds(
    lambda ppm, dist, drift, offset_ns, u_ns: ClockConfig.model_validate(
        {
            "ppm": ppm,
            "ppm_distribution": dist,
            "drift": drift,
            "initial_offset": f"{offset_ns}ns",
            "phy_uncertainty": f"{u_ns}ns",
        }
    ),
    st.floats(0, MAX_PPM - 200, allow_nan=False),
    st.sampled_from(["uniform", "normal"]),
    drifts,
    st.floats(0, 1e6, allow_nan=False),
    # Up to a fifth of the ordered-set spacing: any PHY a timestamp could come from.
    st.floats(0, SPACING_NS / 5, allow_nan=False),
)


@given(config=clock_configs, seed=st.integers(0, 2**32 - 1))
def test_a_correct_devices_stamps_are_strictly_monotonic(config: ClockConfig, seed: int) -> None:
    """link.ts_injection: with any oscillator within the ppm bound, any drift the schema
    allows and any stamp uncertainty, every set is stamped and stamps strictly increase."""
    clocks = build_clocks(config, ["a", "b"], seed, HORIZON_NS)
    table = ordered_sets_table(
        _link("a", "b"),
        clocks,
        ORDERED_SET_FLITS,
        config.phy_uncertainty,
        HORIZON_NS,
        seed,
    )
    verdict = _judge(table)
    assert verdict.verdict == "pass", verdict.detail
    assert verdict.measured == 0


def _sets_stepping_back(config: ClockConfig, seed: int, at: float, step: float) -> pd.DataFrame:
    """The ordered sets of one link whose device ``a`` steps its clock back by ``step`` at
    ``at``."""
    fault = ClockStepBack.model_validate(
        {"kind": "clock_step_back", "device": "a", "at": f"{at}ns", "step": f"{step}ns"}
    )
    clocks = build_clocks(config, ["a", "b"], seed, HORIZON_NS, steps=[fault])
    u = config.phy_uncertainty
    return ordered_sets_table(_link("a", "b"), clocks, ORDERED_SET_FLITS, u, HORIZON_NS, seed)


@given(
    config=clock_configs,
    seed=st.integers(0, 2**32 - 1),
    at=st.floats(SPACING_NS, HORIZON_NS - 2 * SPACING_NS),
    extra=st.floats(0, 5 * SPACING_NS),
)
def test_the_clause_flags_a_clock_that_steps_back(
    config: ClockConfig, seed: int, at: float, extra: float
) -> None:
    """link.ts_injection: a step back larger than the ordered-set spacing (plus the stamp
    uncertainty) is one violation on each direction the faulty device sends on, at the step."""
    step = 1.05 * SPACING_NS + 2 * config.phy_uncertainty + extra
    table = _sets_stepping_back(config, seed, at, step)
    verdict = _judge(table)
    assert verdict.verdict == "fail"
    assert verdict.measured == 1
    (row,) = verdict.evidence[0].rows
    flagged = table.loc[table["os_id"] == row].iloc[0]
    assert flagged["direction"] == "a>b"
    sent = table.loc[table["direction"] == "a>b", "t_true_ns"]
    assert flagged["t_true_ns"] == sent[sent >= at].min()


@given(n=st.integers(1, 64))
def test_the_skew_budget_grows_by_one_step_per_gpu(n: int) -> None:
    """fabric.skew_budget: the spec's vectors, and a constant increment per added GPU."""
    assert (max_allowed_skew(1), max_allowed_skew(4), max_allowed_skew(8)) == (127.0, 164.5, 214.5)
    step = max_allowed_skew(2) - max_allowed_skew(1)
    assert max_allowed_skew(n + 1) - max_allowed_skew(n) == step > 0
    assert max_allowed_skew(n) >= max_allowed_skew(1)


def _pair_through_a_switch(ppm: float, offset_ns: float, u_ns: float, seed: int) -> dict:
    return {
        "name": "pair",
        "seed": seed,
        "duration": "16us",
        "topology": {
            "kind": "graph",
            "nodes": [
                {"id": "a", "kind": "gpu"},
                {"id": "s", "kind": "switch"},
                {"id": "b", "kind": "gpu"},
            ],
            "edges": [{"a": "a", "b": "s"}, {"a": "s", "b": "b"}],
        },
        "links": {"default": {"rate": "64GT/s", "lanes": 16, "length": "30cm"}},
        "clocks": {
            "ppm": ppm,
            "drift": {"kind": "none"},
            "initial_offset": f"{offset_ns}ns",
            "phy_uncertainty": f"{u_ns}ns",
            "sync_interval": "2us",
            "fence_interval": "2us",
        },
    }


def _clock_run(scenario: Scenario) -> dict[str, pd.DataFrame]:
    """Only the transport and the clock stage: no other layer's stage or judge."""
    fabric = build_fabric(scenario)
    nodes = sorted(fabric.graph)
    schedule = scenario_schedule(scenario, fabric, {n: i for i, n in enumerate(nodes)})
    transport = Transport(simpy.Environment(), fabric, Router(fabric), nodes, schedule)
    stage = attach_clocks(clock_section(scenario), fabric, transport, Locator(scenario.error))
    transport.run()
    return stage.tables(transport.env.now)


@given(
    ppm=st.floats(0, MAX_PPM, allow_nan=False),
    offset_ns=st.floats(100, 1e5, allow_nan=False),
    u_ns=st.floats(0, 5, allow_nan=False),
    seed=st.integers(0, 2**16),
)
def test_sync_converges_for_any_ppm_within_bounds(
    ppm: float, offset_ns: float, u_ns: float, seed: int
) -> None:
    """fabric.skew_budget rests on this: whatever the power-up offsets and frequency offsets
    (within the ppm bound), once every level has synchronised the residual is bounded by the
    stamp uncertainty and the drift over one exchange period, not by the initial offsets."""
    scenario = scenario_from_data(_pair_through_a_switch(ppm, offset_ns, u_ns, seed))
    tables = _clock_run(scenario)
    fences = tables["fences"]
    clocks = tables["clocks"].set_index("device")
    interval = scenario.clocks.sync_interval
    hops = int(clocks["depth"].max())
    rate_gap = (clocks["ppm"].max() - clocks["ppm"].min()) * 1e-6
    # Per hop: four stamps' uncertainty halved, plus drift over an interval and an exchange;
    # both ends of this fabric's hops arbitrate alike (GPU, switch, GPU) up to the switch's
    # own latency, which telescopes away at the far GPU.
    bound = hops * (2 * u_ns + rate_gap * (interval + 1_000.0)) + 1e-6
    assert len(fences) > 0
    residual = fences.loc[fences["gpu"] == "b", "residual_ns"].abs()
    assert residual.max() <= bound


def _stamp_violations(table: pd.DataFrame) -> pd.Series:
    """Ordered sets without a stamp, or stamped at or below the last stamp their direction
    carried before them: worked out here, without the judge's checker."""
    sets = table.sort_values(["channel", "seq"], kind="stable")
    last = sets.groupby("channel")["stamp_ns"].transform(lambda s: s.ffill().shift())
    return sets.loc[sets["stamp_ns"].isna() | (sets["stamp_ns"] <= last), "os_id"]


@given(
    config=clock_configs,
    seed=st.integers(0, 2**32 - 1),
    at=st.floats(SPACING_NS, HORIZON_NS - 2 * SPACING_NS),
    # Tenths of a spacing, drawn evenly: floats would crowd at the small end.
    step=st.integers(1, 24).map(lambda k: k * SPACING_NS / 10),
)
def test_ts_injection_verdict_counts_the_sets_out_of_order(
    config: ClockConfig, seed: int, at: float, step: float
) -> None:
    """link.ts_injection: the verdict fails exactly when some set is unstamped or stamped at
    or below its direction's previous stamp, counted by the test, and measures how many.

    A clock that steps back by 0.1-2.4 ordered-set spacings at a random time: a step
    shorter than the spacing (less drift and stamp noise) leaves the stamps rising. The
    ci profile draws 29 conforming clocks and 11 that break it."""
    table = _sets_stepping_back(config, seed, at, step)
    bad = _stamp_violations(table)
    verdict = _judge(table)
    assert verdict.verdict == ("fail" if len(bad) else "pass")
    assert verdict.measured == len(bad)
    if len(bad):
        assert set(verdict.evidence[0].rows) <= set(bad)
    event(verdict.verdict)


def _fan_out(far_ns: float, gpus: int, ppm: float, u_ns: float, seed: int) -> dict:
    """A root complex over one switch with ``gpus`` GPUs, the last behind a link whose
    flight takes ``far_ns`` (the others 5 ns), clocks synchronised hop by hop."""
    names = [f"g{i}" for i in range(gpus)]
    return {
        "name": "fan_out",
        "seed": seed,
        "duration": "16us",
        "topology": {
            "kind": "graph",
            "nodes": [{"id": "rc", "kind": "root_complex"}, {"id": "s", "kind": "switch"}]
            + [{"id": n, "kind": "gpu"} for n in names],
            "edges": [{"a": "rc", "b": "s"}]
            + [{"a": "s", "b": n} for n in names[:-1]]
            + [{"a": "s", "b": names[-1], "link": "far"}],
        },
        "links": {
            "default": {"rate": "64GT/s", "lanes": 16, "propagation": "5ns"},
            "far": {"rate": "64GT/s", "lanes": 16, "propagation": f"{far_ns}ns"},
        },
        "clocks": {
            "ppm": ppm,
            "drift": {"kind": "none"},
            "initial_offset": "500ns",
            "phy_uncertainty": f"{u_ns}ns",
            "sync_interval": "2us",
            "fence_interval": "2us",
        },
    }


@given(
    far_ns=st.floats(5, 300),
    gpus=st.integers(2, 3),
    ppm=st.floats(0, 100),
    u_ns=st.floats(0, 5),
    seed=st.integers(0, 2**16),
)
def test_skew_budget_verdict_matches_the_spread_the_test_works_out(
    far_ns: float, gpus: int, ppm: float, u_ns: float, seed: int
) -> None:
    """fabric.skew_budget: the verdict is the worst fence's skew (the spread of its local
    arrival times over every GPU plus its largest residual clock offset, worked out here
    from the fences table) against 85 + (n - 1)·12.5 + 42 ns, written out here from SPEC.

    One GPU's link flies 5-300 ns where the others' fly 5: the fence reaches it that much
    later, about half the time more than the 139.5 / 152 ns budget of 2 / 3 GPUs. The ci
    profile draws 22 conforming fabrics and 18 over the budget."""
    tables = _clock_run(scenario_from_data(_fan_out(far_ns, gpus, ppm, u_ns, seed)))
    fences = tables["fences"]
    per_fence = fences.groupby("fence")
    skew = (
        per_fence["t_arrive_local_ns"].max()
        - per_fence["t_arrive_local_ns"].min()
        + per_fence["residual_ns"].agg(lambda r: r.abs().max())
    )[per_fence.size() == gpus]
    budget = 85.0 + (gpus - 1) * 12.5 + 42.0
    nodes = pd.DataFrame({"kind": ["root_complex", "switch"] + ["gpu"] * gpus})
    verdict = JUDGES["fabric.skew_budget"](RunContext(tables={"fences": fences, "nodes": nodes}))
    assert verdict.limit == budget
    assert verdict.measured == pytest.approx(skew.max(), abs=1e-9)
    assert verdict.verdict == ("fail" if (skew > budget).any() else "pass")
    event(verdict.verdict)
