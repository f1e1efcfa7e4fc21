"""Every stage of a run, in the one order the run meets them.

The order is the order of building, of starting on the transport (so, at equal times, of
events: reordering changes results), of the pre-run checks (the first failing one names
the error), and of the tables and metrics in the results. A new stage is one module and
one line here.
"""

from __future__ import annotations

from sitssim.stages import (
    cdc,
    clocks,
    collectives,
    credits,
    flit,
    inference,
    phy,
    schedule,
    transactions,
)
from sitssim.stages.base import Check, StageSpec

STAGES: tuple[StageSpec, ...] = (
    phy.STAGE,
    cdc.STAGE,
    schedule.STAGE,
    flit.STAGE,
    credits.STAGE,
    collectives.STAGE,
    clocks.STAGE,
    inference.STAGE,
    transactions.STAGE,
)

CHECKS: tuple[Check, ...] = tuple(s.check for s in STAGES if s.check is not None)
"""The stages' pre-run checks, in registry order: what ``preflight`` (so ``validate``) runs."""
