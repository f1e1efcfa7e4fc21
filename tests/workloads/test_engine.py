"""Engine roofline model, model/GPU catalog, sparsity, KV compression, speculation."""

import dataclasses
import itertools
import math

import numpy as np
import pytest

from sitssim.config.catalog import (
    A100_80GB,
    GPUS,
    H100_SXM,
    H200,
    LLAMA3_8B,
    LLAMA32_1B,
    MODELS,
    ModelConfig,
    format_bytes,
    gpu_from_dict,
    model_from_dict,
)
from sitssim.workloads.engine import (
    EngineConfig,
    EngineModel,
    HeadScoreDistribution,
    KvCompressionConfig,
    SparsityPlan,
    Speculation,
    compress_kv,
    expected_tokens_per_step,
    plan_sparsity,
    synthetic_keys,
)

TINY = ModelConfig(
    name="tiny",
    n_layers=4,
    hidden=256,
    n_heads=8,
    n_kv_heads=2,
    head_dim=32,
    ffn_hidden=512,
    vocab=1000,
)


def engine(model=LLAMA3_8B, gpu=A100_80GB, **kwargs) -> EngineModel:
    return EngineModel(EngineConfig(model, gpu, **kwargs))


# ------------------------------------------------------------------------------ catalog


def test_llama3_8b_parameter_count_is_computed_from_its_shape():
    assert LLAMA3_8B.n_params == pytest.approx(8.03e9, rel=0.01)
    tied = dataclasses.replace(LLAMA3_8B, tied_embeddings=True)
    assert LLAMA3_8B.n_params - tied.n_params == LLAMA3_8B.vocab * LLAMA3_8B.hidden
    plain_mlp = dataclasses.replace(LLAMA3_8B, ffn_matrices=2)
    assert LLAMA3_8B.n_params - plain_mlp.n_params == 32 * 4096 * 14336


def test_builtin_catalog_entries():
    assert MODELS["Llama-3-8B"] is LLAMA3_8B
    assert LLAMA32_1B.tied_embeddings and LLAMA32_1B.vocab == LLAMA3_8B.vocab
    assert set(GPUS) == {"A100-80GB", "H100-SXM", "H200"}
    assert not A100_80GB.has_fp8_tensor_cores
    assert H100_SXM.fp8_flops_per_s == pytest.approx(2 * H100_SXM.bf16_flops_per_s, rel=0.01)
    assert H200.bf16_flops_per_s == H100_SXM.bf16_flops_per_s
    assert H200.hbm_bytes_per_s > H100_SXM.hbm_bytes_per_s > A100_80GB.hbm_bytes_per_s
    assert H200.memory_bytes > H100_SXM.memory_bytes


def test_model_from_dict_defaults_head_dim_and_rejects_bad_fields():
    data = {
        "name": "m",
        "n_layers": 2,
        "hidden": 512,
        "n_heads": 8,
        "n_kv_heads": 2,
        "ffn_hidden": 1024,
        "vocab": 100,
    }
    assert model_from_dict(data).head_dim == 64
    with pytest.raises(ValueError, match="'n_layerz'"):
        model_from_dict({**data, "n_layerz": 3})
    with pytest.raises(ValueError, match="'vocab'"):
        model_from_dict({k: v for k, v in data.items() if k != "vocab"})
    with pytest.raises(ValueError, match="n_kv_heads"):
        model_from_dict({**data, "n_kv_heads": 3})
    with pytest.raises(ValueError, match="'n_layers'"):
        model_from_dict({**data, "n_layers": -1})
    with pytest.raises(ValueError, match="'tied_embeddings'"):
        model_from_dict({**data, "tied_embeddings": "yes"})


def test_gpu_from_dict_without_fp8_field_has_no_fp8():
    gpu = gpu_from_dict(
        {"name": "g", "hbm_bytes_per_s": 1e12, "memory_bytes": 4e10, "bf16_flops_per_s": 1e14}
    )
    assert not gpu.has_fp8_tensor_cores
    with pytest.raises(ValueError, match="'hbm_bytes_per_s'"):
        gpu_from_dict(
            {"name": "g", "hbm_bytes_per_s": -1, "memory_bytes": 1, "bf16_flops_per_s": 1}
        )
    with pytest.raises(ValueError, match="'hbm_gbps'"):
        gpu_from_dict({"name": "g", "hbm_gbps": 1})


def test_number_formats_come_from_dtypes():
    assert format_bytes("bf16") == 2 and format_bytes("fp8_e4m3") == 1
    with pytest.raises(ValueError, match="int3"):
        format_bytes("int3")


# -------------------------------------------------------------------------- FP8 on A100


def test_fp8_on_a100_only_shrinks_bytes_and_says_so():
    bf16, fp8 = engine(weight_format="bf16"), engine(weight_format="fp8_e4m3")
    assert any("no FP8 tensor cores" in note and "BF16" in note for note in fp8.notes)
    assert fp8.linear_compute_format == "bf16"
    prefill_bf16, prefill_fp8 = bf16.prefill(1, 512), fp8.prefill(1, 512)
    for a, b in zip(prefill_bf16.layers, prefill_fp8.layers, strict=True):
        assert b.mlp.compute_s == pytest.approx(a.mlp.compute_s)
    decode_bf16, decode_fp8 = bf16.forward(1, 1, 512), fp8.forward(1, 1, 512)
    ratio = decode_fp8.layers[0].mlp.memory_s / decode_bf16.layers[0].mlp.memory_s
    assert 0.5 <= ratio < 0.51


def test_fp8_on_h100_uses_the_fp8_peak_without_the_a100_note():
    bf16 = engine(gpu=H100_SXM, weight_format="bf16")
    fp8 = engine(gpu=H100_SXM, weight_format="fp8_e4m3")
    assert fp8.linear_compute_format == "fp8"
    assert not any("no FP8 tensor cores" in note for note in fp8.notes)
    a, b = bf16.prefill(1, 512).layers[0].mlp, fp8.prefill(1, 512).layers[0].mlp
    ratio = H100_SXM.bf16_flops_per_s / H100_SXM.fp8_flops_per_s
    assert b.compute_s == pytest.approx(a.compute_s * ratio)


# ------------------------------------------------------------------------------- memory


def test_memory_from_first_principles():
    n = LLAMA3_8B.n_params
    fp8 = engine(weight_format="fp8_e4m3").memory(1, 2048)
    bf16 = engine(weight_format="bf16").memory(1, 2048)
    assert 1.0 <= fp8.weights_bytes / n < 1.001
    assert 2.0 <= bf16.weights_bytes / n < 2.001
    per_token = 2 * 32 * 8 * 128 * 2
    assert bf16.kv_cache_bytes == 2048 * per_token
    assert engine(kv_format="fp8_e4m3").memory(1, 2048).kv_cache_bytes == 2048 * per_token / 2
    assert engine().memory(3, 2048).kv_cache_bytes == 3 * 2048 * per_token
    tp2 = engine(gpu=H100_SXM, tp=2).memory(1, 2048)
    assert tp2.weights_bytes == pytest.approx(bf16.weights_bytes / 2, rel=1e-4)
    assert tp2.kv_cache_bytes == bf16.kv_cache_bytes / 2
    assert engine().memory(1, 4096).activation_bytes > bf16.activation_bytes > 0
    assert bf16.total_bytes == pytest.approx(
        bf16.weights_bytes + bf16.kv_cache_bytes + bf16.activation_bytes
    )
    assert bf16.fits


def test_kv_heads_replicate_when_tp_exceeds_them():
    tp16 = engine(gpu=H100_SXM, tp=16)
    per_gpu = tp16.memory(1, 1000).kv_cache_bytes
    assert per_gpu == 1000 * 2 * 32 * 1 * 128 * 2
    assert any("replicated" in note for note in tp16.notes)


def test_memory_that_does_not_fit_is_noted():
    result = engine(model=TINY, gpu=dataclasses.replace(A100_80GB, memory_bytes=1e6)).run(1, 8, 3)
    assert not result.memory.fits
    assert any("does not fit" in note for note in result.notes)


# --------------------------------------------------------------------------- collectives


def test_tp8_batch1_decode_has_64_all_reduces_of_8_kib():
    step = engine(gpu=H100_SXM, tp=8).decode_step(1, 1024)
    (decode,) = step.passes
    assert decode.all_reduces == 64
    sizes = {c.bytes for c in decode.collectives if c.kind == "all_reduce"}
    assert sizes == {4096 * 2} == {8 * 1024}
    assert engine(gpu=H100_SXM, tp=8).decode_step(4, 1024).all_reduces == 64
    assert engine(gpu=H100_SXM, tp=8).forward(4, 1, 1024).all_reduce_bytes == 4 * 4096 * 2
    assert engine(gpu=H100_SXM, tp=8).prefill(1, 1024).all_reduce_bytes == 1024 * 4096 * 2
    assert engine(tp=1).decode_step(1, 1024).all_reduces == 0


def test_collectives_follow_each_segment_in_order():
    decode = engine(model=TINY, tp=2).forward(1, 1, 10)
    kinds = [(c.kind, c.layer, c.after) for c in decode.collectives]
    expected = [("all_reduce", i, s) for i in range(4) for s in ("attention", "mlp")]
    assert kinds == [*expected, ("all_gather", None, "lm_head")]


# ------------------------------------------------------------------------------ roofline


def test_attention_work_grows_with_context():
    model = engine()
    short, long = model.forward(1, 1, 1000), model.forward(1, 1, 2000)
    assert long.attention_core_flops / short.attention_core_flops == pytest.approx(2001 / 1001)
    kv_per_token_layer = 2 * 8 * 128 * 2
    delta = long.layers[0].attention.bytes - short.layers[0].attention.bytes
    assert delta == pytest.approx(1000 * kv_per_token_layer)
    assert short.layers[0].mlp.bytes == long.layers[0].mlp.bytes


def test_tensor_parallelism_divides_every_segment_time():
    one = engine(gpu=H100_SXM).prefill(1, 256)
    two = engine(gpu=H100_SXM, tp=2).prefill(1, 256)
    for a, b in zip(one.layers, two.layers, strict=True):
        assert b.attention.time_s == pytest.approx(a.attention.time_s / 2)
        assert b.mlp.time_s == pytest.approx(a.mlp.time_s / 2)


def test_regimes_and_efficiency_factors():
    model = engine()
    prefill, decode = model.prefill(1, 1024), model.forward(1, 1, 1024)
    assert {layer.mlp.bound for layer in prefill.layers} == {"compute"}
    assert {layer.mlp.bound for layer in decode.layers} == {"memory"}
    slow_memory = engine(efficiency=dataclasses.replace(model.config.efficiency, bandwidth=0.4))
    assert slow_memory.forward(1, 1, 1024).time_s == pytest.approx(2 * decode.time_s)
    slow_prefill = slow_memory.prefill(1, 1024)
    for a, b in zip(prefill.layers, slow_prefill.layers, strict=True):
        assert b.time_s == pytest.approx(a.time_s)


def test_compute_bound_prefill_does_not_halve_with_double_bandwidth():
    fast = engine(gpu=dataclasses.replace(A100_80GB, hbm_bytes_per_s=2 * 2039e9))
    ratio = fast.prefill(1, 1024).time_s / engine().prefill(1, 1024).time_s
    assert ratio > 0.9


def test_eager_attention_costs_bytes_and_memory():
    eager = engine(materialise_scores=True)
    eager_bytes = eager.prefill(1, 2048).layers[0].attention.bytes
    flash_bytes = engine().prefill(1, 2048).layers[0].attention.bytes
    assert eager_bytes - flash_bytes == pytest.approx(4 * 32 * (2048 * 2049 / 2) * 2)
    assert eager.memory(1, 2048).activation_bytes > engine().memory(1, 2048).activation_bytes


def test_run_reports_ttft_tpot_and_throughput_consistently():
    model = engine(model=TINY)
    result = model.run(2, 64, 9)
    assert result.ttft_s == result.prefill[0].time_s
    assert len(result.decode_steps) == 8
    assert result.tpot_s == pytest.approx(sum(s.time_s for s in result.decode_steps) / 8)
    assert result.decode_tokens_per_s == pytest.approx(2 / result.tpot_s)
    assert [s.context_before for s in result.decode_steps] == list(range(64, 72))
    assert model.run(2, 512, 9).tpot_s > result.tpot_s
    assert result.memory.kv_cache_bytes == 2 * (64 + 8) * TINY.kv_bytes_per_token("bf16")


def test_invalid_engine_configurations_are_rejected():
    with pytest.raises(ValueError, match="tp=3"):
        engine(tp=3)
    with pytest.raises(ValueError, match="weight_format"):
        engine(weight_format="int4")
    with pytest.raises(ValueError, match="generated_tokens"):
        engine(model=TINY).run(1, 8, 1)


# ------------------------------------------------------------------------ sparse attention


def test_zero_threshold_sparsity_changes_nothing():
    scores = HeadScoreDistribution().draw(16, 4, 8, np.random.default_rng(1))
    plan = plan_sparsity(scores, head_threshold=0.0, layer_threshold=0.0)
    model = engine(model=TINY, tp=2)
    assert plan.removed_attention_fraction() == 0.0
    dense, sparse = model.forward(1, 1, 10), model.forward(1, 1, 10, sparsity=plan)
    assert sparse.time_s == dense.time_s and sparse.all_reduces == dense.all_reduces


def test_removed_attention_flops_are_measured_from_scores():
    rng = np.random.default_rng(7)
    scores = HeadScoreDistribution("beta", 2.0, 3.0).draw(40, 4, 8, rng)
    plan = plan_sparsity(scores, head_threshold=0.35)
    model = engine(model=TINY)
    dense = sum(model.forward(1, 1, p).attention_core_flops for p in range(20, 40))
    sparse = sum(model.forward(1, 1, p, sparsity=plan).attention_core_flops for p in range(20, 40))
    removed = plan.removed_attention_fraction(20, 40)
    assert 0.1 < removed < 0.9
    assert 1 - sparse / dense == pytest.approx(removed)
    assert removed == pytest.approx(1 - plan.head_kept[20:40].mean(), abs=0.1)


def test_removed_fraction_weights_tokens_by_their_context():
    kept = np.ones((10, 1, 4), dtype=bool)
    early, late = kept.copy(), kept.copy()
    early[0, 0, :] = False
    late[9, 0, :] = False
    layers = np.ones((10, 1), dtype=bool)
    early_removed = SparsityPlan(early, layers).removed_attention_fraction()
    late_removed = SparsityPlan(late, layers).removed_attention_fraction()
    assert late_removed == pytest.approx(10 * early_removed)


def test_skipped_layer_drops_its_time_and_all_reduces():
    heads = np.ones((5, 4, 8), dtype=bool)
    layers = np.ones((5, 4), dtype=bool)
    layers[3, 1] = False
    plan = SparsityPlan(heads, layers)
    decode = engine(model=TINY, tp=2).forward(1, 1, 3, sparsity=plan)
    assert decode.layers[1].skipped and decode.layers[1].time_s == 0.0
    assert decode.all_reduces == 2 * 3
    assert all(c.layer != 1 for c in decode.collectives)
    assert not plan.head_kept[3, 1].any()


def test_kv_group_is_read_only_if_one_of_its_query_heads_runs():
    heads = np.ones((5, 4, 8), dtype=bool)
    heads[4, :, 0:3] = False
    partly = SparsityPlan(heads.copy(), np.ones((5, 4), dtype=bool))
    heads[4, :, 3] = False
    whole_group = SparsityPlan(heads, np.ones((5, 4), dtype=bool))
    model = engine(model=TINY)
    dense = model.forward(1, 1, 4).layers[0].attention.bytes
    assert model.forward(1, 1, 4, sparsity=partly).layers[0].attention.bytes == dense
    saved = dense - model.forward(1, 1, 4, sparsity=whole_group).layers[0].attention.bytes
    assert saved == pytest.approx(4 * 2 * 32 * 2)


def test_sparsity_plan_must_cover_the_pass():
    plan = plan_sparsity(np.ones((4, 4, 8)), 0.5)
    with pytest.raises(ValueError, match=r"positions 0\.\.3"):
        engine(model=TINY).forward(1, 1, 4, sparsity=plan)
    with pytest.raises(ValueError, match="layers and heads"):
        engine(model=dataclasses.replace(TINY, n_layers=2)).forward(1, 1, 0, sparsity=plan)


def test_per_layer_score_distributions():
    dist = HeadScoreDistribution("beta", (1.0, 1.0, 8.0, 8.0), (8.0, 8.0, 1.0, 1.0))
    scores = dist.draw(200, 4, 8, np.random.default_rng(3))
    plan = plan_sparsity(scores, head_threshold=0.0, layer_threshold=0.5)
    assert plan.layer_kept[:, :2].mean() < 0.05 < 0.95 < plan.layer_kept[:, 2:].mean()
    with pytest.raises(ValueError):
        HeadScoreDistribution("beta", -1.0)


# -------------------------------------------------------------------------- KV compression


def test_short_context_is_not_compressed():
    keys = synthetic_keys(100, 16, np.random.default_rng(0))
    result = compress_kv(keys, KvCompressionConfig(sink_tokens=4, window=128))
    assert result.kept_fraction == 1.0 and result.kept_keys(100) == 100


def test_identical_keys_merge_into_one_entry_outside_the_window():
    keys = np.tile(np.arange(1.0, 9.0), (1000, 1))
    result = compress_kv(keys, KvCompressionConfig(sink_tokens=4, window=64))
    assert result.kept_tokens == 4 + 64 + 1
    assert result.kept_keys(2000) == pytest.approx(68 + (2000 - 68) / (1000 - 68))


def test_kept_fraction_is_measured_and_follows_the_threshold():
    keys = synthetic_keys(2048, 64, np.random.default_rng(5), n_kv_heads=2, noise=0.3)
    fractions = [
        compress_kv(keys, KvCompressionConfig(4, 256, t)).kept_fraction for t in (0.8, 0.9, 0.97)
    ]
    assert 0.0 < fractions[0] < fractions[1] < fractions[2] <= 1.0
    never = compress_kv(keys, KvCompressionConfig(4, 256, 1.0))
    assert never.kept_fraction == 1.0


def test_engine_reads_and_stores_only_the_kept_keys():
    keys = synthetic_keys(2048, 32, np.random.default_rng(2), n_kv_heads=2)
    kv = compress_kv(keys, KvCompressionConfig(4, 128, 0.85))
    assert kv.kept_fraction < 0.9
    plain, compressed = engine(model=TINY), engine(model=TINY, kv_compression=kv)
    assert compressed.memory(1, 2048).kv_cache_bytes == pytest.approx(
        kv.kept_keys(2048) * TINY.kv_bytes_per_token("bf16")
    )
    core_ratio = (
        compressed.forward(1, 1, 2048).attention_core_flops
        / plain.forward(1, 1, 2048).attention_core_flops
    )
    assert core_ratio == pytest.approx((kv.kept_keys(2048) + 1) / 2049)
    assert compressed.prefill(1, 2048).time_s == plain.prefill(1, 2048).time_s


# --------------------------------------------------------------------- speculative decoding


def test_expected_tokens_per_step():
    assert expected_tokens_per_step(4, 0.0) == 1.0
    assert expected_tokens_per_step(4, 1.0) == 5.0
    assert expected_tokens_per_step(1, 0.5) == 1.5
    assert expected_tokens_per_step(4, 1 - 1e-9) == pytest.approx(5.0, rel=1e-6)
    values = [expected_tokens_per_step(3, a) for a in np.linspace(0, 1, 11)]
    assert all(a < b for a, b in itertools.pairwise(values))
    with pytest.raises(ValueError):
        expected_tokens_per_step(3, 1.5)


def test_speculation_shapes_passes_traffic_and_tpot():
    draft = dataclasses.replace(TINY, name="draft", n_layers=1, hidden=64, head_dim=8)
    good = Speculation(draft, gamma=4, alpha=0.9)
    spec = engine(model=TINY, gpu=H100_SXM, tp=2, speculation=good)
    step = spec.decode_step(1, 100)
    assert [p.model for p in step.passes] == ["draft"] * 4 + ["tiny"]
    assert step.passes[-1].new_tokens == 5
    assert step.passes[-1].all_reduce_bytes == 5 * TINY.hidden * 2
    result = spec.run(1, 64, 33)
    assert result.expected_tokens_per_step == good.tokens_per_step
    assert len(result.decode_steps) == math.ceil(32 / good.tokens_per_step)
    assert result.memory.draft_bytes > 0
    plain = engine(model=TINY, gpu=H100_SXM, tp=2).run(1, 64, 33)
    hopeless = engine(
        model=TINY, gpu=H100_SXM, tp=2, speculation=Speculation(draft, gamma=4, alpha=0.0)
    ).run(1, 64, 33)
    assert result.tpot_s < plain.tpot_s < hopeless.tpot_s
