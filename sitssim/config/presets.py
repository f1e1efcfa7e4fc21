"""The Tx preset table Q0..Q10, as data: names, nominal dB and the search grid.

Presets follow the PCIe 6.0 base spec Table 8-x style preset definitions. The 64 GT/s
Q-preset values were not available to us, so the coefficients are the public
PCIe 3.0/4.0/5.0 P0..P10 preset table (Qn = Pn); pre-shoot / de-emphasis in dB and
[c-1, c+1]::

    Q0  0.0 / -6.0   [ 0.000, -0.250]     Q6  2.5 /  0.0   [-0.125,  0.000]
    Q1  0.0 / -3.5   [ 0.000, -0.167]     Q7  3.5 / -6.0   [-0.100, -0.200]
    Q2  0.0 / -4.4   [ 0.000, -0.200]     Q8  3.5 / -3.5   [-0.125, -0.125]
    Q3  0.0 / -2.5   [ 0.000, -0.125]     Q9  3.5 /  0.0   [-0.166,  0.000]
    Q4  0.0 /  0.0   [ 0.000,  0.000]     Q10 0.0 / -9.5   [ 0.000, -0.333]
    Q5  1.9 /  0.0   [-0.100,  0.000]

with c0 = 1 - |c-1| - |c+1|. P10's de-emphasis is specified as the Tx's
maximum boost; we take -9.5 dB (c+1 = -1/3). With a = |c-1|, b = |c+1|:
pre-shoot = 20 log10((c0 - b + a) / (c0 - b - a)) and
de-emphasis = 20 log10((c0 - b - a) / (c0 + b - a)).

Plain Python, so the scenario schema (``sitssim.config.phy_profile``) can check a preset name
without importing the equaliser (numpy, scipy); ``sitssim.phy.equalizer`` turns the rows
into coefficient arrays.
"""

from __future__ import annotations

import itertools
from types import MappingProxyType

# name: (nominal pre-shoot dB, nominal de-emphasis dB, c-1, c+1); c0 = 1 - |c-1| - |c+1|.
PRESET_ROWS: tuple[tuple[str, float, float, float, float], ...] = (
    ("Q0", 0.0, -6.0, 0.000, -0.250),
    ("Q1", 0.0, -3.5, 0.000, -0.167),
    ("Q2", 0.0, -4.4, 0.000, -0.200),
    ("Q3", 0.0, -2.5, 0.000, -0.125),
    ("Q4", 0.0, 0.0, 0.000, 0.000),
    ("Q5", 1.9, 0.0, -0.100, 0.000),
    ("Q6", 2.5, 0.0, -0.125, 0.000),
    ("Q7", 3.5, -6.0, -0.100, -0.200),
    ("Q8", 3.5, -3.5, -0.125, -0.125),
    ("Q9", 3.5, 0.0, -0.166, 0.000),
    ("Q10", 0.0, -9.5, 0.000, -1.0 / 3.0),
)

PRESET_NAMES: tuple[str, ...] = tuple(row[0] for row in PRESET_ROWS)
PRESET_NOMINAL_DB = MappingProxyType({row[0]: (row[1], row[2]) for row in PRESET_ROWS})


def _preset_neighbours() -> dict[str, tuple[str, ...]]:
    """Presets adjacent on the (pre-shoot, de-emphasis) grid of the table."""
    out: dict[str, list[str]] = {name: [] for name in PRESET_NAMES}
    for axis in (0, 1):
        other = 1 - axis
        groups: dict[float, list[tuple[float, str]]] = {}
        for name, db in PRESET_NOMINAL_DB.items():
            groups.setdefault(db[other], []).append((db[axis], name))
        for members in groups.values():
            ordered = [name for _, name in sorted(members)]
            for a, b in itertools.pairwise(ordered):
                out[a].append(b)
                out[b].append(a)
    return {name: tuple(sorted(set(v), key=PRESET_NAMES.index)) for name, v in out.items()}


PRESET_NEIGHBOURS = MappingProxyType(_preset_neighbours())
