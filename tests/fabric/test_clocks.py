"""Device clocks: frequency offset, drift, power-up offset, steps, stamps."""

from __future__ import annotations

import numpy as np
import pytest

from sitssim.config.clock_params import (
    ClockConfig,
    ClockStepBack,
    LinearDrift,
    NoDrift,
    RandomWalkDrift,
)
from sitssim.fabric.clocks import DRIFT_GRID_NS, DeviceClock, Stamper, build_clocks

MS = 1e6


def test_a_constant_frequency_offset_is_the_clocks_slope() -> None:
    clock = DeviceClock("d", offset0_ns=-40.0, ppm=[125.0])
    t = np.array([0.0, 1e3, 1e5, 3e6])
    # (1 + 125 ppm) per ns, from the power-up offset; also beyond the drift grid.
    np.testing.assert_allclose(clock.read_many(t), -40.0 + t * (1 + 125e-6), rtol=1e-15)
    assert clock.read(1e5) == pytest.approx(-40.0 + 1e5 * (1 + 125e-6), rel=1e-15)


def test_scalar_and_vector_reads_agree() -> None:
    rng = np.random.default_rng(0)
    ppm = rng.normal(0, 50, 40)
    clock = DeviceClock("d", 3.0, ppm, steps=[(12_345.0, 400.0), (30_000.0, 10.0)])
    t = np.sort(rng.uniform(0, 60_000, 200))
    np.testing.assert_allclose(clock.read_many(t), [clock.read(x) for x in t], rtol=0, atol=1e-9)


def test_phase_integrates_a_piecewise_frequency() -> None:
    clock = DeviceClock("d", 0.0, [100.0, -100.0, 0.0])
    grid = DRIFT_GRID_NS
    # +100 ppm over the first cell, -100 ppm over the second, nothing after.
    assert clock.read(grid) - grid == pytest.approx(100e-6 * grid)
    assert clock.read(2 * grid) - 2 * grid == pytest.approx(0.0, abs=1e-12)
    assert clock.read(10 * grid) - 10 * grid == pytest.approx(0.0, abs=1e-12)
    assert clock.read(1.5 * grid) - 1.5 * grid == pytest.approx(50e-6 * grid)


def test_a_step_back_lowers_every_later_reading_by_the_step() -> None:
    plain = DeviceClock("d", 0.0, [20.0])
    stepped = DeviceClock("d", 0.0, [20.0], steps=[(5_000.0, 700.0)])
    t = np.linspace(0, 10_000, 101)
    diff = plain.read_many(t) - stepped.read_many(t)
    np.testing.assert_allclose(diff, np.where(t >= 5_000.0, 700.0, 0.0))
    assert stepped.read(5_000.0) < stepped.read(4_999.0)


def test_a_correct_clock_is_strictly_increasing() -> None:
    clock = DeviceClock("d", 0.0, np.random.default_rng(1).uniform(-9_000, 9_000, 100))
    t = np.linspace(0, 150_000, 20_001)
    assert np.all(np.diff(clock.read_many(t)) > 0)


def test_a_frequency_that_stops_the_clock_is_refused() -> None:
    with pytest.raises(ValueError, match="stops the clock"):
        DeviceClock("d", 0.0, [-1e6])


def _config(**fields: object) -> ClockConfig:
    return ClockConfig(**fields)


def test_draws_stay_within_the_configured_bounds() -> None:
    devices = [f"gpu{i}" for i in range(200)]
    for distribution in ("uniform", "normal"):
        config = _config(
            ppm=80.0,
            initial_offset="500ns",
            ppm_distribution=distribution,
            drift=NoDrift(kind="none"),
        )
        clocks = build_clocks(config, devices, seed=4, horizon_ns=1e4)
        ppm = np.array([c.ppm0 for c in clocks.values()])
        offset = np.array([c.offset0 for c in clocks.values()])
        assert np.abs(ppm).max() <= 80.0
        assert np.abs(offset).max() <= 500.0
        # The draws really spread over the range, both signs.
        assert ppm.min() < -20.0 < 20.0 < ppm.max()
        assert offset.min() < -100.0 < 100.0 < offset.max()
    uniform = build_clocks(_config(ppm=80.0), devices, 4, 1e4)
    normal = build_clocks(_config(ppm=80.0, ppm_distribution="normal"), devices, 4, 1e4)
    # Normal draws put 3 sigma at the bound: they sit closer to zero than uniform ones.
    spread = {
        name: np.std([c.ppm0 for c in group.values()])
        for name, group in (("uniform", uniform), ("normal", normal))
    }
    assert spread["normal"] < spread["uniform"]


def test_each_device_has_its_own_stream() -> None:
    config = _config()
    few = build_clocks(config, ["gpu0", "gpu1"], seed=9, horizon_ns=1e5)
    more = build_clocks(config, ["gpu0", "sw1.0", "gpu1", "rc0"], seed=9, horizon_ns=1e5)
    t = np.linspace(0, 1e5, 50)
    for name in ("gpu0", "gpu1"):
        np.testing.assert_array_equal(few[name].read_many(t), more[name].read_many(t))
    assert few["gpu0"].ppm0 != few["gpu1"].ppm0
    other_seed = build_clocks(config, ["gpu0"], seed=10, horizon_ns=1e5)
    assert other_seed["gpu0"].ppm0 != few["gpu0"].ppm0


def test_linear_drift_changes_the_frequency_at_its_rate() -> None:
    config = _config(
        ppm=0.0, initial_offset="0ns", drift=LinearDrift(kind="linear", ppm_per_ms=2.0)
    )
    clock = build_clocks(config, ["d"], seed=0, horizon_ns=MS)["d"]
    # Frequency offset over a short window at t: (h(t + w) - h(t)) / w - 1, in ppm.
    w = 10 * DRIFT_GRID_NS
    rate = [(clock.read(t + w) - clock.read(t)) / w - 1 for t in (0.0, 0.5 * MS - w)]
    assert (rate[1] - rate[0]) * 1e6 == pytest.approx(2.0 * (0.5 * MS - w) / MS, rel=0.03)
    # Over the whole millisecond the phase is the integral of a linear ramp: rate · T² / 2.
    assert clock.read(MS) - MS == pytest.approx(2.0e-6 * MS / 2, rel=1e-3)


def test_random_walk_drift_grows_like_the_square_root_of_time() -> None:
    sigma = 3.0
    config = _config(
        ppm=0.0,
        initial_offset="0ns",
        drift=RandomWalkDrift(kind="random_walk", ppm_per_sqrt_ms=sigma),
    )
    devices = [f"d{i}" for i in range(400)]
    clocks = build_clocks(config, devices, seed=2, horizon_ns=MS)
    w = DRIFT_GRID_NS
    # Frequency change between the start and t = 0.25 ms and 1 ms (in ppm), across devices.
    change = {
        t: np.array([(c.read(t) - c.read(t - w)) / w - 1 - c.ppm0 * 1e-6 for c in clocks.values()])
        * 1e6
        for t in (0.25 * MS, MS)
    }
    std = {t: change[t].std() for t in change}
    assert std[MS] == pytest.approx(sigma, rel=0.15)
    assert std[MS] / std[0.25 * MS] == pytest.approx(2.0, rel=0.2)


def test_clock_step_faults_reach_only_their_device() -> None:
    config = _config()
    step = ClockStepBack(kind="clock_step_back", device="gpu1", at="2us", step="900ns")
    clean = build_clocks(config, ["gpu0", "gpu1"], seed=1, horizon_ns=1e4)
    faulty = build_clocks(config, ["gpu0", "gpu1"], seed=1, horizon_ns=1e4, steps=[step])
    assert faulty["gpu0"].read(5_000.0) == clean["gpu0"].read(5_000.0)
    assert clean["gpu1"].read(5_000.0) - faulty["gpu1"].read(5_000.0) == pytest.approx(900.0)
    assert faulty["gpu1"].read(1_999.0) == clean["gpu1"].read(1_999.0)


def test_stamps_carry_a_bounded_uncertainty_from_the_devices_stream() -> None:
    stamper = Stamper(seed=5, device="gpu0", uncertainty_ns=2.0)
    errors = np.array([stamper.stamp(1000.0) - 1000.0 for _ in range(2000)])
    assert np.abs(errors).max() <= 2.0
    assert errors.min() < -1.8 and errors.max() > 1.8
    again = Stamper(seed=5, device="gpu0", uncertainty_ns=2.0)
    assert again.stamp(1000.0) - 1000.0 == errors[0]
    assert Stamper(seed=5, device="gpu0", uncertainty_ns=0.0).stamp(7.0) == 7.0
