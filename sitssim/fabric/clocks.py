"""Device clocks: every GPU, switch and root complex keeps its own time.

Theory of operation
-------------------
A device's free-running timestamp clock reads ``h(t)`` at true time ``t`` (ns):

    h(t) = θ0 + t + 1e-6 · ∫₀ᵗ f(u) du − Σ steps at or before t

``θ0`` is the power-up phase offset, ``f`` the frequency offset in ppm: a value drawn at
power-up plus its drift (none, linear, or a random walk). ``f`` is held piecewise constant
on a 1 µs grid up to the scenario's duration, so the phase is piecewise linear between
grid points and exact to evaluate, scalar or vectorised; after the duration the frequency
keeps its last value. A correct clock is strictly increasing: ``|f|`` stays far below
10⁶ ppm (the scenario bounds ppm and drift). A faulty device's clock may step back
(``clock_step_back``), which is the only way ``h`` can decrease.

Every timestamp a device *takes* carries the PHY clock uncertainty: a uniform error in
``[-u, +u]``, independent per stamp, drawn from the device's own random stream. The
default ``u`` of 2 ns is half a period of the 250 MHz REFCLK domain in which we assume the
timestamp counter runs.

Parameters are drawn per device from named streams (``component_rng(seed, "clock",
device)``), so adding a device or a workload never shifts another device's clock.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import numpy as np

from sitssim.config.clock_params import (
    ClockConfig,
    ClockStepBack,
    LinearDrift,
    RandomWalkDrift,
)
from sitssim.rng import component_rng

DRIFT_GRID_NS = 1000.0
PPM = 1e-6
NS_PER_MS = 1e6


class DeviceClock:
    """A device's free-running timestamp clock ``h(t)`` (see the module docstring)."""

    __slots__ = ("_grid_t", "_phase", "_step_at", "_step_sum", "end_ppm", "name", "offset0", "ppm0")

    def __init__(
        self,
        name: str,
        offset0_ns: float,
        ppm: np.ndarray,
        grid_ns: float = DRIFT_GRID_NS,
        steps: Iterable[tuple[float, float]] = (),
    ) -> None:
        """``ppm[j]`` is the frequency offset over ``[j·grid, (j+1)·grid)``; the last value
        holds for ever after. ``steps`` are ``(at_ns, step_ns)`` jumps back."""
        ppm = np.asarray(ppm, dtype=float)
        if ppm.ndim != 1 or len(ppm) == 0:
            raise ValueError("need at least one frequency value")
        if np.any(ppm <= -1e6):
            raise ValueError("a frequency offset of -1e6 ppm or below stops the clock")
        self.name = name
        self.offset0 = float(offset0_ns)
        self.ppm0 = float(ppm[0])
        self.end_ppm = float(ppm[-1])
        self._grid_t = np.arange(len(ppm) + 1, dtype=float) * grid_ns
        self._phase = np.concatenate(([0.0], np.cumsum(ppm * PPM * grid_ns)))
        ordered = sorted(steps)
        self._step_at = [at for at, _ in ordered]
        self._step_sum = np.cumsum([0.0] + [step for _, step in ordered]).tolist()

    def _drift_phase(self, t: np.ndarray) -> np.ndarray:
        inside = np.interp(t, self._grid_t, self._phase)
        beyond = self._phase[-1] + self.end_ppm * PPM * (t - self._grid_t[-1])
        return np.where(t > self._grid_t[-1], beyond, inside)

    def read(self, t_ns: float) -> float:
        """The clock's reading at true time ``t_ns``."""
        stepped = self._step_sum[bisect.bisect_right(self._step_at, t_ns)]
        return self.offset0 + t_ns + float(self._drift_phase(np.asarray(t_ns))) - stepped

    def read_many(self, t_ns: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`read`."""
        t = np.asarray(t_ns, dtype=float)
        stepped = np.asarray(self._step_sum)[np.searchsorted(self._step_at, t, side="right")]
        return self.offset0 + t + self._drift_phase(t) - stepped


def draw_frequency(config: ClockConfig, horizon_ns: float, rng: np.random.Generator) -> np.ndarray:
    """One device's frequency offset (ppm) on the drift grid up to ``horizon_ns``."""
    bound = config.ppm
    if config.ppm_distribution == "uniform":
        ppm0 = rng.uniform(-bound, bound)
    else:
        # Three standard deviations to the bound, truncated there: a tolerance is a limit.
        ppm0 = float(np.clip(rng.normal(0.0, bound / 3.0), -bound, bound))
    cells = max(1, int(np.ceil(horizon_ns / DRIFT_GRID_NS)))
    drift = config.drift
    if isinstance(drift, LinearDrift):
        mid_ms = (np.arange(cells) + 0.5) * DRIFT_GRID_NS / NS_PER_MS
        return ppm0 + drift.ppm_per_ms * mid_ms
    if isinstance(drift, RandomWalkDrift):
        sigma = drift.ppm_per_sqrt_ms * np.sqrt(DRIFT_GRID_NS / NS_PER_MS)
        walk = np.concatenate(([0.0], np.cumsum(rng.normal(0.0, sigma, cells - 1))))
        return ppm0 + walk
    return np.array([ppm0])


def build_clocks(
    config: ClockConfig,
    devices: Iterable[str],
    seed: int,
    horizon_ns: float,
    steps: Iterable[ClockStepBack] = (),
) -> dict[str, DeviceClock]:
    """Every device's clock, drawn from its own named stream; ``steps`` are faults."""
    faults: dict[str, list[tuple[float, float]]] = {}
    for fault in steps:
        faults.setdefault(fault.device, []).append((fault.at, fault.step))
    clocks = {}
    for name in devices:
        rng = component_rng(seed, "clock", name)
        offset0 = rng.uniform(-config.initial_offset, config.initial_offset)
        ppm = draw_frequency(config, horizon_ns, rng)
        clocks[name] = DeviceClock(name, offset0, ppm, steps=faults.get(name, ()))
    return clocks


class Stamper:
    """Takes a device's timestamps: each reading gets the PHY clock uncertainty ``±u``."""

    __slots__ = ("_rng", "uncertainty")

    def __init__(self, seed: int, device: str, uncertainty_ns: float) -> None:
        self._rng = component_rng(seed, "stamp", device)
        self.uncertainty = uncertainty_ns

    def stamp(self, reading_ns: float) -> float:
        if self.uncertainty == 0:
            return reading_ns
        return reading_ns + float(self._rng.uniform(-self.uncertainty, self.uncertainty))
