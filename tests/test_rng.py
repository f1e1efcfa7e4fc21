"""The per-component random streams: their derivation is part of every golden report."""

from __future__ import annotations

import numpy as np

from sitssim.rng import component_rng


def test_a_component_stream_is_pinned_to_its_seed_and_name() -> None:
    # Any change to the derivation (separator, hash, seed sequence) moves these draws,
    # and with them every random figure of every shipped scenario.
    draws = component_rng(7, "workload", "#0", "source", 3).random(3)
    expected = [0.4413544255666405, 0.6659043164675217, 0.611490691363453]
    np.testing.assert_array_equal(draws, expected)


def test_streams_differ_by_seed_and_by_name() -> None:
    base = component_rng(1, "phy", "a").random(4)
    assert not np.array_equal(base, component_rng(2, "phy", "a").random(4))
    assert not np.array_equal(base, component_rng(1, "phy", "b").random(4))


def test_a_stream_does_not_depend_on_other_components() -> None:
    alone = component_rng(5, "link", 0).random(4)
    component_rng(5, "link", 1).random(1000)
    np.testing.assert_array_equal(component_rng(5, "link", 0).random(4), alone)
