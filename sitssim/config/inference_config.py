"""Scenario schema of ``kind: inference`` workloads and of the L5 token-pipeline faults.

An inference workload replays LLM requests (a CSV trace or a synthetic generator)
through an engine whose compute times come from `sitssim.workloads.engine` and
whose tensor-parallel collectives and pipeline transfers cross the simulated
fabric (`sitssim.workloads.inference` drives it). Everything here is plain,
frozen pydantic data; built-in model and GPU names resolve to the
`sitssim.config.catalog` entries, inline mappings are checked by the same
catalog constructors, so a bad field is reported at its own line.

`sitssim.scenario` imports this module, so it must not import `sitssim.scenario`
at module level; located errors come from a function-level import.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sitssim.config.catalog import (
    GPUS,
    MODELS,
    GpuSpec,
    ModelConfig,
    gpu_from_dict,
    model_from_dict,
)
from sitssim.config.collective_config import (
    MIN_NCCL_COMPUTE_CAPABILITY,
    CustomKernel,
    NcclRelease,
)
from sitssim.errors import LocatedValueError
from sitssim.quantities import (
    MAX_BF16,
    MAX_GPUS,
    MAX_TOKENS,
    Interval,
    Items,
    PositiveTime,
    Size,
    Time,
    Tokens,
    count,
    number,
)

Fraction = number(0.0, 1.0)
# Requests in flight, and messages per chunk: one Python object each.
BatchSize = count(1, 2**16)
MessagesPerChunk = count(1, 2**16)
# A log-normal sigma above 3 draws token counts past int64 in its far tail.
LengthSigma = number(0.0, 3.0, open_low=True)
# Activation statistics and FP8 scales are values a GPU holds in BF16 at most.
Magnitude = number(0.0, MAX_BF16, open_low=True)
# A Student-t with more than 1e6 degrees of freedom is a Gaussian to float64.
Nu = number(2.0, 1e6, open_low=True)
# Beta shapes and log-normal parameters of head scores; beyond ±100 every score is 0, 1
# or overflows exp().
ScoreParameter = number(-100.0, 100.0)
# A threshold on those scores; beyond ±1e6 it keeps or skips everything, as ±1e6 does.
Threshold = number(-1e6, 1e6)
NodeName = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")]
WeightFormat = Literal["bf16", "fp16", "fp8_e4m3", "fp8_e5m2"]

DEFAULT_MODEL = "Llama-3-8B"
DEFAULT_GPU = "H100-SXM"
DEFAULT_DRAFT = "Llama-3.2-1B"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _resolve_model(spec: str | dict[str, Any], loc: tuple) -> ModelConfig:
    if isinstance(spec, str):
        if spec not in MODELS:
            raise LocatedValueError(loc, f"unknown model {spec!r}; built in: {sorted(MODELS)}")
        return MODELS[spec]
    try:
        return model_from_dict(spec)
    except (TypeError, ValueError) as exc:
        raise LocatedValueError(loc, str(exc)) from None


def _resolve_gpu(spec: str | dict[str, Any], loc: tuple) -> GpuSpec:
    if isinstance(spec, str):
        if spec not in GPUS:
            raise LocatedValueError(loc, f"unknown GPU {spec!r}; built in: {sorted(GPUS)}")
        return GPUS[spec]
    try:
        return gpu_from_dict(spec)
    except (TypeError, ValueError) as exc:
        raise LocatedValueError(loc, str(exc)) from None


# --- requests ------------------------------------------------------------------


class LengthDistribution(_Strict):
    """A token count drawn per request: fixed, uniform on [low, high], or log-normal."""

    dist: Literal["fixed", "uniform", "lognormal"]
    value: Tokens | None = None
    low: Tokens | None = None
    high: Tokens | None = None
    median: number(0.0, MAX_TOKENS, open_low=True) | None = None
    sigma: LengthSigma | None = None
    max: Tokens | None = None

    @model_validator(mode="after")
    def _parameters(self) -> LengthDistribution:
        needs = {"fixed": ("value",), "uniform": ("low", "high"), "lognormal": ("median", "sigma")}
        allowed = {"fixed": set(), "uniform": set(), "lognormal": {"max"}}
        for key in needs[self.dist]:
            if getattr(self, key) is None:
                raise LocatedValueError((key,), f"distribution {self.dist!r} needs {key!r}")
        for key in ("value", "low", "high", "median", "sigma", "max"):
            if (
                key not in needs[self.dist]
                and key not in allowed[self.dist]
                and getattr(self, key) is not None
            ):
                raise LocatedValueError(
                    (key,), f"{key!r} does not belong to distribution {self.dist!r}"
                )
        if self.dist == "uniform" and self.high < self.low:
            raise LocatedValueError(("high",), "'high' must be at least 'low'")
        return self


TokenCount = Tokens | LengthDistribution


class SyntheticRequests(_Strict):
    """``count`` requests with Poisson or periodic arrivals every ``interval`` (mean)."""

    kind: Literal["generator"]
    count: Items
    prompt_tokens: TokenCount
    generated_tokens: TokenCount
    arrivals: Literal["poisson", "periodic"] = "poisson"
    interval: Interval
    start: Time = 0.0


class TraceRequests(_Strict):
    """Requests replayed from a CSV trace (path relative to the scenario file)."""

    kind: Literal["trace"]
    path: str = Field(min_length=1)
    format: Literal["auto", "azure", "splitwise", "vidur"] = "auto"
    # Rows are read lazily, so a limit costs nothing until rows exist: int64 is its range.
    limit: count(1, 2**63 - 1) | None = None
    # Stretches or compresses a trace's clock; 1e-6..1e6 turns seconds into µs or days.
    time_scale: number(1e-6, 1e6) = 1.0
    start: Time = 0.0


Requests = Annotated[SyntheticRequests | TraceRequests, Field(discriminator="kind")]


# --- engine --------------------------------------------------------------------


class EfficiencyOptions(_Strict):
    flops: number(0.0, 1.0, open_low=True) = 0.7
    bandwidth: number(0.0, 1.0, open_low=True) = 0.8


class ActivationOptions(_Strict):
    """Layer outputs FP8 is tried on: Gaussian or Student-t per layer, or a ``.npz``.

    ``std`` and ``nu`` are one value for every layer or a list with one per layer.
    """

    distribution: Literal["gaussian", "student_t"] = "gaussian"
    std: Magnitude | list[Magnitude] = 1.0
    nu: Nu | list[Nu] | None = None
    npz: str | None = None
    values: Items = 16384

    @model_validator(mode="after")
    def _consistent(self) -> ActivationOptions:
        if self.npz is not None:
            for key in ("distribution", "std", "nu"):
                if key in self.model_fields_set:
                    raise LocatedValueError((key,), f"give either 'npz' or {key!r}, not both")
            return self
        if self.distribution == "student_t" and self.nu is None:
            raise LocatedValueError(("nu",), "a Student-t distribution needs 'nu' (> 2)")
        if self.distribution == "gaussian" and self.nu is not None:
            raise LocatedValueError(("nu",), "'nu' belongs to distribution 'student_t'")
        for key in ("std", "nu"):
            value = getattr(self, key)
            if isinstance(value, list) and not value:
                raise LocatedValueError((key,), "give at least one value")
        return self


class Fp8Options(_Strict):
    """The adaptive FP8 policy (E4M3 unless k·σ/scale exceeds its range) and its inputs."""

    # Standard deviations that must fit the format: 1000 covers any tail one would test.
    k_sigma: number(0.0, 1000.0, open_low=True) = 6.0
    scale: Magnitude = 1.0
    activations: ActivationOptions = Field(default_factory=ActivationOptions)


class HeadScoreOptions(_Strict):
    kind: Literal["beta", "lognormal"] = "beta"
    a: ScoreParameter | list[ScoreParameter] = 2.0
    b: ScoreParameter | list[ScoreParameter] = 2.0


class SparsityOptions(_Strict):
    """Skip heads scoring below ``head_threshold`` (and layers below ``layer_threshold``)."""

    head_threshold: Threshold
    layer_threshold: Threshold | None = None
    scores: HeadScoreOptions = Field(default_factory=HeadScoreOptions)


class KvCompressionOptions(_Strict):
    sink_tokens: count(0, MAX_TOKENS) = 4
    window: count(0, MAX_TOKENS) = 256
    # A cosine similarity.
    similarity_threshold: number(-1.0, 1.0) = 0.9
    # Synthetic keys are one numpy array of sample_tokens × head_dim per KV head.
    sample_tokens: count(1, 2**16) = 2048


class SpeculationOptions(_Strict):
    draft: str | dict[str, Any] = DEFAULT_DRAFT
    # Draft passes per decode step; each is a modelled forward pass.
    gamma: count(1, 1024)
    alpha: Fraction

    @model_validator(mode="after")
    def _draft_known(self) -> SpeculationOptions:
        _resolve_model(self.draft, ("draft",))
        return self

    def resolved_draft(self) -> ModelConfig:
        return _resolve_model(self.draft, ("draft",))


LaunchMode = Literal["graph", "eager", "ideal"]


class LaunchOptions(_Strict):
    """How the host launches a step's kernels (``sitssim.workloads.kernel_launch``): decode
    steps replayed as CUDA graphs and prefill launched eagerly, as serving engines do.

    ``enqueue`` is the host's time to launch one kernel, ``graph`` its time to launch a
    step's graph, ``gap`` the GPU's time between one kernel's end and the next one's start.
    """

    decode: LaunchMode = "graph"
    prefill: LaunchMode = "eager"
    enqueue: PositiveTime = 3000.0
    graph: Time = 15000.0
    gap: Time = 580.0


class EngineOptions(_Strict):
    weight_format: WeightFormat = "bf16"
    kv_format: WeightFormat = "bf16"
    embedding_format: WeightFormat | None = None
    efficiency: EfficiencyOptions = Field(default_factory=EfficiencyOptions)
    materialise_scores: bool = False
    fp8: Fp8Options | None = None
    sparsity: SparsityOptions | None = None
    kv_compression: KvCompressionOptions | None = None
    speculation: SpeculationOptions | None = None
    launch: LaunchOptions = Field(default_factory=LaunchOptions)


class FrameOptions(_Strict):
    """Token frames: where ``latency_hint`` comes from, and whether emission is paced."""

    latency_hint: Literal["measured", "off"] = "measured"
    pacing: bool = True


# --- the workload --------------------------------------------------------------


class InferenceWorkload(_Strict):
    """LLM inference on a group of GPUs: one tensor-parallel group, or pipeline stages."""

    kind: Literal["inference"]
    name: str | None = None
    tenant: NodeName | None = None
    model: str | dict[str, Any] = DEFAULT_MODEL
    gpu: str | dict[str, Any] = DEFAULT_GPU
    gpus: list[NodeName] | count(1, MAX_GPUS) | None = None
    stages: list[list[NodeName]] | None = None
    batch: BatchSize = 1
    batching: Literal["static", "continuous"] = "continuous"
    requests: Requests
    engine: EngineOptions = Field(default_factory=EngineOptions)
    frames: FrameOptions = Field(default_factory=FrameOptions)
    mhf: Literal["off", "naive", "strip"] = "off"
    # 'auto': as NCCL runs them (its choice per call: ring or NVLS, protocol, channels).
    # 'custom': all-reduces as a serving engine's custom kernel (vLLM's one-shot or two-shot,
    # with the costs in 'custom'), every other call and any beyond its buffer as 'auto'.
    collective: Literal["ring", "tree", "direct", "one_shot", "auto", "custom"] = "ring"
    custom: CustomKernel | None = None
    # The NCCL release whose cost model runs 'auto' (and 'custom''s fallbacks).
    nccl: NcclRelease = "2.20"
    max_message: Size = 262144
    min_messages: MessagesPerChunk = 1

    @model_validator(mode="after")
    def _consistent(self) -> InferenceWorkload:
        model = _resolve_model(self.model, ("model",))
        gpu = _resolve_gpu(self.gpu, ("gpu",))
        if (self.collective == "custom") != (self.custom is not None):
            raise LocatedValueError(
                ("custom",),
                "'custom' gives the costs of 'collective: custom', and only of it",
            )
        if self.collective in ("auto", "custom") and (
            not isinstance(self.gpu, str)
            or (gpu.compute_capability or 0.0) < MIN_NCCL_COMPUTE_CAPABILITY
        ):
            raise LocatedValueError(
                ("collective",),
                f"{self.collective!r} runs collectives as NCCL does, whose tables need a "
                f"built-in GPU "
                f"of compute capability {MIN_NCCL_COMPUTE_CAPABILITY} or more; "
                f"'gpu' is {self.gpu!r}",
            )
        if self.gpus is not None and self.stages is not None:
            raise LocatedValueError(
                ("stages",), "give either 'gpus' (one stage) or 'stages', not both"
            )
        if self.stages is not None:
            if not self.stages:
                raise LocatedValueError(("stages",), "give at least one stage")
            sizes = {len(stage) for stage in self.stages}
            if 0 in sizes:
                raise LocatedValueError(("stages",), "every stage needs at least one GPU")
            if len(sizes) > 1:
                raise LocatedValueError(
                    ("stages",), f"every stage needs the same number of GPUs, got {sorted(sizes)}"
                )
            if len(self.stages) > model.n_layers:
                raise LocatedValueError(
                    ("stages",),
                    f"{len(self.stages)} stages for {model.n_layers} layers: at most one "
                    "stage per layer",
                )
            flat = [g for stage in self.stages for g in stage]
            if len(set(flat)) != len(flat):
                raise LocatedValueError(
                    ("stages",), "a GPU appears in more than one stage or twice"
                )
            if self.engine.speculation is not None and len(self.stages) > 1:
                raise LocatedValueError(
                    ("engine", "speculation"),
                    "speculative decoding is modelled on a single stage (no 'stages' pipeline)",
                )
        if isinstance(self.gpus, list):
            if not self.gpus:
                raise LocatedValueError(("gpus",), "give at least one GPU")
            if len(set(self.gpus)) != len(self.gpus):
                raise LocatedValueError(("gpus",), "a GPU is listed twice")
        tp = self.tensor_parallel
        if tp is not None:
            where = ("stages",) if self.stages is not None else ("gpus",)
            for m in [model] + (
                [self.engine.speculation.resolved_draft()] if self.engine.speculation else []
            ):
                for dim in ("n_heads", "ffn_hidden"):
                    if getattr(m, dim) % tp:
                        raise LocatedValueError(
                            where,
                            f"{tp} tensor-parallel GPUs do not divide {dim}="
                            f"{getattr(m, dim)} of {m.name!r}",
                        )
        return self

    @property
    def tensor_parallel(self) -> int | None:
        """GPUs per stage, when the scenario fixes it (None: every GPU of the fabric)."""
        if self.stages is not None:
            return len(self.stages[0])
        if isinstance(self.gpus, list):
            return len(self.gpus)
        return self.gpus

    def resolved_model(self) -> ModelConfig:
        return _resolve_model(self.model, ("model",))

    def resolved_gpu(self) -> GpuSpec:
        return _resolve_gpu(self.gpu, ("gpu",))


# --- faults --------------------------------------------------------------------


class RenumberTokensFault(_Strict):
    """A pipeline stage (or the emitter) that rewrites a field of the frames it forwards.

    ``token_id``: the stage numbers the frames it forwards 0, 1, 2, ... ``ts_logical``:
    it restamps them with its own local time in ns instead of the source's logical clock.
    """

    kind: Literal["renumber_tokens"]
    workload: str | None = None
    stage: count(0, MAX_GPUS) | Literal["emitter"]
    field: Literal["token_id", "ts_logical"] = "token_id"


class PacingIgnoresHintFault(_Strict):
    """An emitter whose pacer spaces every frame by the 5 ms base window, ignoring the hint."""

    kind: Literal["pacing_ignores_hint"]
    workload: str | None = None
