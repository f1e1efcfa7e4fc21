"""Adaptive FP8 quantisation: format limits, the std rule, count-then-saturate, loaders."""

import ml_dtypes
import numpy as np
import pytest

from sitssim.workloads.fp8 import (
    FP8_FORMATS,
    ActivationSpec,
    Fp8Policy,
    load_activation_specs,
    quantise,
    quantise_layer,
    quantise_layers,
    synthesise_activations,
)

E4M3, E5M2 = FP8_FORMATS["E4M3"], FP8_FORMATS["E5M2"]


def test_format_limits_are_read_from_ml_dtypes():
    assert E4M3.max == float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max) == 448.0
    assert E5M2.max == float(ml_dtypes.finfo(ml_dtypes.float8_e5m2).max) == 57344.0
    assert E4M3.dtype.itemsize == E5M2.dtype.itemsize == 1


def test_overflow_is_counted_before_saturation():
    x = np.array([1.0, 500.0, -1000.0, 448.0, 447.0], dtype=np.float32)
    assert np.isnan(x.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)[2])
    restored, overflows = quantise(x, E4M3)
    assert overflows == 2
    assert np.all(np.isfinite(restored))
    assert restored.tolist() == [1.0, 448.0, -448.0, 448.0, 448.0]
    _, scaled_overflows = quantise(x, E4M3, scale=4.0)
    assert scaled_overflows == 0


def test_e5m2_overflow_saturates_instead_of_becoming_inf():
    x = np.array([1e5, -np.inf, 3.0], dtype=np.float32)
    restored, overflows = quantise(x, E5M2)
    assert overflows == 2
    assert restored.tolist() == [57344.0, -57344.0, 3.0]


def test_format_rule_is_std_based():
    policy = Fp8Policy(k_sigma=6.0)
    boundary = E4M3.max / 6.0
    assert policy.choose(boundary).name == "E4M3"
    assert policy.choose(boundary * 1.01).name == "E5M2"
    assert policy.choose(E4M3.smallest_normal).name == "E4M3"
    assert policy.choose(E4M3.smallest_normal * 0.99).name == "E5M2"
    assert Fp8Policy(k_sigma=6.0, scale=8.0).choose(boundary * 4).name == "E4M3"
    assert policy.max_safe_std == pytest.approx(E5M2.max / 6.0)
    with pytest.raises(ValueError, match="k_sigma"):
        Fp8Policy(k_sigma=0.0)


def test_relative_error_reflects_mantissa_width():
    x = ActivationSpec(std=1.0).sample(20000, np.random.default_rng(0))
    errors = {}
    for fmt in (E4M3, E5M2):
        restored, _ = quantise(x, fmt)
        errors[fmt.name] = np.linalg.norm(x - restored) / np.linalg.norm(x)
    assert errors["E4M3"] < 2.0**-4 and errors["E5M2"] < 2.0**-3
    assert 1.6 < errors["E5M2"] / errors["E4M3"] < 2.4
    record = quantise_layer(3, x, Fp8Policy())
    assert record.layer == 3 and record.format == "E4M3" and record.overflows == 0
    assert record.rel_error == pytest.approx(errors["E4M3"], rel=1e-6)
    assert record.std == pytest.approx(float(np.std(x)), rel=1e-6)
    assert record.n_values == 20000 and record.amax == pytest.approx(float(np.abs(x).max()))


def test_heavy_tail_with_a_safe_looking_std_overflows():
    std = 0.9 * E4M3.max / 6.0
    rng = np.random.default_rng(11)
    layers = synthesise_activations([ActivationSpec(std), ActivationSpec(std, nu=2.5)], 8192, rng)
    gaussian, heavy = quantise_layers(layers, Fp8Policy())
    assert gaussian.format == heavy.format == "E4M3"
    assert gaussian.overflows == 0
    assert heavy.overflows > 0
    assert heavy.overflows == int(np.count_nonzero(np.abs(layers[1]) > E4M3.max))


def test_synthetic_activations_have_the_configured_std():
    rng = np.random.default_rng(4)
    gaussian, student = synthesise_activations(
        [ActivationSpec(3.0, mean=1.0), ActivationSpec(3.0, nu=8.0)], 100_000, rng
    )
    assert gaussian.dtype == np.float32
    assert np.std(gaussian) == pytest.approx(3.0, rel=0.02)
    assert np.mean(gaussian) == pytest.approx(1.0, abs=0.05)
    assert np.std(student) == pytest.approx(3.0, rel=0.05)
    excess_kurtosis = np.mean((student / np.std(student)) ** 4) - 3
    assert excess_kurtosis > 0.5
    with pytest.raises(ValueError, match="nu"):
        ActivationSpec(1.0, nu=2.0)


def test_activation_statistics_load_from_npz(tmp_path):
    path = tmp_path / "stats.npz"
    np.savez(path, std=np.array([1.0, 2.0, 3.0]), nu=np.array([0.0, np.inf, 3.0]))
    specs = load_activation_specs(path)
    assert specs == (ActivationSpec(1.0), ActivationSpec(2.0), ActivationSpec(3.0, nu=3.0))
    bad = tmp_path / "bad.npz"
    np.savez(bad, std=np.array([1.0, 2.0]), nu=np.array([3.0]))
    with pytest.raises(ValueError, match="'nu'"):
        load_activation_specs(bad)
    unknown = tmp_path / "unknown.npz"
    np.savez(unknown, sigma=np.array([1.0]))
    with pytest.raises(ValueError, match="'sigma'"):
        load_activation_specs(unknown)
    negative = tmp_path / "negative.npz"
    np.savez(negative, std=np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="layer 1"):
        load_activation_specs(negative)
