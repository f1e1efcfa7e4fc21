"""Properties of the engine model and the adaptive FP8 policy (`engine.fp8_overflow`).

The FP8 properties check the policy and the overflow count against the formats' limits
and the std rule restated here (E4M3 max 448, smallest normal 2**-6; E5M2 max 57344), and
the clause's judge against overflows counted here from the generated layer outputs.
The judge's property runs once with light tails (the ci profile's 40 examples all pass)
and once with heavy ones (24 fail, 16 pass: the draw held no value beyond the format).

Counted running this file alone under the ci profile. Hypothesis seeds a derandomised
test from its source (docstring included) and draws some values from the literals of the
sitssim modules loaded so far, so another commit or run order draws other examples, in
about these proportions.
"""

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, event, given
from hypothesis import strategies as st

from sitssim.config.catalog import GpuSpec, ModelConfig
from sitssim.spec.registry import JUDGES, RunContext
from sitssim.workloads.engine import (
    EngineConfig,
    EngineModel,
    HeadScoreDistribution,
    plan_sparsity,
)
from sitssim.workloads.fp8 import (
    ActivationSpec,
    Fp8Policy,
    quantise_layers,
    synthesise_activations,
)

# The OCP FP8 formats' largest finite values (the spec's engine.fp8_overflow test vectors)
# and E4M3's smallest normal, restated independently of ml_dtypes and the policy.
SPEC_MAX = {"E4M3": 448.0, "E5M2": 57344.0}
E4M3_SMALLEST_NORMAL = 2.0**-6
TP_GPU = GpuSpec("generated", 3e12, 80e9, 1e15, None)


@st.composite
def model_configs(draw: st.DrawFn) -> ModelConfig:
    n_kv_heads = draw(st.sampled_from([1, 2, 4, 8]))
    n_heads = n_kv_heads * draw(st.sampled_from([1, 2, 4]))
    head_dim = draw(st.sampled_from([16, 32, 64, 128]))
    hidden = n_heads * head_dim * draw(st.sampled_from([1, 2]))
    return ModelConfig(
        name="generated",
        n_layers=draw(st.integers(1, 12)),
        hidden=hidden,
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        head_dim=head_dim,
        ffn_hidden=8 * draw(st.integers(16, 512)),
        vocab=draw(st.integers(1000, 64000)),
        ffn_matrices=draw(st.sampled_from([2, 3])),
        tied_embeddings=draw(st.booleans()),
    )


gpus = st.builds(
    GpuSpec,
    name=st.just("generated"),
    hbm_bytes_per_s=st.floats(0.5e12, 8e12),
    memory_bytes=st.just(80e9),
    bf16_flops_per_s=st.floats(100e12, 2000e12),
    fp8_flops_per_s=st.one_of(st.none(), st.floats(200e12, 4000e12)),
)


@given(
    model=model_configs(),
    tp=st.sampled_from([2, 4, 8]),
    seed=st.integers(0, 2**32 - 1),
    a=st.floats(0.5, 5.0),
    b=st.floats(0.5, 5.0),
    head_threshold=st.floats(0.0, 0.9),
    layer_threshold=st.floats(0.2, 0.8),
    batch=st.integers(1, 4),
)
def test_all_reduces_per_token_follow_skipped_layers(
    model, tp, seed, a, b, head_threshold, layer_threshold, batch
):
    """Property: all-reduces per decode token = 2 · layers · (1 − skipped fraction),
    each of T·hidden·2 bytes, with the skipped fraction measured from the head scores."""
    assume(model.n_heads % tp == 0 and model.ffn_hidden % tp == 0)
    n_positions = 24
    scores = HeadScoreDistribution("beta", a, b).draw(
        n_positions, model.n_layers, model.n_heads, np.random.default_rng(seed)
    )
    plan = plan_sparsity(scores, head_threshold, layer_threshold)
    engine = EngineModel(EngineConfig(model, TP_GPU, tp=tp))
    prompt = 16
    counts = []
    for position in range(prompt, n_positions):
        (step,) = engine.decode_step(batch, position, plan).passes
        skipped = plan.skipped_layer_fraction(position, position + 1)
        assert step.all_reduces == round(2 * model.n_layers * (1 - skipped))
        sizes = {c.bytes for c in step.collectives if c.kind == "all_reduce"}
        assert sizes <= {batch * model.hidden * 2}
        counts.append(step.all_reduces)
    expected = 2 * model.n_layers * (1 - plan.skipped_layer_fraction(prompt, n_positions))
    assert abs(np.mean(counts) - expected) < 1e-9


@given(
    model=model_configs(),
    gpu=gpus,
    context=st.integers(0, 8192),
    weight_format=st.sampled_from(["bf16", "fp8_e4m3"]),
    kv_format=st.sampled_from(["bf16", "fp8_e5m2"]),
)
def test_memory_bound_decode_time_halves_with_double_bandwidth(
    model, gpu, context, weight_format, kv_format
):
    """Property: in the memory-bound regime, doubling HBM bandwidth halves the
    batch-1 decode compute time."""
    config = EngineConfig(model, gpu, weight_format=weight_format, kv_format=kv_format)
    faster = dataclasses.replace(
        config, gpu=dataclasses.replace(gpu, hbm_bytes_per_s=2 * gpu.hbm_bytes_per_s)
    )
    step = EngineModel(config).decode_step(1, context)
    fast_step = EngineModel(faster).decode_step(1, context)
    segments = [
        s
        for p in (*step.passes, *fast_step.passes)
        for s in (p.lm_head, *(x for layer in p.layers for x in (layer.attention, layer.mlp)))
    ]
    assume(all(s.bound == "memory" for s in segments))
    assert abs(fast_step.time_s / step.time_s - 0.5) < 1e-12


def spec_choice(values: np.ndarray, policy: Fp8Policy) -> str:
    """The adaptive rule from the layer's own σ: E4M3 when σ/scale is a normal E4M3 value
    and k·σ/scale fits under 448, else E5M2."""
    sigma = float(np.std(values, dtype=np.float64)) / policy.scale
    fits = sigma >= E4M3_SMALLEST_NORMAL and policy.k_sigma * sigma <= SPEC_MAX["E4M3"]
    return "E4M3" if fits else "E5M2"


def spec_overflows(values: np.ndarray, fmt: str, scale: float) -> int:
    """Values whose magnitude, divided by the scale, exceeds the format's maximum (or that
    are not finite): counted on the values as produced, before any saturation."""
    scaled = np.abs(values.astype(np.float64)) / scale
    return int(np.count_nonzero(~(scaled <= SPEC_MAX[fmt])))


@given(
    log_std_fraction=st.floats(0.0, 1.0),
    log2_scale=st.integers(-4, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_gaussian_activations_in_the_configured_range_never_overflow(
    log_std_fraction, log2_scale, seed
):
    """`engine.fp8_overflow`: for Gaussian layer outputs whose std lies in the policy's
    configured range (up to k·σ at the E5M2 maximum), the std-chosen format holds every
    value: the overflow count, taken before saturation, is zero."""
    policy = Fp8Policy(k_sigma=6.0, scale=2.0**log2_scale)
    low, high = np.log(1e-3 * policy.scale), np.log(policy.max_safe_std)
    std = float(np.exp(low + log_std_fraction * (high - low)))
    layers = synthesise_activations(
        [ActivationSpec(std * f) for f in (0.25, 0.5, 1.0)], 4096, np.random.default_rng(seed)
    )
    records = quantise_layers(layers, policy)
    assert [r.overflows for r in records] == [0, 0, 0]
    assert [r.format for r in records] == [spec_choice(x, policy) for x in layers]


@given(
    nu=st.floats(2.2, 3.0),
    headroom=st.floats(0.8, 0.95),
    log2_scale=st.integers(-2, 2),
    seed=st.integers(0, 2**32 - 1),
)
def test_heavy_tailed_activations_produce_counted_overflow(nu, headroom, log2_scale, seed):
    """`engine.fp8_overflow` failure witness: Student-t outputs with small ν and a std that
    puts k·σ just inside E4M3's range look safe to the std-based rule, get E4M3, and
    exceed 448; the overflow is counted before saturation. A layer's sample σ may come out
    large enough for E5M2 instead: over 1000 draws at each corner of the range a layer was
    fooled at least 87 % of the time, so one of 12 layers is but for about 2e-11."""
    policy = Fp8Policy(k_sigma=6.0, scale=2.0**log2_scale)
    std = headroom * SPEC_MAX["E4M3"] * policy.scale / policy.k_sigma
    layers = synthesise_activations(
        [ActivationSpec(std, nu=nu)] * 12, 4096, np.random.default_rng(seed)
    )
    records = quantise_layers(layers, policy)
    fooled = [r for r in records if r.format == "E4M3" and r.overflows > 0]
    assert fooled
    for record, values in zip(records, layers, strict=True):
        assert record.overflows == spec_overflows(values, record.format, policy.scale)
    for record in fooled:
        assert policy.k_sigma * record.std <= SPEC_MAX["E4M3"] * policy.scale


@st.composite
def layer_outputs(draw: st.DrawFn, tails: str) -> tuple[Fp8Policy, list[ActivationSpec | None]]:
    """A policy and per layer an output distribution (None: FP8 off for that layer).
    ``light``: Gaussian outputs whose std lies in the policy's range (k·σ at most the E5M2
    maximum). ``heavy``: as well Student-t outputs (ν 2.2 to 4) whose k·σ sits just inside
    E4M3's or E5M2's range, as the std rule sees them."""
    policy = Fp8Policy(
        k_sigma=draw(st.sampled_from([4.0, 6.0, 8.0])), scale=2.0 ** draw(st.integers(-3, 3))
    )
    low, high = np.log(1e-3 * policy.scale), np.log(policy.max_safe_std)
    specs: list[ActivationSpec | None] = []
    for layer in range(draw(st.integers(1, 6))):
        # The first layer is always quantised, so the clause has a layer to judge; "off"
        # sits inside the others' list, as Hypothesis favours the ends of a list.
        kinds = ["gaussian", "off", "gaussian"] if layer else ["gaussian"]
        if tails == "heavy":
            kinds = [*kinds, "heavy"]
        kind = draw(st.sampled_from(kinds))
        if kind == "off":
            specs.append(None)
        elif kind == "gaussian":
            specs.append(ActivationSpec(float(np.exp(low + draw(st.floats(0, 1)) * (high - low)))))
        else:
            fmt = draw(st.sampled_from(sorted(SPEC_MAX)))
            headroom = draw(st.floats(0.7, 0.99))
            std = headroom * SPEC_MAX[fmt] * policy.scale / policy.k_sigma
            specs.append(ActivationSpec(std, nu=draw(st.floats(2.2, 4.0))))
    return policy, specs


@pytest.mark.parametrize("tails", ["light", "heavy"])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_engine_fp8_overflow_judge_counts_the_values_beyond_each_layers_format(
    tails: str, data: st.DataObject, seed: int
) -> None:
    """engine.fp8_overflow judge, on the ``engine_layers`` table the adaptive policy writes
    for generated layer outputs: fails exactly when some layer has a value beyond its
    chosen format's range, its measure the number of such values, counted here on the
    outputs before saturation, and shows those layers; layers without FP8 play no part.
    Run with light tails and with heavy ones."""
    policy, specs = data.draw(layer_outputs(tails))
    kept = [s for s in specs if s is not None]
    outputs = synthesise_activations(kept, 4096, np.random.default_rng(seed))
    layers = iter(zip(quantise_layers(outputs, policy), outputs, strict=True))
    rows, over = [], []
    for layer, spec in enumerate(specs):
        if spec is None:
            rows.append(
                {"layer": layer, "format": "off", "std": np.nan, "amax": np.nan}
                | {"rel_error": np.nan, "overflows": 0, "values": 0}
            )
            continue
        record, values = next(layers)
        assert record.format == spec_choice(values, policy)
        count = spec_overflows(values, record.format, policy.scale)
        if count:
            over.append(layer)
        rows.append(
            {"layer": layer, "format": record.format, "std": record.std}
            | {"amax": record.amax, "rel_error": record.rel_error}
            | {"overflows": record.overflows, "values": record.n_values}
        )
        assert record.overflows == count
    table = pd.DataFrame(rows)
    table.insert(0, "row", np.arange(len(table), dtype=np.int64))
    total = int(table["overflows"].sum())
    verdict = JUDGES["engine.fp8_overflow"](RunContext(tables={"engine_layers": table}))
    event("overflow: fail" if over else "in range: pass")
    assert (verdict.verdict, verdict.measured) == ("fail" if over else "pass", float(total))
    assert [r for e in verdict.evidence for r in e.rows] == over
