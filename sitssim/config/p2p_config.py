"""Scenario schema of ``kind: p2p`` workloads, apart from the driver that runs them.

A config leaf: ``sitssim.scenario`` imports it, and so does the driver,
``sitssim.workloads.peer_copies``. Nothing here imports the scenario at module level.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sitssim.errors import LocatedValueError, reject_repeats
from sitssim.quantities import MAX_ITEMS, PositiveTime, Size, Time, count

NodeName = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")]

DEFAULT_MAX_MESSAGE_BYTES = 262144


class CopyRun(BaseModel):
    """One test over every pair: ``copies`` copies of ``bytes`` queued back to back, one way
    or both ways at once."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bytes: Size
    copies: count(1, MAX_ITEMS) = 1
    direction: Literal["one_way", "both"] = "one_way"


class P2pWorkload(BaseModel):
    """Copies between pairs of GPUs, timed as CUDA's p2pBandwidthLatencyTest times them.

    Each of ``runs`` in turn, and within it each pair in turn (``pairs``, or every ordered
    pair of ``gpus``): the source's stream holds the run's copies to the peer, queued back
    to back; with ``direction: both`` the peer runs as many copies back at the same time.
    A copy costs its engine ``copy_cost`` to start, then crosses the fabric as the engine's
    write packets (``engine``: a copy engine writes 256 data bytes per packet, an SM 128),
    and the next copy on the stream starts when its last write has landed. The time per
    copy is the span of the pair's copies over their count (``sitssim.workloads.peer_copies``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["p2p"]
    name: str | None = None
    gpus: list[NodeName] | None = None
    pairs: list[tuple[NodeName, NodeName]] | None = None
    engine: Literal["copy_engine", "sm"] = "copy_engine"
    runs: list[CopyRun] = Field(min_length=1)
    copy_cost: PositiveTime
    start: Time = 0.0
    gap: Time = 0.0
    max_message_bytes: Size = DEFAULT_MAX_MESSAGE_BYTES
    tenant: NodeName | None = None

    @model_validator(mode="after")
    def _consistent(self) -> P2pWorkload:
        if self.gpus is not None and self.pairs is not None:
            raise LocatedValueError(("pairs",), "give 'gpus' or 'pairs', not both")
        if self.gpus is not None:
            if len(self.gpus) < 2:
                raise LocatedValueError(("gpus",), "a copy needs at least two GPUs")
            reject_repeats(self.gpus, "gpus", "GPU")
        if self.pairs is not None:
            if not self.pairs:
                raise LocatedValueError(("pairs",), "give at least one pair")
            for k, (src, dst) in enumerate(self.pairs):
                if src == dst:
                    raise LocatedValueError(
                        ("pairs", k), f"a pair needs two GPUs; both are {src!r}"
                    )
        return self
