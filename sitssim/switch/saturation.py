"""Saturation throughput of a crossbar bench, measured from what its receivers saw.

``metrics.switch.saturation_throughput`` is the cells delivered per receiver per cell time
while every input of the switch is backlogged: the quantity of Karol, Hluchyj and Morgan's
head-of-line blocking result (FIFO inputs: 0.750, 0.655, 0.618 for N = 2, 4, 8) and of
McKeown's VOQs with iSLIP (about 1). It is reported for a ``crossbar`` fabric only, the one
topology whose senders and receivers are distinct GPUs on one switch, so "per receiver"
and "every input" mean what the theory means; every other report is left as it was.

The window
----------
Deliveries (``t_deliver_ns``, the receivers' view) of the data cells from the senders:

- it opens when every sender has had a cell delivered (before that, some input has not
  started) plus a warm-up of ``WARM_UP`` of the span, in which the queues fill from empty;
- it closes at the first moment some sender has had its last cell delivered: from then
  on that input is empty and the others see less contention, so the rate would rise.

Deliveries at or after the window's start and before its end are counted; the rate is
that count over (receivers x window / cell time). The cell time is measured too: the
receivers' channels' busy time per cell they carried (serialisation plus any link-layer
cost), so a link that spends more than a cell's bytes per cell lowers the ceiling of 1.

Backlog
-------
A rate measured over a window where some input ran dry is the offered load, not the
saturation throughput, so the run must show that each input had a cell waiting at every
crossing in the window: right after one of its cells crossed the crossbar (``crossed_ns``,
its serialisation start on the switch's output), the sender had injected at least
``pipeline`` earlier more cells than had crossed. Such a cell is not on its way (it had
time to reach the switch's buffer): it waits at the sender for credit or in the switch's
input buffer. ``pipeline`` is the least time from injection to that buffer, a cell's
serialisation and flight on the sender's link plus the switch's arbitration latency.
Without that, ``saturation_throughput`` is None and ``saturation_backlogged`` false.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sitssim.fabric.messages import KIND_DATA, KIND_NAMES
from sitssim.fabric.topology import CROSSBAR_SWITCH, Fabric, crossbar_ends

WARM_UP = 0.1
"""Share of the span, from the last sender's first delivery, left out as warm-up."""


def _unmeasured(cell_ns: float | None) -> dict[str, object]:
    return {
        "saturation_throughput": None,
        "saturation_backlogged": False,
        "saturation_cells_per_input": 0,
        "saturation_window_ns": None,
        "saturation_cell_ns": cell_ns,
    }


def saturation_metrics(
    fabric: Fabric, messages: pd.DataFrame, links: pd.DataFrame, crossed_ns: np.ndarray
) -> dict[str, object] | None:
    """The ``switch`` metrics section of a crossbar run (None for every other fabric).

    ``messages`` and ``links`` are the run's tables; ``crossed_ns[m]`` is when message
    ``m`` started on the last port it left (for a delivered cell, the switch's output).
    """
    if fabric.kind != "crossbar":
        return None
    senders, receivers = crossbar_ends(fabric)
    out_links = links[(links["src"] == CROSSBAR_SWITCH) & links["dst"].isin(receivers)]
    carried = int(out_links["messages"].sum())
    cell_ns = float(out_links["busy_ns"].sum()) / carried if carried else None
    cells = messages[
        (messages["kind"] == KIND_NAMES[KIND_DATA])
        & messages["src"].isin(senders)
        & messages["dst"].isin(receivers)
    ]
    # Cells are of one size, or "per cell time" means nothing.
    if cell_ns is None or cells["bytes"].nunique() != 1:
        return _unmeasured(cell_ns)
    src = cells["src"].astype(str).to_numpy()
    done = cells["t_deliver_ns"].to_numpy()
    injected = cells["t_inject_ns"].to_numpy()
    crossed = crossed_ns[cells["msg_id"].to_numpy()]
    mine = [src == s for s in senders]
    if not all(m.any() for m in mine):
        return _unmeasured(cell_ns)
    first = max(float(done[m].min()) for m in mine)
    end = min(float(done[m].max()) for m in mine)
    if end <= first:
        return _unmeasured(cell_ns)
    start = first + WARM_UP * (end - first)
    inside = (done >= start) & (done < end)

    sender_channel = fabric.channels[fabric.channel_index[(senders[0], CROSSBAR_SWITCH)]]
    pipeline = (
        float(cells["bytes"].iloc[0]) / sender_channel.bytes_per_ns
        + sender_channel.propagation_ns
        + fabric.node_latency_ns[CROSSBAR_SWITCH]
    )
    backlogged = True
    for m in mine:
        arrived = np.sort(injected[m])
        gone = np.sort(crossed[m])
        at = crossed[m & inside]
        waiting = np.searchsorted(arrived, at - pipeline, side="right") - np.searchsorted(
            gone, at, side="right"
        )
        backlogged = backlogged and bool((waiting > 0).all())
    rate = float(inside.sum()) / (len(receivers) * (end - start) / cell_ns)
    return {
        "saturation_throughput": rate if backlogged else None,
        "saturation_backlogged": backlogged,
        "saturation_cells_per_input": min(int((m & inside).sum()) for m in mine),
        "saturation_window_ns": {"start": start, "end": end},
        "saturation_cell_ns": cell_ns,
    }
