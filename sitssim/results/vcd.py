"""waves.vcd: every link's LTSSM state, EQ phase and measured BER, for GTKWave.

One scope per link (``links.<name>``, with '.' in node names written as '_'
because VCD viewers split scopes on '.'), holding:

* ``ltssm``: the LTSSM state name (a string signal);
* ``eq_phase``: 0-3 while in a Recovery.Equalization phase, ``x`` otherwise;
* ``ber``: the worse direction's measured BER of the last training cycle
  (errors / bits, updated at the end of each cycle; 0 before the first).

Time is the PHY clock (0 = the reset) in picoseconds. The file is written from
the run's tables only, and carries no wall-clock date, so it is reproducible.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
from vcd import VCDWriter

from sitssim import __version__
from sitssim.phy.ltssm import EQ_PHASES

_PS_PER_NS = 1000


def _ps(t_ns: float) -> int:
    return round(t_ns * _PS_PER_NS)


def _scope(link: str) -> str:
    return "links." + link.replace(".", "_")


def write_vcd(tables: dict[str, pd.DataFrame], path: Path) -> bool:
    """Write the waves of ``tables`` to ``path``; False (nothing written) without PHY tables."""
    states = tables.get("link_states")
    if states is None or states.empty:
        return False
    windows = tables.get("ber_windows", pd.DataFrame(columns=["link", "t_ns", "bits", "errors"]))
    phase_of = {state.value: i for i, state in enumerate(EQ_PHASES)}
    changes: list[tuple[int, int, str, Any]] = []
    links = sorted(states["link"].unique())
    for order, link in enumerate(links):
        mine = states[states["link"] == link].sort_values("state_id")
        for r in mine.itertuples():
            t = _ps(r.t_enter_ns)
            changes.append((t, order, "ltssm", r.state))
            changes.append((t, order, "eq_phase", phase_of.get(r.state, "x")))
        measured = windows[windows["link"] == link]
        if len(measured):
            ber = (measured["errors"] / measured["bits"]).groupby(measured["t_ns"]).max()
            for t_ns, value in ber.items():
                changes.append((_ps(float(t_ns)), order, "ber", float(value)))
    changes.sort(key=lambda c: (c[0], c[1]))
    with (
        open(path, "w", encoding="utf-8") as out,
        VCDWriter(
            out,
            timescale="1 ps",
            date="",
            comment="sitssim PHY waves; time = PHY clock (0 = reset)",
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
        for t, order, name, value in changes:
            if isinstance(value, float) and not math.isfinite(value):
                continue
            writer.change(signals[order][name], t, value)
    return True
