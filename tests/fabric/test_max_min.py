"""Max-min fair rates by progressive filling (sitssim.fabric.max_min)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from sitssim.fabric.max_min import max_min_rates


def test_a_flow_alone_gets_its_narrowest_channel() -> None:
    assert max_min_rates([(0, 1, 2)], [10.0, 4.0, 7.0]) == [4.0]


def test_what_a_bottlenecked_flow_leaves_goes_to_the_others() -> None:
    # Channel 0 (capacity 1) is shared by flows 0 and 1, which get 0.5 each; channel 1
    # (capacity 10) carries flow 1 and flow 2, which takes the 9.5 flow 1 cannot use.
    assert max_min_rates([(0,), (0, 1), (1,)], [1.0, 10.0]) == [0.5, 0.5, 9.5]


def test_the_classic_line_network() -> None:
    # Bertsekas & Gallager's example: one long flow over three unit links, one short
    # flow on each link; everybody gets a half.
    rates = max_min_rates([(0, 1, 2), (0,), (1,), (2,)], [1.0, 1.0, 1.0])
    assert rates == [0.5, 0.5, 0.5, 0.5]


def test_a_channel_in_an_outage_stops_its_flows_only() -> None:
    assert max_min_rates([(0, 1), (1,)], [0.0, 8.0]) == [0.0, 8.0]


def test_a_flow_crossing_no_channel_is_unlimited() -> None:
    assert max_min_rates([()], [1.0]) == [math.inf]


flows_and_capacities = st.integers(1, 6).flatmap(
    lambda n_links: st.tuples(
        st.lists(
            st.lists(st.integers(0, n_links - 1), min_size=1, max_size=n_links, unique=True),
            min_size=1,
            max_size=12,
        ),
        st.lists(
            st.sampled_from([0.0, 1.0, 2.5, 4.0, 10.0, 64.0]),
            min_size=n_links,
            max_size=n_links,
        ),
    )
)


@settings(max_examples=300, deadline=None)
@given(flows_and_capacities)
def test_the_rates_are_feasible_and_every_flow_has_a_bottleneck(case) -> None:
    """Max-min fairness, by its characterisation: the rates fit every channel, and each
    flow crosses a channel that is full and on which no flow gets more than it (its
    bottleneck). An allocation that splits capacity equally, ignoring what bottlenecked
    flows leave, or that leaves a channel under-used, breaks the second half."""
    paths, capacity = case
    rates = max_min_rates(paths, capacity)
    load = [0.0] * len(capacity)
    for path, rate in zip(paths, rates, strict=True):
        for c in path:
            load[c] += rate
    tol = 1e-9
    for c, cap in enumerate(capacity):
        assert load[c] <= cap * (1 + tol) + tol
    for path, rate in zip(paths, rates, strict=True):
        assert any(
            load[c] >= capacity[c] * (1 - tol) - tol
            and all(
                r <= rate * (1 + tol) + tol for p, r in zip(paths, rates, strict=True) if c in p
            )
            for c in path
        ), (path, rate, rates)
