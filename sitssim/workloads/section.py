"""The config section a workload driver reads: its own workloads and the run's figures.

A driver is handed the workloads of its kind, each with its index in the scenario's
``workloads:`` list (the index names the workload in the tables and locates its errors),
and the few run-wide values a workload reads: the seed its streams split from, the
duration an open-ended workload stops at, and the tenants' names. It never sees the
rest of the scenario, so a driver depends on no other section's schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

W = TypeVar("W")


@dataclass(frozen=True)
class WorkloadSection(Generic[W]):
    """The workloads of one kind, by scenario index, and the run-wide values they read."""

    workloads: tuple[tuple[int, W], ...]
    seed: int
    duration: float
    tenants: tuple[str, ...]

    def tenant_index(self, name: str | None) -> int:
        """A workload's tenant as the tables number it (no tenant: the first one)."""
        return self.tenants.index(name or self.tenants[0])
