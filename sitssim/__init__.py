"""sitssim: a discrete-event simulator of the SITS2026 GPU-interconnect stack.

Public API::

    scenario = sitssim.load_scenario("scenarios/fat_tree_8gpu.yaml")
    result = sitssim.simulate(scenario, seed=7)
    result.tables["messages"], result.verdicts, result.metrics

    points = sitssim.sweep("studies/load_latency_fat_tree.yaml", out="out/load")
    summary = sitssim.summarise(points, sitssim.load_study("studies/load_latency_fat_tree.yaml"))

The names load on first use (PEP 562): importing any ``sitssim`` module imports this
package first, and the command line must refuse bad input before the model (numpy,
pandas, scipy, networkx, SimPy) is imported at all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sitssim.scenario import Scenario, load_scenario
    from sitssim.simulation import RunResult, simulate

__version__ = "0.1.0"

# Public name -> the module that defines it.
_LAZY = {
    "Scenario": "sitssim.scenario",
    "load_scenario": "sitssim.scenario",
    "RunResult": "sitssim.simulation",
    "simulate": "sitssim.simulation",
    "sweep": "sitssim.sweeps.run",
    "Study": "sitssim.sweeps.study",
    "load_study": "sitssim.sweeps.study",
    "summarise": "sitssim.sweeps.summary",
    # The intervals summarise uses, for a study's own figures (a fraction of runs).
    "wilson_interval": "sitssim.sweeps.statistics",
    "t_half_width": "sitssim.sweeps.statistics",
}

__all__ = [
    "RunResult",
    "Scenario",
    "Study",
    "__version__",
    "load_scenario",
    "load_study",
    "simulate",
    "summarise",
    "sweep",
    "t_half_width",
    "wilson_interval",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sitssim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    # Cached: later look-ups are ordinary attribute reads.
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
