"""The injection schedule: the transport's input, every open-loop message of a run.

Open-loop arrivals do not depend on the fabric's state, so workloads draw them before the
run starts and hand the transport one time-sorted table that a single injector walks. The
type lives with the engine that consumes it; the workloads that build it import it from
here, so imports point down.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Schedule:
    """Pre-drawn injections, sorted by time (ties keep workload, then source order).

    One row per message: columns are parallel arrays; ``src``/``dst`` are node ids,
    ``kind`` a code from :mod:`sitssim.fabric.messages`, ``workload`` the index of the
    scenario workload that drew it.
    """

    t_ns: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    size: np.ndarray
    tenant: np.ndarray
    kind: np.ndarray
    workload: np.ndarray

    def __len__(self) -> int:
        return len(self.t_ns)
