"""Counts of a CDC FIFO's words made from its recorded events, not from its own counters,
shared by the CDC tests (``tests/link/test_cdc_fifo.py``) and properties
(``tests/properties/test_link_cdc_properties.py``): a bug in the FIFO's occupancy or
overflow bookkeeping shows as a disagreement with these."""

from __future__ import annotations

import pandas as pd

from sitssim.config.cdc_device import flop_timing
from sitssim.link.cdc_fifo import CdcDesign, simulate, worst_case_burst


def counted_occupancy(fifo: pd.DataFrame, ratio: int) -> pd.Series:
    """Each ``fifo``-table trace's occupancy counted again from its events: narrow words
    written, less ``ratio`` for each wide word read, from an empty FIFO."""
    ordered = fifo.sort_values(["link_id", "corner", "cycle"], kind="stable")
    keys = [ordered["link_id"], ordered["corner"]]
    written = ordered["written"].astype(int).groupby(keys, observed=True).cumsum()
    read = ordered["read"].astype(int).groupby(keys, observed=True).cumsum()
    return (written - ratio * read).reindex(fifo.index)


def words_lost_by_count(design: CdcDesign, depth: int, corner: str, words: float = 1.0) -> int:
    """Words the worst-case burst loses in a FIFO of ``depth``, summed over its clock
    phases, counted from the run's events rather than its overflow counter: the words the
    open gate let into the writer's pipeline land ``pipeline`` edges later, and those
    not written were lost."""
    timing = flop_timing(corner)
    burst = worst_case_burst(design, timing, depth, words)
    run = simulate(design, timing, depth, burst)
    edges = run.written.shape[0]
    issued = burst.offer[:edges] & ~run.stop_seen
    landed = issued[: edges - design.pipeline].sum()
    return int(landed - run.written.sum())
