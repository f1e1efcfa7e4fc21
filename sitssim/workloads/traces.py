"""LLM request traces: CSV import and a synthetic generator, as arrays.

Three public trace layouts are recognised by their column names:

========== ======================================== ==============================
format     columns (arrival, prompt, generated)     arrival unit
========== ======================================== ==============================
azure      TIMESTAMP, ContextTokens, GeneratedTokens date-time text (Azure LLM
                                                    inference traces, 2023/2024)
splitwise  arrival_timestamp, prompt_size,          seconds (splitwise-sim)
           token_size
vidur      Time, PromptTokenCount,                  seconds (Vidur trace replay)
           CompletionTokenCount; or arrived_at,
           num_prefill_tokens, num_decode_tokens
========== ======================================== ==============================

Arrivals are taken relative to the earliest row, multiplied by ``time_scale``
(0.01 replays a trace 100× faster) and shifted by ``start``. Token counts
below 1 are raised to 1, as Vidur does, so every request has a prompt and a
first token. Rows are replayed in arrival order. Everything is plain data:
errors are ``ValueError`` with a message naming the column or row, which the
driver places at the scenario field. A trace is read from a regular file only,
and one read whole (no ``limit``) is at most ``MAX_TRACE_BYTES``; token counts
are bounded like the scenario's own (``MAX_TOKENS``), so no count can wrap int64.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sitssim.config.inference_config import (
    LengthDistribution,
    SyntheticRequests,
    TokenCount,
    TraceRequests,
)
from sitssim.errors import InputError, one_line, shown
from sitssim.files import open_regular_file
from sitssim.quantities import MAX_TOKENS

NS_PER_S = 1e9
# The largest public LLM request traces (Azure 2024, a week of requests) are tens of MB
# of CSV; a file 10x that read whole would hold gigabytes of parsed rows.
MAX_TRACE_BYTES = 256 * 2**20

TRACE_COLUMNS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "azure": (("TIMESTAMP", "ContextTokens", "GeneratedTokens"),),
    "splitwise": (("arrival_timestamp", "prompt_size", "token_size"),),
    "vidur": (
        ("Time", "PromptTokenCount", "CompletionTokenCount"),
        ("arrived_at", "num_prefill_tokens", "num_decode_tokens"),
    ),
}


@dataclass(frozen=True, eq=False)
class RequestSet:
    """Requests sorted by arrival: times in ns, token counts as int64."""

    arrival_ns: np.ndarray
    prompt_tokens: np.ndarray
    generated_tokens: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.arrival_ns)
        if len(self.prompt_tokens) != n or len(self.generated_tokens) != n:
            raise ValueError("one prompt and one generated count per arrival")

    def __len__(self) -> int:
        return len(self.arrival_ns)


def _sorted(arrival_ns: np.ndarray, prompt: np.ndarray, generated: np.ndarray) -> RequestSet:
    order = np.argsort(arrival_ns, kind="stable")
    return RequestSet(
        arrival_ns[order].astype(float),
        np.maximum(prompt[order], 1).astype(np.int64),
        np.maximum(generated[order], 1).astype(np.int64),
    )


def _detect(columns: pd.Index, fmt: str) -> tuple[str, tuple[str, str, str]]:
    candidates = TRACE_COLUMNS.items() if fmt == "auto" else [(fmt, TRACE_COLUMNS[fmt])]
    for name, layouts in candidates:
        for layout in layouts:
            if all(c in columns for c in layout):
                return name, layout
    wanted = "; ".join(
        f"{name}: {', '.join(layout)}" for name, layouts in candidates for layout in layouts
    )
    raise ValueError(f"columns {list(columns)} match no trace layout ({wanted})")


def _counts(frame: pd.DataFrame, column: str) -> np.ndarray:
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero(
            ~np.isfinite(values) | (values != np.floor(values)) | (values > MAX_TOKENS)
        )
    if bad.size:
        raise ValueError(
            f"column {column!r}, data row {bad[0] + 1}: expected a whole number of tokens "
            f"up to {MAX_TOKENS}, got {shown(frame[column].iloc[bad[0]])}"
        )
    return values.astype(np.int64)


def read_trace(path: Path, fmt: str = "auto", limit: int | None = None) -> tuple[str, RequestSet]:
    """Read a CSV trace; return the detected format and its first ``limit`` rows (by file order).

    Arrivals are in ns relative to the earliest of the rows kept.
    """
    try:
        file = open_regular_file(str(path), "trace")
    except InputError as exc:
        raise ValueError(f"{path}: {exc.message}") from None
    with file:
        size = os.fstat(file.fileno()).st_size
        if limit is None and size > MAX_TRACE_BYTES:
            raise ValueError(
                f"trace {path} is {size} bytes (bound: {MAX_TRACE_BYTES} bytes when read "
                "whole): give 'limit' to replay its first rows"
            )
        try:
            frame = pd.read_csv(file, nrows=limit, skipinitialspace=True)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read trace {path}: {one_line(str(exc), 120)}") from None
    if frame.empty:
        raise ValueError(f"trace {path} has no requests")
    name, (t_col, p_col, g_col) = _detect(frame.columns, fmt)
    if name == "azure":
        stamps = pd.to_datetime(frame[t_col], errors="coerce", format="mixed")
        bad = np.flatnonzero(stamps.isna().to_numpy())
        if bad.size:
            raise ValueError(
                f"column {t_col!r}, data row {bad[0] + 1}: expected a date-time, "
                f"got {shown(frame[t_col].iloc[bad[0]])}"
            )
        ns = (stamps - stamps.min()).dt.total_seconds().to_numpy() * NS_PER_S
    else:
        seconds = pd.to_numeric(frame[t_col], errors="coerce").to_numpy(dtype=float)
        bad = np.flatnonzero(~np.isfinite(seconds))
        if bad.size:
            raise ValueError(
                f"column {t_col!r}, data row {bad[0] + 1}: expected seconds, "
                f"got {shown(frame[t_col].iloc[bad[0]])}"
            )
        ns = (seconds - seconds.min()) * NS_PER_S
    return name, _sorted(ns, _counts(frame, p_col), _counts(frame, g_col))


def trace_requests(cfg: TraceRequests, base: Path) -> RequestSet:
    """The requests of a ``kind: trace`` section; ``base`` is the scenario file's folder."""
    _, requests = read_trace(base / cfg.path, cfg.format, cfg.limit)
    return RequestSet(
        cfg.start + requests.arrival_ns * cfg.time_scale,
        requests.prompt_tokens,
        requests.generated_tokens,
    )


def draw_counts(spec: TokenCount, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` token counts from a fixed count or a `LengthDistribution`."""
    if not isinstance(spec, LengthDistribution):
        return np.full(n, spec, dtype=np.int64)
    if spec.dist == "fixed":
        return np.full(n, spec.value, dtype=np.int64)
    if spec.dist == "uniform":
        return rng.integers(spec.low, spec.high + 1, size=n, dtype=np.int64)
    counts = np.rint(rng.lognormal(np.log(spec.median), spec.sigma, size=n))
    # A heavy tail is cut at the longest sequence a scenario may name, so no draw wraps int64.
    counts = np.minimum(counts, spec.max if spec.max is not None else MAX_TOKENS)
    return np.maximum(counts, 1).astype(np.int64)


def synthetic_requests(cfg: SyntheticRequests, rng: np.random.Generator) -> RequestSet:
    """``count`` requests: gaps exponential (Poisson) or equal to ``interval``; first at start."""
    if cfg.arrivals == "poisson":
        gaps = rng.exponential(cfg.interval, size=cfg.count)
    else:
        gaps = np.full(cfg.count, cfg.interval)
    gaps[0] = 0.0
    arrival = cfg.start + np.cumsum(gaps)
    prompt = draw_counts(cfg.prompt_tokens, cfg.count, rng)
    generated = draw_counts(cfg.generated_tokens, cfg.count, rng)
    return _sorted(arrival, prompt, generated)
