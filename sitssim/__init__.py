"""sitssim: a discrete-event simulator of the SITS2026 GPU-interconnect stack.

Public API::

    scenario = sitssim.load_scenario("scenarios/fat_tree_8gpu.yaml")
    result = sitssim.simulate(scenario, seed=7)
    result.tables["messages"], result.verdicts, result.metrics
"""

__version__ = "0.1.0"

from sitssim.scenario import Scenario, load_scenario
from sitssim.simulation import RunResult, simulate

__all__ = ["RunResult", "Scenario", "__version__", "load_scenario", "simulate"]
