"""Adaptive per-layer FP8 quantisation of layer outputs (L5, clause `engine.fp8_overflow`).

Theory of operation
-------------------
Each layer's output is cast to one of the two OCP FP8 formats. Their limits come from
`ml_dtypes.finfo`, never from literals: E4M3 (3 mantissa bits, largest finite value
448) is twice as precise, E5M2 (2 mantissa bits, largest 57344) covers a far wider
range in both directions.

The policy divides the output by a static per-tensor `scale` (a deployment parameter,
1.0 = direct cast) and picks the format from the output's standard deviation σ alone,
as the source's adaptive scheme does:

    E4M3  if  smallest_normal(E4M3) ≤ σ/scale  and  k · σ/scale ≤ max(E4M3)
    E5M2  otherwise

i.e. E4M3 whenever its normal range spans the bulk of a Gaussian, from σ up to k·σ
(k = `k_sigma`, default 6: a Gaussian exceeds 6σ with probability 2·10⁻⁹). The rule
assumes light tails. A heavy-tailed output (Student-t with small ν) has the same σ
but far more mass beyond k·σ, so it can be given E4M3 and still exceed 448: the
mechanism behind the clause's failure witness.

Quantisation counts the values beyond the chosen format's maximum *before* touching
them, then saturates them to ±max explicitly (ml_dtypes would turn an E4M3 overflow
into NaN and an E5M2 one into inf), casts, and measures the relative L2 error.
Synthetic activations come from per-layer `ActivationSpec`s (Gaussian or Student-t),
drawn with an explicit `numpy.random.Generator`, or from statistics in a `.npz`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

import ml_dtypes
import numpy as np

FormatName = Literal["E4M3", "E5M2"]


@dataclass(frozen=True)
class Fp8Format:
    """One FP8 format with its limits as `ml_dtypes` reports them."""

    name: FormatName
    dtype: np.dtype
    max: float
    smallest_normal: float

    @classmethod
    def of(cls, name: FormatName, scalar: type) -> Fp8Format:
        info = ml_dtypes.finfo(scalar)
        return cls(name, np.dtype(scalar), float(info.max), float(info.smallest_normal))


FP8_FORMATS: Mapping[str, Fp8Format] = MappingProxyType(
    {
        "E4M3": Fp8Format.of("E4M3", ml_dtypes.float8_e4m3fn),
        "E5M2": Fp8Format.of("E5M2", ml_dtypes.float8_e5m2),
    }
)


@dataclass(frozen=True)
class Fp8Policy:
    """The std-based format rule: `k_sigma` standard deviations must fit the format."""

    k_sigma: float = 6.0
    scale: float = 1.0

    def __post_init__(self) -> None:
        for name in ("k_sigma", "scale"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"fp8 policy {name!r} must be a positive number, got {value!r}")

    def choose(self, std: float) -> Fp8Format:
        """Format for an output whose standard deviation is `std` (before scaling)."""
        e4m3 = FP8_FORMATS["E4M3"]
        sigma = std / self.scale
        if e4m3.smallest_normal <= sigma and self.k_sigma * sigma <= e4m3.max:
            return e4m3
        return FP8_FORMATS["E5M2"]

    @property
    def max_safe_std(self) -> float:
        """Largest σ (before scaling) for which k·σ still fits the widest format."""
        return FP8_FORMATS["E5M2"].max * self.scale / self.k_sigma


@dataclass(frozen=True)
class Fp8LayerRecord:
    """One row of the `engine_layers` FP8 table."""

    layer: int
    format: FormatName
    std: float
    scale: float
    amax: float
    rel_error: float
    overflows: int
    n_values: int


def quantise(x: np.ndarray, fmt: Fp8Format, scale: float = 1.0) -> tuple[np.ndarray, int]:
    """Round-trip `x` through `fmt` with per-tensor `scale`; return (x̂, overflows).

    Overflows are the values whose scaled magnitude exceeds the format's maximum (and any
    non-finite input), counted before they are saturated to ±max.
    """
    scaled = np.asarray(x, dtype=np.float32) / np.float32(scale)
    overflows = int(np.count_nonzero(~(np.abs(scaled) <= fmt.max)))
    saturated = np.clip(scaled, -fmt.max, fmt.max)
    restored = saturated.astype(fmt.dtype).astype(np.float32) * np.float32(scale)
    return restored, overflows


def quantise_layer(layer: int, x: np.ndarray, policy: Fp8Policy) -> Fp8LayerRecord:
    """Choose a format for one layer's output from its std, quantise, and measure."""
    x = np.asarray(x, dtype=np.float32)
    std = float(np.std(x, dtype=np.float64))
    fmt = policy.choose(std)
    restored, overflows = quantise(x, fmt, policy.scale)
    # Plain sums, not np.linalg.norm: a BLAS call spins up threads that cost
    # milliseconds on a loaded machine, for vectors that take microseconds.
    norm = float(np.sqrt(np.sum(np.square(x, dtype=np.float64))))
    error = float(np.sqrt(np.sum(np.square(x - restored, dtype=np.float64))))
    return Fp8LayerRecord(
        layer=layer,
        format=fmt.name,
        std=std,
        scale=policy.scale,
        amax=float(np.max(np.abs(x))) if x.size else 0.0,
        rel_error=error / norm if norm > 0 else 0.0,
        overflows=overflows,
        n_values=int(x.size),
    )


def quantise_layers(outputs: Sequence[np.ndarray], policy: Fp8Policy) -> tuple[Fp8LayerRecord, ...]:
    """The adaptive policy over a model's layer outputs, one record per layer."""
    return tuple(quantise_layer(i, x, policy) for i, x in enumerate(outputs))


@dataclass(frozen=True)
class ActivationSpec:
    """Distribution of one layer's output: Gaussian, or Student-t with `nu` > 2 dof.

    `std` is the distribution's standard deviation in both cases, so a Student-t layer
    and a Gaussian layer with the same `std` look the same to a std-based policy.
    """

    std: float
    nu: float | None = None
    mean: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.std) and self.std > 0):
            raise ValueError(f"activation std must be a positive number, got {self.std!r}")
        if self.nu is not None and not self.nu > 2:
            raise ValueError(f"Student-t nu must exceed 2 for a finite std, got {self.nu!r}")
        if not math.isfinite(self.mean):
            raise ValueError("activation mean must be finite")

    def sample(self, n_values: int, rng: np.random.Generator) -> np.ndarray:
        if self.nu is None:
            z = rng.standard_normal(n_values)
        else:
            z = rng.standard_t(self.nu, n_values) * math.sqrt((self.nu - 2.0) / self.nu)
        return (self.mean + self.std * z).astype(np.float32)


def synthesise_activations(
    specs: Sequence[ActivationSpec], n_values: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """One float32 array of `n_values` per layer spec."""
    return [spec.sample(n_values, rng) for spec in specs]


def load_activation_specs(path: str | os.PathLike[str]) -> tuple[ActivationSpec, ...]:
    """Per-layer statistics from a `.npz`: `std` (required), `nu` and `mean` (optional).

    A `nu` of 0 or inf marks a Gaussian layer.
    """
    with np.load(path) as data:
        unknown = sorted(set(data.files) - {"std", "nu", "mean"})
        if unknown:
            raise ValueError(f"{path}: unknown array {unknown[0]!r}; expected std, nu, mean")
        if "std" not in data.files:
            raise ValueError(f"{path}: missing array 'std'")
        std = np.atleast_1d(data["std"]).astype(float)
        nu = np.atleast_1d(data["nu"]).astype(float) if "nu" in data.files else None
        mean = np.atleast_1d(data["mean"]).astype(float) if "mean" in data.files else None
    for name, values in (("nu", nu), ("mean", mean)):
        if values is not None and values.shape != std.shape:
            raise ValueError(f"{path}: array {name!r} must have one entry per layer like 'std'")
    specs = []
    for i, s in enumerate(std):
        layer_nu = None if nu is None or nu[i] == 0 or np.isinf(nu[i]) else float(nu[i])
        layer_mean = 0.0 if mean is None else float(mean[i])
        try:
            specs.append(ActivationSpec(float(s), layer_nu, layer_mean))
        except ValueError as exc:
            raise ValueError(f"{path}: layer {i}: {exc}") from None
    return tuple(specs)
