"""Roofline model of a tensor-parallel LLM inference engine (L5, §1).

Theory of operation
-------------------
A forward pass pushes `new_tokens` tokens of each of `batch` sequences through every
layer, on top of `context_before` tokens already in the KV cache (prefill: context 0
and the whole prompt; decode: one token on a growing context; speculative verify:
γ + 1 tokens). Each layer is two compute segments, the attention block and the MLP
block, each followed by a tensor-parallel all-reduce of the block's output
(T·hidden·2 bytes, T = batch × new tokens). Because a collective is a barrier no
kernel overlap crosses, the roofline is applied per segment:

    time = max(FLOPs / (N · peak · η_F), bytes / (N · BW · η_B))

with FLOPs and bytes summed over the N tensor-parallel GPUs. FLOPs are 2 per
multiply-accumulate: 2·params per token for the projections and the MLP, and
4·head_dim per (query head, attended key) for QKᵀ and PV, so attention grows with the
context. Bytes are the weights read once per pass, the KV cache read (decode) and
written, and the activations each kernel reads and writes. Bytes per element come from
the number formats; compute peaks from the `GpuSpec`. FP8 weights use the FP8 peak
only where the GPU has FP8 tensor cores; on an A100 they shrink storage and HBM
traffic but are dequantised to BF16 for compute, and the result says so in `notes`.

Three optimisations are modelled from measured mechanisms, not from target figures:

* sparse attention: per-token head-importance scores drawn from a configurable
  distribution; heads below a threshold (and layers whose mean score is below a layer
  threshold) are skipped. The removed attention FLOPs are measured from the scores;
  a skipped layer also drops its two all-reduces;
* KV compression: sink tokens and a recent window are kept, older keys whose cosine
  similarity with their predecessor exceeds a threshold are merged, measured on
  synthetic key vectors;
* speculative decoding: a draft model proposes γ tokens per step, accepted with
  probability α each; a step yields (1 − α^(γ+1)) / (1 − α) tokens on average.

Times are seconds of compute only: collectives are listed (`ForwardPass.collectives`)
for a fabric driver to time. Memory is weights + KV cache + peak activations, per GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from sitssim.config.catalog import GpuSpec, ModelConfig, format_bytes, is_fp8

ACTIVATION_FORMAT = "bf16"
"""Activations, residual stream and all-reduce payloads stay in BF16 (2 bytes)."""

LOGITS_FORMAT = "fp32"
"""Logits are upcast for sampling, as inference frameworks do."""

WEIGHT_FORMATS = ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2")


@dataclass(frozen=True)
class Efficiency:
    """Achieved fractions of peak: η_F for tensor-core FLOPs, η_B for HBM bandwidth.

    The defaults are typical of large cuBLAS GEMMs and streaming reads on A100/H100-class
    parts; they are device parameters, not fitted to any reported benchmark result.
    """

    flops: float = 0.7
    bandwidth: float = 0.8

    def __post_init__(self) -> None:
        for name in ("flops", "bandwidth"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ValueError(f"efficiency {name!r} must be in (0, 1], got {value!r}")


KERNELS = {"attention": 5, "mlp": 5, "lm_head": 2}
"""Kernels a segment launches: the five whose traffic the attention and MLP blocks count
(below), and the output head's GEMM and the sampler (``sitssim.workloads.kernel_launch``)."""


@dataclass(frozen=True)
class Segment:
    """One compute segment between collectives. FLOPs and bytes are summed over GPUs."""

    name: str
    flops: float
    bytes: float
    compute_s: float
    memory_s: float

    @property
    def kernels(self) -> int:
        return KERNELS[self.name]

    @property
    def time_s(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def bound(self) -> Literal["compute", "memory"]:
        return "compute" if self.compute_s > self.memory_s else "memory"


_IDLE_ATTENTION = Segment("attention", 0.0, 0.0, 0.0, 0.0)
_IDLE_MLP = Segment("mlp", 0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class LayerPass:
    """One layer of a forward pass; `heads_kept` is the mean over the tokens that ran it."""

    layer: int
    skipped: bool
    heads_kept: float
    attention_core_flops: float
    attention: Segment
    mlp: Segment

    @property
    def time_s(self) -> float:
        return self.attention.time_s + self.mlp.time_s


@dataclass(frozen=True)
class Collective:
    """A tensor-parallel collective issued after segment `after` (payload in bytes)."""

    kind: Literal["all_reduce", "all_gather"]
    layer: int | None
    after: str
    bytes: int


@dataclass(frozen=True)
class ForwardPass:
    """Per-layer compute times and the collectives of one forward pass."""

    model: str
    batch: int
    new_tokens: int
    context_before: int
    layers: tuple[LayerPass, ...]
    lm_head: Segment
    collectives: tuple[Collective, ...]

    @property
    def time_s(self) -> float:
        """Compute time of the pass; collective time is the fabric's to add."""
        return sum(layer.time_s for layer in self.layers) + self.lm_head.time_s

    @property
    def all_reduces(self) -> int:
        return sum(1 for c in self.collectives if c.kind == "all_reduce")

    @property
    def all_reduce_bytes(self) -> int:
        """Payload of each all-reduce of this pass (0 when there are none)."""
        return next((c.bytes for c in self.collectives if c.kind == "all_reduce"), 0)

    @property
    def attention_core_flops(self) -> float:
        return sum(layer.attention_core_flops for layer in self.layers)


# ----------------------------------------------------------------------------- sparsity


@dataclass(frozen=True)
class HeadScoreDistribution:
    """Distribution of per-token head-importance scores.

    `kind` "beta" draws Beta(a, b); "lognormal" draws exp(N(a, b)). `a` and `b` may be
    per-layer sequences, so a scenario can make some layers matter less than others.
    """

    kind: Literal["beta", "lognormal"] = "beta"
    a: float | tuple[float, ...] = 2.0
    b: float | tuple[float, ...] = 2.0

    def __post_init__(self) -> None:
        if self.kind not in ("beta", "lognormal"):
            raise ValueError(f"head-score distribution kind {self.kind!r} is not beta/lognormal")
        a, b = np.asarray(self.a, dtype=float), np.asarray(self.b, dtype=float)
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            raise ValueError("head-score distribution parameters must be finite")
        if self.kind == "beta" and (np.any(a <= 0) or np.any(b <= 0)):
            raise ValueError("beta parameters a and b must be positive")
        if self.kind == "lognormal" and np.any(b <= 0):
            raise ValueError("lognormal sigma b must be positive")

    def draw(
        self, n_tokens: int, n_layers: int, n_heads: int, rng: np.random.Generator
    ) -> np.ndarray:
        """Scores of shape (tokens, layers, heads)."""
        shape = (n_tokens, n_layers, n_heads)
        for name in ("a", "b"):
            size = np.size(getattr(self, name))
            if size not in (1, n_layers):
                raise ValueError(f"parameter {name!r} has {size} entries for {n_layers} layers")
        a = np.broadcast_to(np.asarray(self.a, dtype=float)[..., None], (n_layers, 1))
        b = np.broadcast_to(np.asarray(self.b, dtype=float)[..., None], (n_layers, 1))
        if self.kind == "beta":
            return rng.beta(a, b, size=shape)
        return rng.lognormal(a, b, size=shape)


@dataclass(frozen=True, eq=False)
class SparsityPlan:
    """Which query heads and layers run for each token position (row = position).

    A head in a skipped layer counts as skipped. Arrays are read-only.
    """

    head_kept: np.ndarray
    layer_kept: np.ndarray

    def __post_init__(self) -> None:
        heads = np.asarray(self.head_kept, dtype=bool)
        layers = np.asarray(self.layer_kept, dtype=bool)
        if heads.ndim != 3 or layers.shape != heads.shape[:2]:
            raise ValueError("head_kept must be (positions, layers, heads), layer_kept (P, L)")
        heads = heads & layers[..., None]
        heads.setflags(write=False)
        layers = layers.copy()
        layers.setflags(write=False)
        object.__setattr__(self, "head_kept", heads)
        object.__setattr__(self, "layer_kept", layers)

    @property
    def n_positions(self) -> int:
        return int(self.head_kept.shape[0])

    def rows(self, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Head and layer masks of positions start .. start + count - 1."""
        if start < 0 or start + count > self.n_positions:
            raise ValueError(
                f"sparsity plan covers positions 0..{self.n_positions - 1}, "
                f"the pass needs {start}..{start + count - 1}"
            )
        return self.head_kept[start : start + count], self.layer_kept[start : start + count]

    def removed_attention_fraction(self, start: int = 0, stop: int | None = None) -> float:
        """Attention FLOPs removed over positions [start, stop), measured from the masks.

        A token at position p attends to p + 1 keys, so each (token, head) is weighted by
        its key count: skipping late tokens' heads removes more work than early ones.
        """
        stop = self.n_positions if stop is None else stop
        kept = self.head_kept[start:stop]
        keys = np.arange(start, stop, dtype=float) + 1.0
        total = keys.sum() * kept.shape[1] * kept.shape[2]
        return float(1.0 - (kept.sum(axis=(1, 2)) * keys).sum() / total)

    def skipped_layer_fraction(self, start: int = 0, stop: int | None = None) -> float:
        """Fraction of (token, layer) pairs skipped over positions [start, stop)."""
        return float(1.0 - self.layer_kept[start:stop].mean())


def plan_sparsity(
    scores: np.ndarray, head_threshold: float, layer_threshold: float | None = None
) -> SparsityPlan:
    """Skip heads scoring below `head_threshold`, and layers whose mean head score for
    the token is below `layer_threshold` (no layer skipping when None)."""
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 3:
        raise ValueError("scores must have shape (positions, layers, heads)")
    head_kept = scores >= head_threshold
    if layer_threshold is None:
        layer_kept = np.ones(scores.shape[:2], dtype=bool)
    else:
        layer_kept = scores.mean(axis=2) >= layer_threshold
    return SparsityPlan(head_kept, layer_kept)


# ------------------------------------------------------------------------ KV compression


def synthetic_keys(
    n_tokens: int,
    head_dim: int,
    rng: np.random.Generator,
    *,
    n_kv_heads: int = 1,
    n_centres: int = 16,
    persistence: float = 0.9,
    noise: float = 0.3,
) -> np.ndarray:
    """Key vectors of shape (n_kv_heads, n_tokens, head_dim).

    Real keys cluster by topic and neighbouring tokens tend to share a topic: each key is
    one of `n_centres` random directions plus isotropic noise of relative size `noise`,
    and the centre is kept from one token to the next with probability `persistence`.
    """
    if not 0.0 <= persistence <= 1.0:
        raise ValueError("persistence must be in [0, 1]")
    if n_centres < 1 or noise < 0:
        raise ValueError("n_centres must be >= 1 and noise >= 0")
    centres = rng.standard_normal((n_kv_heads, n_centres, head_dim))
    switches = rng.random((n_kv_heads, n_tokens)) >= persistence
    switches[:, 0] = True
    run_id = np.cumsum(switches, axis=1) - 1
    run_centre = rng.integers(n_centres, size=(n_kv_heads, n_tokens))
    centre_index = np.take_along_axis(run_centre, run_id, axis=1)
    base = np.take_along_axis(centres, centre_index[..., None], axis=1)
    return base + noise * rng.standard_normal((n_kv_heads, n_tokens, head_dim))


@dataclass(frozen=True)
class KvCompressionConfig:
    """Sink tokens and a recent window stay exact; older keys merge with similar neighbours."""

    sink_tokens: int = 4
    window: int = 256
    similarity_threshold: float = 0.9

    def __post_init__(self) -> None:
        if self.sink_tokens < 0 or self.window < 0:
            raise ValueError("sink_tokens and window must be non-negative")
        if not math.isfinite(self.similarity_threshold):
            raise ValueError("similarity_threshold must be finite (above 1 never merges)")


@dataclass(frozen=True)
class KvCompressionResult:
    """Measured outcome of compressing `original_tokens` keys per KV head."""

    config: KvCompressionConfig
    original_tokens: int
    middle_tokens: int
    middle_kept: float

    @property
    def exact_tokens(self) -> int:
        return self.original_tokens - self.middle_tokens

    @property
    def kept_tokens(self) -> float:
        return self.exact_tokens + self.middle_kept

    @property
    def kept_fraction(self) -> float:
        return self.kept_tokens / self.original_tokens if self.original_tokens else 1.0

    @property
    def merge_ratio(self) -> float:
        """Entries kept per evicted token (1.0 when nothing was evicted to measure)."""
        return self.middle_kept / self.middle_tokens if self.middle_tokens else 1.0

    def kept_keys(self, context_len: float) -> float:
        """Expected cache entries for a context of `context_len` tokens."""
        exact = self.config.sink_tokens + self.config.window
        if context_len <= exact:
            return float(context_len)
        return exact + (context_len - exact) * self.merge_ratio


def compress_kv(keys: np.ndarray, config: KvCompressionConfig) -> KvCompressionResult:
    """Compress keys of shape (..., tokens, head_dim) and measure what is kept.

    Merging happens when a key leaves the window: it joins its predecessor's entry if
    their cosine similarity exceeds the threshold, which costs O(1) per token and lets
    runs of similar neighbours collapse into one entry.
    """
    keys = np.asarray(keys, dtype=float)
    flat = keys.reshape(-1, keys.shape[-2], keys.shape[-1])
    n_tokens = flat.shape[1]
    middle = flat[:, config.sink_tokens : max(config.sink_tokens, n_tokens - config.window)]
    n_middle = middle.shape[1]
    if n_middle == 0:
        return KvCompressionResult(config, n_tokens, 0, 0.0)
    unit = middle / np.maximum(np.linalg.norm(middle, axis=-1, keepdims=True), 1e-30)
    similarity = np.sum(unit[:, 1:] * unit[:, :-1], axis=-1)
    entries = 1 + np.sum(similarity <= config.similarity_threshold, axis=1)
    return KvCompressionResult(config, n_tokens, n_middle, float(entries.mean()))


# ------------------------------------------------------------------- speculative decoding


def expected_tokens_per_step(gamma: int, alpha: float) -> float:
    """Tokens a speculative step yields on average: (1 − α^(γ+1)) / (1 − α); γ + 1 at α = 1."""
    if gamma < 0:
        raise ValueError("draft length gamma must be non-negative")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError("acceptance alpha must be in [0, 1]")
    if alpha == 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


@dataclass(frozen=True)
class Speculation:
    """Draft model proposing `gamma` tokens per step, each accepted with probability `alpha`."""

    draft: ModelConfig
    gamma: int
    alpha: float

    def __post_init__(self) -> None:
        if self.gamma < 1:
            raise ValueError("speculation needs a draft length gamma >= 1")
        expected_tokens_per_step(self.gamma, self.alpha)

    @property
    def tokens_per_step(self) -> float:
        return expected_tokens_per_step(self.gamma, self.alpha)


# ------------------------------------------------------------------------------ engine


@dataclass(frozen=True)
class EngineConfig:
    """Everything that fixes the engine's cost model; formats are `NUMBER_FORMATS` keys.

    `embedding_format` (None: same as `weight_format`) covers the embedding and output
    head. `materialise_scores` models eager attention, which writes the B·H·T·K score
    and probability matrices to HBM instead of keeping them on chip.
    """

    model: ModelConfig
    gpu: GpuSpec
    tp: int = 1
    weight_format: str = "bf16"
    embedding_format: str | None = None
    kv_format: str = "bf16"
    efficiency: Efficiency = field(default_factory=Efficiency)
    materialise_scores: bool = False
    kv_compression: KvCompressionResult | None = None
    speculation: Speculation | None = None

    def __post_init__(self) -> None:
        if isinstance(self.tp, bool) or not isinstance(self.tp, int) or self.tp < 1:
            raise ValueError(f"tensor parallelism tp must be a positive integer, got {self.tp!r}")
        for name in ("weight_format", "kv_format"):
            if getattr(self, name) not in WEIGHT_FORMATS:
                raise ValueError(f"{name} must be one of {WEIGHT_FORMATS}")
        if self.embedding_format is not None and self.embedding_format not in WEIGHT_FORMATS:
            raise ValueError(f"embedding_format must be one of {WEIGHT_FORMATS}")
        models = [self.model] + ([self.speculation.draft] if self.speculation else [])
        for model in models:
            for dim in ("n_heads", "ffn_hidden"):
                if getattr(model, dim) % self.tp:
                    raise ValueError(
                        f"tp={self.tp} does not divide {dim}={getattr(model, dim)} "
                        f"of {model.name!r}"
                    )


@dataclass(frozen=True)
class MemoryBreakdown:
    """Memory per GPU in bytes: weights, KV cache, peak activations, and the draft model."""

    tp: int
    weights_bytes: float
    kv_cache_bytes: float
    activation_bytes: float
    draft_bytes: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_cache_bytes + self.activation_bytes + self.draft_bytes

    @property
    def all_gpus_bytes(self) -> float:
        return self.tp * self.total_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes


@dataclass(frozen=True)
class DecodeStep:
    """One decode step: the draft's passes (if speculating) then the target's pass."""

    context_before: int
    passes: tuple[ForwardPass, ...]

    @property
    def time_s(self) -> float:
        return sum(p.time_s for p in self.passes)

    @property
    def all_reduces(self) -> int:
        return sum(p.all_reduces for p in self.passes)


@dataclass(frozen=True)
class EngineResult:
    """TTFT, TPOT and throughput (compute only), memory, and the passes behind them."""

    prefill: tuple[ForwardPass, ...]
    decode_steps: tuple[DecodeStep, ...]
    ttft_s: float
    tpot_s: float
    decode_tokens_per_s: float
    expected_tokens_per_step: float
    all_reduces_per_token: float
    decode_all_reduce_bytes: int
    memory: MemoryBreakdown
    notes: tuple[str, ...]


class EngineModel:
    """Cost model of one engine configuration; pure functions of their arguments."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        gpu = config.gpu
        self._fp8_compute = is_fp8(config.weight_format) and gpu.has_fp8_tensor_cores
        embedding = config.embedding_format or config.weight_format
        self._embedding_format = embedding
        self._fp8_head = is_fp8(embedding) and gpu.has_fp8_tensor_cores
        self.notes = self._config_notes()

    @property
    def linear_compute_format(self) -> Literal["fp8", "bf16"]:
        """Precision the projection and MLP GEMMs run at."""
        return "fp8" if self._fp8_compute else "bf16"

    def _peak(self, fp8: bool) -> float:
        gpu = self.config.gpu
        if fp8 and gpu.fp8_flops_per_s is not None:
            return gpu.fp8_flops_per_s
        return gpu.bf16_flops_per_s

    def _config_notes(self) -> tuple[str, ...]:
        cfg, gpu = self.config, self.config.gpu
        notes = []
        fp8_stored = [
            name
            for name, fmt in (
                ("weights", cfg.weight_format),
                ("embeddings", self._embedding_format),
                ("KV cache", cfg.kv_format),
            )
            if is_fp8(fmt)
        ]
        if fp8_stored and not gpu.has_fp8_tensor_cores:
            stored = " and ".join(
                [", ".join(fp8_stored[:-1]), fp8_stored[-1]] if len(fp8_stored) > 1 else fp8_stored
            )
            notes.append(
                f"{gpu.name} has no FP8 tensor cores: FP8 {stored} only shrink "
                f"storage and HBM traffic; they are dequantised to BF16 and compute runs at "
                f"the BF16 peak of {gpu.bf16_flops_per_s / 1e12:g} TFLOP/s "
                f"(dequantisation cost not modelled)"
            )
        if self._fp8_compute:
            notes.append(
                "projection and MLP GEMMs run at the FP8 tensor-core peak, which assumes "
                "activations are quantised to FP8 too (see sitssim.workloads.fp8); "
                "attention QK^T and PV stay at the BF16 peak"
            )
        if cfg.tp > cfg.model.n_kv_heads:
            notes.append(
                f"tp={cfg.tp} exceeds the {cfg.model.n_kv_heads} KV heads: K/V projections "
                "and the KV cache are replicated across GPUs"
            )
        if cfg.tp > 1:
            notes.append(
                "times are compute only: the tensor-parallel collectives are listed per pass "
                "for the fabric to time"
            )
        return tuple(notes)

    # -------------------------------------------------------------------- forward pass

    def forward(
        self,
        batch: int,
        new_tokens: int,
        context_before: int,
        logits_tokens: int = 1,
        sparsity: SparsityPlan | None = None,
    ) -> ForwardPass:
        """Cost of pushing `new_tokens` tokens per sequence through the target model.

        `logits_tokens` per sequence go through the output head (1 for prefill, all new
        tokens for a speculative verify). Sparsity masks are taken from the plan's rows
        for positions context_before .. context_before + new_tokens - 1 and are shared
        by the batch's sequences. Compressed KV applies to the cached context only.
        """
        return self._forward(
            self.config.model, batch, new_tokens, context_before, logits_tokens, sparsity, True
        )

    def _forward(
        self,
        model: ModelConfig,
        batch: int,
        new_tokens: int,
        context_before: int,
        logits_tokens: int,
        sparsity: SparsityPlan | None,
        compress: bool,
    ) -> ForwardPass:
        if batch < 1 or new_tokens < 1 or context_before < 0:
            raise ValueError("batch and new_tokens must be >= 1, context_before >= 0")
        if not 1 <= logits_tokens <= new_tokens:
            raise ValueError("logits_tokens must be in 1..new_tokens")
        cfg = self.config
        n, eff, gpu = cfg.tp, cfg.efficiency, cfg.gpu
        w = format_bytes(cfg.weight_format)
        kvb = format_bytes(cfg.kv_format)
        act = format_bytes(ACTIVATION_FORMAT)
        h, q, kv, f = model.hidden, model.q_dim, model.kv_dim, model.ffn_hidden
        kv_repl = n * math.ceil(model.n_kv_heads / n) / model.n_kv_heads
        linear_peak = self._peak(self._fp8_compute)
        core_peak = gpu.bf16_flops_per_s

        def segment(name: str, linear: float, core: float, nbytes: float) -> Segment:
            compute = (linear / linear_peak + core / core_peak) / (n * eff.flops)
            memory = nbytes / (n * gpu.hbm_bytes_per_s * eff.bandwidth)
            return Segment(name, linear + core, nbytes, compute, memory)

        if sparsity is None:
            head_kept = np.ones((new_tokens, model.n_layers, model.n_heads), dtype=bool)
            layer_kept = np.ones((new_tokens, model.n_layers), dtype=bool)
        else:
            head_kept, layer_kept = sparsity.rows(context_before, new_tokens)
            if head_kept.shape[1:] != (model.n_layers, model.n_heads):
                raise ValueError("sparsity plan does not match the model's layers and heads")
        kv_comp = cfg.kv_compression if compress else None
        cached = kv_comp.kept_keys(context_before) if kv_comp else float(context_before)
        keys = cached + np.arange(1, new_tokens + 1, dtype=float)

        attn_params = model.attention_params_per_layer + model.kv_projection_params_per_layer * (
            kv_repl - 1.0
        )
        mlp_params = model.mlp_params_per_layer
        # Elements each kernel reads + writes per token: RMSNorm, QKV GEMM, attention core,
        # output GEMM, residual add; then RMSNorm, up/gate GEMM, gating, down GEMM, add.
        attn_elems = 2 * h + (h + q + 2 * kv) + (q + 2 * kv + q) + (q + h) + 3 * h
        m = model.ffn_matrices
        mlp_elems = 2 * h + (h + (m - 1) * f) + ((m - 1) * f + f) + (f + h) + 3 * h
        ar_bytes = batch * new_tokens * h * act

        # Per-layer quantities as arrays over layers; objects are built once at the end.
        n_active = layer_kept.sum(axis=0)
        heads_per_token = head_kept.sum(axis=2)
        head_keys = (heads_per_token * keys[:, None]).sum(axis=0)
        core = batch * 4.0 * model.head_dim * head_keys
        groups_read = (
            head_kept.reshape(new_tokens, model.n_layers, model.n_kv_heads, model.group_size)
            .any(axis=(0, 3))
            .sum(axis=1)
        )
        kv_read = batch * groups_read * 2 * model.head_dim * kvb * cached * kv_repl
        kv_write = batch * n_active * 2 * kv * kvb * kv_repl
        scores = batch * head_keys * act * 4 if cfg.materialise_scores else 0.0
        attn_linear = 2.0 * batch * n_active * attn_params
        attn_bytes = (
            attn_params * w + kv_read + kv_write + batch * n_active * attn_elems * act + scores
        )
        mlp_linear = 2.0 * batch * n_active * mlp_params
        mlp_bytes = mlp_params * w + batch * n_active * mlp_elems * act
        mean_heads = heads_per_token.sum(axis=0) / np.maximum(n_active, 1)

        layers: list[LayerPass] = []
        collectives: list[Collective] = []
        for layer in range(model.n_layers):
            if n_active[layer] == 0:
                layers.append(LayerPass(layer, True, 0.0, 0.0, _IDLE_ATTENTION, _IDLE_MLP))
                continue
            layers.append(
                LayerPass(
                    layer,
                    False,
                    float(mean_heads[layer]),
                    float(core[layer]),
                    segment(
                        "attention",
                        float(attn_linear[layer]),
                        float(core[layer]),
                        float(attn_bytes[layer]),
                    ),
                    segment("mlp", float(mlp_linear[layer]), 0.0, float(mlp_bytes[layer])),
                )
            )
            if n > 1:
                collectives.append(Collective("all_reduce", layer, "attention", ar_bytes))
                collectives.append(Collective("all_reduce", layer, "mlp", ar_bytes))

        rows = batch * logits_tokens
        head_flops = 2.0 * rows * model.vocab * h
        head_bytes = (
            model.vocab * h * format_bytes(self._embedding_format)
            + rows * h * act
            + rows * model.vocab * format_bytes(LOGITS_FORMAT)
        )
        head_compute = head_flops / (self._peak(self._fp8_head) * n * eff.flops)
        head_memory = head_bytes / (n * gpu.hbm_bytes_per_s * eff.bandwidth)
        lm_head = Segment("lm_head", head_flops, head_bytes, head_compute, head_memory)
        if n > 1:
            collectives.append(Collective("all_gather", None, "lm_head", rows * model.vocab * act))
        return ForwardPass(
            model.name,
            batch,
            new_tokens,
            context_before,
            tuple(layers),
            lm_head,
            tuple(collectives),
        )

    def prefill(
        self, batch: int, prompt_tokens: int, sparsity: SparsityPlan | None = None
    ) -> ForwardPass:
        """The prompt pass of the target model (logits for the last position only)."""
        return self.forward(batch, prompt_tokens, 0, 1, sparsity)

    def decode_step(
        self, batch: int, context_before: int, sparsity: SparsityPlan | None = None
    ) -> DecodeStep:
        """One decode step at `context_before` cached tokens (with its draft passes)."""
        spec = self.config.speculation
        if spec is None:
            return DecodeStep(
                context_before, (self.forward(batch, 1, context_before, 1, sparsity),)
            )
        drafts = tuple(
            self._forward(spec.draft, batch, 1, context_before + j, 1, None, False)
            for j in range(spec.gamma)
        )
        verify = self.forward(batch, spec.gamma + 1, context_before, spec.gamma + 1, sparsity)
        return DecodeStep(context_before, (*drafts, verify))

    # -------------------------------------------------------------------------- memory

    def memory(
        self, batch: int, context_len: int, prompt_tokens: int | None = None
    ) -> MemoryBreakdown:
        """Per-GPU memory with `context_len` tokens cached per sequence.

        Activations are the peak transient of the largest pass: the prefill of
        `prompt_tokens` (default `context_len`) or a decode/verify pass.
        """
        cfg = self.config
        spec = cfg.speculation
        prompt = context_len if prompt_tokens is None else prompt_tokens
        step_tokens = spec.gamma + 1 if spec else 1
        activations = max(
            self._activation_bytes(cfg.model, batch, prompt, prompt, 1),
            self._activation_bytes(cfg.model, batch, step_tokens, context_len, step_tokens),
        )
        kv_keys = cfg.kv_compression.kept_keys(context_len) if cfg.kv_compression else context_len
        draft = 0.0
        if spec:
            draft = self._weight_bytes(spec.draft) + self._kv_bytes(spec.draft, batch, context_len)
        return MemoryBreakdown(
            tp=cfg.tp,
            weights_bytes=self._weight_bytes(cfg.model),
            kv_cache_bytes=self._kv_bytes(cfg.model, batch, kv_keys),
            activation_bytes=activations,
            draft_bytes=draft,
            capacity_bytes=cfg.gpu.memory_bytes,
        )

    def _weight_bytes(self, model: ModelConfig) -> float:
        """Matrices are sharded over the GPUs, norm weights (BF16) replicated on each."""
        n = self.config.tp
        kv_repl = n * math.ceil(model.n_kv_heads / n) / model.n_kv_heads
        norms = model.n_layers * model.norm_params_per_layer + model.hidden
        matrices = model.n_layers * (
            model.attention_params_per_layer
            + model.kv_projection_params_per_layer * (kv_repl - 1.0)
            + model.mlp_params_per_layer
        )
        return (
            matrices * format_bytes(self.config.weight_format) / n
            + model.embedding_params * format_bytes(self._embedding_format) / n
            + norms * format_bytes(ACTIVATION_FORMAT)
        )

    def _kv_bytes(self, model: ModelConfig, batch: int, keys: float) -> float:
        kv_heads_per_gpu = math.ceil(model.n_kv_heads / self.config.tp)
        per_key = 2 * model.n_layers * kv_heads_per_gpu * model.head_dim
        return batch * keys * per_key * format_bytes(self.config.kv_format)

    def _activation_bytes(
        self, model: ModelConfig, batch: int, tokens: int, keys: int, logits_tokens: int
    ) -> float:
        """Residual stream (on every GPU) plus the largest sharded intermediate."""
        n, act = self.config.tp, format_bytes(ACTIVATION_FORMAT)
        rows = batch * tokens
        residual = rows * model.hidden * act
        attention = rows * (2 * model.q_dim + 2 * model.kv_dim) * act / n
        if self.config.materialise_scores:
            attention += 2 * batch * model.n_heads * tokens * keys * act / n
        mlp = rows * model.ffn_matrices * model.ffn_hidden * act / n
        logits = batch * logits_tokens * model.vocab * format_bytes(LOGITS_FORMAT)
        return residual + max(attention, mlp, logits)

    # ----------------------------------------------------------------------------- run

    def run(
        self,
        batch: int,
        prompt_tokens: int,
        generated_tokens: int,
        sparsity: SparsityPlan | None = None,
    ) -> EngineResult:
        """Prefill a prompt and decode `generated_tokens` (the first comes from prefill).

        TTFT is the prefill (target and draft) compute time; TPOT is the decode time over
        the generated_tokens − 1 later tokens. A speculative step at context c yields the
        expected token count, so step k starts floor(k · E) tokens after the prompt.
        A sparsity plan's rows are token positions; it must cover every position a pass
        touches, from 0 to prompt + generated − 2 (plus γ when speculating).
        """
        if generated_tokens < 2:
            raise ValueError("generated_tokens must be >= 2 to define a time per output token")
        cfg = self.config
        spec = cfg.speculation
        prefill = [self.prefill(batch, prompt_tokens, sparsity)]
        if spec:
            prefill.append(self._forward(spec.draft, batch, prompt_tokens, 0, 1, None, False))
        per_step = spec.tokens_per_step if spec else 1.0
        to_decode = generated_tokens - 1
        n_steps = math.ceil(to_decode / per_step)
        steps = tuple(
            self.decode_step(batch, prompt_tokens + math.floor(k * per_step), sparsity)
            for k in range(n_steps)
        )
        decode_s = sum(step.time_s for step in steps)
        tpot = decode_s / to_decode
        # The last sampled token is never fed back, so it never enters the cache.
        memory = self.memory(batch, prompt_tokens + generated_tokens - 1, prompt_tokens)
        notes = list(self.notes)
        if not memory.fits:
            notes.append(
                f"does not fit: {memory.total_bytes / 1e9:.2f} GB per GPU exceeds the "
                f"{cfg.gpu.memory_bytes / 1e9:g} GB of {cfg.gpu.name}"
            )
        return EngineResult(
            prefill=tuple(prefill),
            decode_steps=steps,
            ttft_s=sum(p.time_s for p in prefill),
            tpot_s=tpot,
            decode_tokens_per_s=batch / tpot,
            expected_tokens_per_step=per_step,
            all_reduces_per_token=sum(step.all_reduces for step in steps) / to_decode,
            decode_all_reduce_bytes=steps[0].passes[-1].all_reduce_bytes,
            memory=memory,
            notes=tuple(notes),
        )
