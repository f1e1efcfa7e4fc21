"""waves.vcd: every link's LTSSM state, EQ phase and measured BER, for GTKWave.

One scope per link (``links.<name>``, with '.' in node names written as '_'
because VCD viewers split scopes on '.'), holding:

* ``ltssm``: the LTSSM state name (a string signal);
* ``eq_phase``: 0-3 while in a Recovery.Equalization phase, ``x`` otherwise;
* ``ber``: the worse direction's measured BER of the last training cycle
  (errors / bits, updated at the end of each cycle; 0 before the first).

and one scope per link direction that saw link-layer trouble
(``channels.<src>_to_<dst>``), holding ``replays`` (a running count of replay,
Nak-timeout and Recovery events) and ``credit_stall`` (1 while the sender has
a class stalled for lack of flow-control credit). Those events happen on the
traffic clock and are shifted by ``traffic_start_ns`` onto the PHY clock.

With input-queued switches (the ``vc_occupancy`` table), one scope per switch
(``switches.<switch>``) holds an integer signal ``<port>_vc<vc>`` per input buffer
that held a message: its occupancy in messages, as it stands after each instant's
changes (a message that arrives and crosses at one instant does not show). Those are
traffic-clock times too. A run without PHY tables writes the file when it has
switch occupancy; its time is then the traffic clock (``traffic_start_ns`` is 0).

Time is the PHY clock (0 = the reset) in picoseconds. The file is written from
the run's tables only, and carries no wall-clock date, so it is reproducible.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from vcd import VCDWriter

from sitssim import __version__
from sitssim.phy.ltssm import EQ_PHASES

_PS_PER_NS = 1000


def _ps(t_ns: float) -> int:
    return round(t_ns * _PS_PER_NS)


def _scope(link: str) -> str:
    return "links." + link.replace(".", "_")


def _signal_name(name: str) -> str:
    """A node or port name as a VCD identifier: only letters, digits and '_'."""
    return re.sub(r"[^0-9A-Za-z_]", "_", name).strip("_")


def _channel_changes(
    tables: dict[str, pd.DataFrame], traffic_start_ns: float
) -> dict[str, list[tuple[int, str, int]]]:
    """Per channel name, (time ps, signal, value) changes of replays and credit stalls."""
    out: dict[str, list[tuple[int, str, int]]] = {}
    replays = tables.get("replays")
    if replays is not None:
        for name, group in replays.groupby("link", sort=True):
            times = sorted(group["t_ns"])
            out.setdefault(name, []).extend(
                (_ps(t + traffic_start_ns), "replays", k + 1) for k, t in enumerate(times)
            )
    stalls = tables.get("credits")
    if stalls is not None:
        for name, group in stalls.groupby("link", sort=True):
            changes = out.setdefault(name, [])
            for r in group.itertuples():
                changes.append((_ps(r.start_ns + traffic_start_ns), "credit_stall", 1))
                changes.append((_ps(r.end_ns + traffic_start_ns), "credit_stall", 0))
    return out


def _occupancy_changes(
    occupancy: pd.DataFrame, traffic_start_ns: float, writer: VCDWriter
) -> Iterator[tuple[int, int, str, Any]]:
    """Register a signal per switch buffer of ``occupancy`` now (a VCD declares every
    signal before its first change); return its changes in time order, for the merge with
    the other changes. A saturated switch changes its buffers at every cell time, so the
    rows stay in arrays and become change tuples one at a time, never all at once."""
    lanes = occupancy.groupby(["switch", "port", "vc"], sort=True)
    signals = [
        writer.register_var(
            "switches." + _signal_name(switch),
            f"{_signal_name(port)}_vc{vc}",
            "integer",
            size=32,
            init=0,
        )
        for switch, port, vc in lanes.size().index
    ]
    lane = lanes.ngroup().to_numpy()
    # As _ps rounds, element by element.
    t_ps = np.round((occupancy["t_ns"].to_numpy(dtype=float) + traffic_start_ns) * _PS_PER_NS)
    values = occupancy["occupancy"].to_numpy()
    order = np.argsort(t_ps, kind="stable").tolist()
    return ((int(t_ps[k]), -1, "", (signals[lane[k]], int(values[k]))) for k in order)


def write_vcd(tables: dict[str, pd.DataFrame], path: Path, traffic_start_ns: float = 0.0) -> bool:
    """Write the waves of ``tables`` to ``path``; False (nothing written) without PHY
    tables or switch occupancy."""
    states = tables.get("link_states")
    if states is None:
        states = pd.DataFrame(columns=["link", "state_id", "t_enter_ns", "state"])
    occupancy = tables.get("vc_occupancy")
    if occupancy is None:
        occupancy = pd.DataFrame(columns=["switch", "port", "vc", "t_ns", "occupancy"])
    if states.empty and occupancy.empty:
        return False
    channel_changes = _channel_changes(tables, traffic_start_ns)
    windows = tables.get("ber_windows", pd.DataFrame(columns=["link", "t_ns", "bits", "errors"]))
    phase_of = {state.value: i for i, state in enumerate(EQ_PHASES)}
    changes: list[tuple[int, int, str, Any]] = []
    links = sorted(states["link"].unique())
    order_of = {link: order for order, link in enumerate(links)}
    # One pass over each table (not one filter per link): at a thousand links the
    # per-link filters cost seconds. The sort below is stable, so each link's rows keep
    # their state_id order, and a link's BER changes follow its states at equal times.
    ordered = states.sort_values(["link", "state_id"], kind="stable")
    for link, t_ns, state in zip(
        ordered["link"].tolist(),
        ordered["t_enter_ns"].tolist(),
        ordered["state"].tolist(),
        strict=True,
    ):
        t, order = _ps(t_ns), order_of[link]
        changes.append((t, order, "ltssm", state))
        changes.append((t, order, "eq_phase", phase_of.get(state, "x")))
    if len(windows):
        ratio = windows["errors"] / windows["bits"]
        ber = ratio.groupby([windows["link"], windows["t_ns"]], sort=True).max()
        for (link, t_ns), value in ber.items():
            if link in order_of:
                changes.append((_ps(float(t_ns)), order_of[link], "ber", float(value)))
    changes.sort(key=lambda c: (c[0], c[1]))
    with (
        open(path, "w", encoding="utf-8") as out,
        VCDWriter(
            out,
            timescale="1 ps",
            date="",
            comment="sitssim PHY waves; time = PHY clock (0 = reset)"
            if len(states)
            else "sitssim waves; time = traffic clock",
            version=f"sitssim {__version__}",
        ) as writer,
    ):
        signals = []
        for link in links:
            scope = _scope(link)
            signals.append(
                {
                    "ltssm": writer.register_var(scope, "ltssm", "string", init=""),
                    "eq_phase": writer.register_var(scope, "eq_phase", "wire", size=2, init="x"),
                    "ber": writer.register_var(scope, "ber", "real", init=0.0),
                }
            )
        for name in sorted(channel_changes):
            scope = "channels." + name.replace(">", "_to_").replace(".", "_")
            channel = {
                "replays": writer.register_var(scope, "replays", "integer", size=32, init=0),
                "credit_stall": writer.register_var(scope, "credit_stall", "wire", size=1, init=0),
            }
            for t, signal, value in channel_changes[name]:
                changes.append((t, -1, signal, (channel[signal], value)))
        changes.sort(key=lambda c: (c[0], c[1]))
        buffers = _occupancy_changes(occupancy, traffic_start_ns, writer)
        for t, order, name, value in heapq.merge(changes, buffers, key=lambda c: (c[0], c[1])):
            if order < 0:
                var, value = value
                writer.change(var, t, value)
                continue
            if isinstance(value, float) and not math.isfinite(value):
                continue
            writer.change(signals[order][name], t, value)
    return True
