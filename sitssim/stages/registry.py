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
    ecmp,
    flit,
    inference,
    p2p,
    phy,
    schedule,
    switch_quota,
    switch_tables,
    tenant_requests,
    transactions,
)
from sitssim.stages.base import StageSpec

STAGES: tuple[StageSpec, ...] = (
    phy.STAGE,
    # Before every stage that may inject as it starts: it chooses the routing function,
    # which must see every message from the first. It starts no event of its own.
    ecmp.STAGE,
    cdc.STAGE,
    schedule.STAGE,
    flit.STAGE,
    # Before the credits: it gives messages their VCs, and so the credit pools their count.
    # It starts nothing on the transport, so it moves no event.
    switch_quota.STAGE,
    credits.STAGE,
    collectives.STAGE,
    p2p.STAGE,
    clocks.STAGE,
    inference.STAGE,
    transactions.STAGE,
    tenant_requests.STAGE,
    switch_tables.STAGE,
)

CHECKED: tuple[StageSpec, ...] = tuple(s for s in STAGES if s.checker is not None)
"""The stages that have a pre-run check, in registry order: ``preflight`` (so ``validate``)
runs each one's ``check``."""
