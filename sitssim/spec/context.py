"""What a judge reads: the finished run's tables, nothing else.

Judges see no scenario, fabric or device profile: whatever a clause needs about
the run's configuration (node kinds, the TSO window) is a table the run wrote, so
a faulty device is caught by what it did and a judge can be tested on a hand-made
table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from sitssim.spec.clause import Clause
from sitssim.spec.verdict import Verdict


@dataclass
class RunContext:
    tables: dict[str, pd.DataFrame]


# A judge is handed its clause (so it writes the ID nowhere) and the run.
Judge = Callable[[Clause, RunContext], Verdict]
