"""Model architectures, GPU specifications and number formats, as data.

Theory of operation
-------------------
The engine model (`sitssim.workloads.engine`) derives every compute time and byte
count from three pieces of data kept here:

* a `ModelConfig`: the shape of a decoder-only transformer (layers, widths, heads,
  vocabulary). Parameter counts are *computed* from the shape, never typed in;
* a `GpuSpec`: HBM bandwidth and capacity and dense tensor-core peaks, as printed in
  the vendor datasheets (sparsity figures halved to dense);
* a number format: bytes per element, taken from the numpy / `ml_dtypes` dtype.

Built-in entries live in `MODELS` and `GPUS`; `model_from_dict` and `gpu_from_dict`
build further ones from plain mappings (so a YAML scenario can supply them) and
reject unknown or meaningless fields with a `ValueError` that names the field.
Units: bytes, bytes/s, FLOP/s.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import ml_dtypes
import numpy as np

from sitssim.errors import shown

NUMBER_FORMATS: Mapping[str, np.dtype] = MappingProxyType(
    {
        "fp32": np.dtype(np.float32),
        "fp16": np.dtype(np.float16),
        "bf16": np.dtype(ml_dtypes.bfloat16),
        "fp8_e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
        "fp8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    }
)


def format_bytes(name: str) -> int:
    """Bytes per element of the number format `name` (a key of `NUMBER_FORMATS`)."""
    try:
        return NUMBER_FORMATS[name].itemsize
    except KeyError:
        raise ValueError(
            f"unknown number format {name!r}; expected one of {sorted(NUMBER_FORMATS)}"
        ) from None


def is_fp8(name: str) -> bool:
    """True for the 8-bit floating-point formats."""
    return format_bytes(name) == 1


# Implementation ranges of an inline model or GPU (never a claim about real hardware):
# per-layer and per-head arrays are drawn for every decode position, so layers and heads
# stay in the thousands (the largest open models have about 126 layers and 128 heads);
# widths and vocabularies stay below 2^20 (the largest vocabulary is about 2^18); rates
# and capacities below 1e21 per second or bytes (HBM is about 1e13 B/s, FP8 about 1e16).
MAX_LAYERS_OR_HEADS = 4096
MAX_MODEL_WIDTH = 2**20
MAX_GPU_FIGURE = 1e21
_SMALL_FIELDS = frozenset({"n_layers", "n_heads", "n_kv_heads"})


def _require_positive_int(owner: str, field: str, value: object) -> None:
    high = MAX_LAYERS_OR_HEADS if field in _SMALL_FIELDS else MAX_MODEL_WIDTH
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= high:
        raise ValueError(
            f"{owner}: field {field!r} must be a whole number from 1 to {high}, got {shown(value)}"
        )


def _require_positive_float(owner: str, field: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= MAX_GPU_FIGURE
    ):
        raise ValueError(
            f"{owner}: field {field!r} must be a positive number up to {MAX_GPU_FIGURE:g}, "
            f"got {shown(value)}"
        )


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a decoder-only transformer with grouped-query attention.

    `ffn_matrices` is 3 for a gated MLP (SwiGLU: gate, up, down) and 2 for a plain one.
    Norm weights (two RMSNorms per layer and a final one) are counted; biases are not,
    because the Llama family has none.
    """

    name: str
    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_hidden: int
    vocab: int
    ffn_matrices: int = 3
    tied_embeddings: bool = False

    def __post_init__(self) -> None:
        owner = f"model {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"{owner}: field 'name' must be a non-empty string")
        for field in (
            "n_layers",
            "hidden",
            "n_heads",
            "n_kv_heads",
            "head_dim",
            "ffn_hidden",
            "vocab",
            "ffn_matrices",
        ):
            _require_positive_int(owner, field, getattr(self, field))
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"{owner}: n_heads ({self.n_heads}) must be a multiple of "
                f"n_kv_heads ({self.n_kv_heads})"
            )
        if self.ffn_matrices not in (2, 3):
            raise ValueError(f"{owner}: field 'ffn_matrices' must be 2 or 3")
        if not isinstance(self.tied_embeddings, bool):
            raise ValueError(f"{owner}: field 'tied_embeddings' must be true or false")

    @property
    def q_dim(self) -> int:
        """Width of the concatenated query heads."""
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of the concatenated key (or value) heads."""
        return self.n_kv_heads * self.head_dim

    @property
    def group_size(self) -> int:
        """Query heads sharing one key/value head."""
        return self.n_heads // self.n_kv_heads

    @property
    def attention_params_per_layer(self) -> int:
        """Q, K, V and output projections of one layer."""
        return self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden

    @property
    def kv_projection_params_per_layer(self) -> int:
        """The K and V projections alone (replicated when TP exceeds the KV heads)."""
        return 2 * self.hidden * self.kv_dim

    @property
    def mlp_params_per_layer(self) -> int:
        return self.ffn_matrices * self.hidden * self.ffn_hidden

    @property
    def norm_params_per_layer(self) -> int:
        return 2 * self.hidden

    @property
    def params_per_layer(self) -> int:
        return (
            self.attention_params_per_layer + self.mlp_params_per_layer + self.norm_params_per_layer
        )

    @property
    def embedding_params(self) -> int:
        """Input embedding plus output head (one matrix when tied)."""
        copies = 1 if self.tied_embeddings else 2
        return copies * self.vocab * self.hidden

    @property
    def n_params(self) -> int:
        """Total parameter count, computed from the shape."""
        return self.n_layers * self.params_per_layer + self.embedding_params + self.hidden

    def kv_bytes_per_token(self, kv_format: str) -> int:
        """KV-cache bytes one token occupies across all layers (K and V)."""
        return 2 * self.n_layers * self.kv_dim * format_bytes(kv_format)


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet figures of one GPU. `fp8_flops_per_s` is None without FP8 tensor cores."""

    name: str
    hbm_bytes_per_s: float
    memory_bytes: float
    bf16_flops_per_s: float
    fp8_flops_per_s: float | None
    compute_capability: float | None = None
    """CUDA compute capability (8.0 Ampere, 9.0 Hopper): what NCCL keys its tuning on."""

    def __post_init__(self) -> None:
        owner = f"gpu {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"{owner}: field 'name' must be a non-empty string")
        for field in ("hbm_bytes_per_s", "memory_bytes", "bf16_flops_per_s"):
            _require_positive_float(owner, field, getattr(self, field))
        if self.fp8_flops_per_s is not None:
            _require_positive_float(owner, "fp8_flops_per_s", self.fp8_flops_per_s)
        if self.compute_capability is not None:
            _require_positive_float(owner, "compute_capability", self.compute_capability)

    @property
    def has_fp8_tensor_cores(self) -> bool:
        return self.fp8_flops_per_s is not None


# Meta-Llama-3-8B, config.json on the Hugging Face hub (meta-llama/Meta-Llama-3-8B):
# hidden_size 4096, intermediate_size 14336, 32 layers, 32 heads, 8 KV heads,
# vocab_size 128256, tie_word_embeddings false.
LLAMA3_8B = ModelConfig(
    name="Llama-3-8B",
    n_layers=32,
    hidden=4096,
    n_heads=32,
    n_kv_heads=8,
    head_dim=128,
    ffn_hidden=14336,
    vocab=128256,
)

# Llama-3.2-1B, config.json (meta-llama/Llama-3.2-1B): hidden_size 2048,
# intermediate_size 8192, 16 layers, 32 heads, 8 KV heads, head_dim 64, tied embeddings.
# Same tokenizer as Llama-3-8B, hence usable as its speculative-decoding draft.
LLAMA32_1B = ModelConfig(
    name="Llama-3.2-1B",
    n_layers=16,
    hidden=2048,
    n_heads=32,
    n_kv_heads=8,
    head_dim=64,
    ffn_hidden=8192,
    vocab=128256,
    tied_embeddings=True,
)

_GB = 1e9
_TFLOPS = 1e12

# NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web):
# A100 80GB SXM: BF16 tensor core 312 TFLOPS dense (624 with sparsity), 80 GB HBM2e,
# 2,039 GB/s. Ampere tensor cores have no FP8 mode. Compute capability 8.0 (CUDA C++
# Programming Guide, "Compute Capabilities"; H100 is 9.0).
A100_80GB = GpuSpec(
    name="A100-80GB",
    hbm_bytes_per_s=2039 * _GB,
    memory_bytes=80 * _GB,
    bf16_flops_per_s=312 * _TFLOPS,
    fp8_flops_per_s=None,
    compute_capability=8.0,
)

# NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column: 80 GB, 3.35 TB/s,
# BF16 1,979 and FP8 3,958 TFLOPS "with sparsity", i.e. 989 and 1,979 dense.
H100_SXM = GpuSpec(
    name="H100-SXM",
    hbm_bytes_per_s=3350 * _GB,
    memory_bytes=80 * _GB,
    bf16_flops_per_s=989 * _TFLOPS,
    fp8_flops_per_s=1979 * _TFLOPS,
    compute_capability=9.0,
)

# NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column: 141 GB HBM3e, 4.8 TB/s,
# tensor-core peaks as H100 SXM (same GH100 die): 989 BF16 / 1,979 FP8 TFLOPS dense.
H200 = GpuSpec(
    name="H200",
    hbm_bytes_per_s=4800 * _GB,
    memory_bytes=141 * _GB,
    bf16_flops_per_s=989 * _TFLOPS,
    fp8_flops_per_s=1979 * _TFLOPS,
    compute_capability=9.0,
)

MODELS: Mapping[str, ModelConfig] = MappingProxyType({m.name: m for m in (LLAMA3_8B, LLAMA32_1B)})
GPUS: Mapping[str, GpuSpec] = MappingProxyType({g.name: g for g in (A100_80GB, H100_SXM, H200)})


def _check_fields(
    owner: str, data: Mapping[str, Any], cls: type, optional: frozenset[str] = frozenset()
) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{owner}: unknown field {unknown[0]!r}; expected some of {sorted(known)}")
    required = {
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    missing = sorted(required - set(data) - optional)
    if missing:
        raise ValueError(f"{owner}: missing field {missing[0]!r}")


def model_from_dict(data: Mapping[str, Any]) -> ModelConfig:
    """Build a `ModelConfig` from a plain mapping; `head_dim` defaults to hidden / n_heads."""
    owner = f"model {data.get('name', '?')!r}"
    _check_fields(owner, data, ModelConfig, optional=frozenset({"head_dim"}))
    fields = dict(data)
    if "head_dim" not in fields:
        hidden, heads = fields["hidden"], fields["n_heads"]
        _require_positive_int(owner, "hidden", hidden)
        _require_positive_int(owner, "n_heads", heads)
        if hidden % heads:
            raise ValueError(f"{owner}: give 'head_dim' when hidden is not a multiple of n_heads")
        fields["head_dim"] = hidden // heads
    return ModelConfig(**fields)


def gpu_from_dict(data: Mapping[str, Any]) -> GpuSpec:
    """Build a `GpuSpec` from a plain mapping; omit `fp8_flops_per_s` for no FP8 support and
    `compute_capability` if it is not known."""
    owner = f"gpu {data.get('name', '?')!r}"
    fields = {"fp8_flops_per_s": None, **data}
    _check_fields(owner, fields, GpuSpec)
    return GpuSpec(**fields)
