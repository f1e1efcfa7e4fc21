"""The ``Stage`` seam: one concern of a run (a layer, a workload kind) wired into it.

ns-3's helper/model split: the layer packages (``phy``, ``link``, ``fabric``, ``workloads``)
hold the models and know nothing of a run; a stage is the helper that builds a model from
the scenario and the fabric, starts it on the transport, and reads its tables and metrics
back. ``simulate()`` and ``preflight()`` are loops over one ordered registry of stages
(:mod:`sitssim.stages.registry`), so ``validate`` runs exactly the checks ``run`` runs and
a new concern is one module plus one registry line, never an edit of the orchestrator.

A stage is two objects: a :class:`StageSpec` (its name, its section selector, its pre-run
check and its builder: what exists before any run) and the :class:`Stage` its builder
returns (the built models of one run). The check is kept apart from the builder because
``validate`` must run it without building anything.

Each stage reads its own config section: the spec's ``section`` picks it out of the
scenario, and the check and the builder receive that section, the fabric and a
:class:`~sitssim.errors.Locator` (at the scenario's root, so a section that keeps the
scenario's indices, such as a workload's, locates its errors exactly as the whole
scenario would). So a model depends on its own section's schema only, and a stage's
inputs are visible in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np

from sitssim.errors import Locator
from sitssim.fabric.schedule import Schedule
from sitssim.workloads.section import WorkloadSection

if TYPE_CHECKING:
    import pandas as pd

    from sitssim.fabric.topology import Fabric
    from sitssim.fabric.transport import Transport
    from sitssim.link.credit_link import CreditLink
    from sitssim.link.flit_link import FlitLink, Recover
    from sitssim.scenario import Scenario

S = TypeVar("S")

SectionCheck = Callable[[S, "Fabric", Locator], None]
"""A pre-run check of one section: raises a located ``InputError`` for input the run
would refuse."""

Builder = Callable[[S, "Fabric", "Wiring", Locator], "Stage"]
"""Builds one run's stage from its section."""


def empty_schedule() -> Schedule:
    """A schedule with no injection: the transport's input when no workload draws one."""
    return Schedule(np.zeros(0), *(np.zeros(0, dtype=np.int64) for _ in range(6)))


@dataclass
class Wiring:
    """What the stages hand the transport, and each other, while one run is built.

    Filled in registry order: a field is read only by a stage after the one that sets it
    (the flit stage times a REPLAY_NUM rollover's Recovery with the PHY stage's
    ``recover``). The orchestrator builds the transport from it once every stage is built.
    """

    node_id: dict[str, int]
    schedule: Schedule = field(default_factory=empty_schedule)
    flit_links: list[FlitLink | None] | None = None
    credit_links: list[CreditLink | None] | None = None
    recover: Recover | None = None
    message_vcs: tuple[tuple[int, ...], ...] | None = None
    """The VC of each tenant's messages of each flow-control class (``[tenant][class]``);
    None: every message on VC 0."""
    vcs: int = 1
    """How many VCs the messages use: the credit pools of each channel."""
    vc_slots: dict[int, tuple[int, ...]] = field(default_factory=dict)
    """Per channel into a switch, the slots its port's quota table gives each VC (summed
    over tenants), as loaded: the weights of quota-weighted VC arbitration."""
    answered_kinds: frozenset[int] = frozenset()
    """Message kinds an endpoint accepts only while its answer queue has room
    (``fabric.nodes.AnsweringEndpoint``): the requests of a workload that answers them."""
    answer_slots: int = 1
    """The places of each such endpoint's answer queue."""


@dataclass
class Finished:
    """What a stage reads its tables and metrics from, once the transport has run.

    ``tables`` holds the tables collected so far, in registry order: a stage may read an
    earlier stage's table, and may replace one (the transactions stage adds its probes).
    """

    scenario: Scenario
    fabric: Fabric
    transport: Transport
    simulated_ns: float
    tables: dict[str, pd.DataFrame]


class Stage:
    """The built models of one concern for one run. Every hook defaults to doing nothing,
    so a stage overrides only the ones it needs."""

    def start(self, transport: Transport) -> None:
        """Arm the models on the transport before it runs (registry order is event order)."""

    def finish(self) -> None:
        """Check the models' end-of-run invariants once the transport is idle."""

    def end_ns(self) -> float:
        """When the stage's own activity ended, if later than the traffic (0: it did not)."""
        return 0.0

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        """The stage's tables, by name (an existing name replaces that table in place)."""
        return {}

    def metrics(self, run: Finished) -> dict[str, object]:
        """The stage's sections of the report's metrics; a section that is already there
        (a dict) is extended, so two stages can share one (``link_layer``)."""
        return {}


@dataclass(frozen=True)
class StageSpec(Generic[S]):
    """A registry entry: the stage's name, the selector of its config section, its builder,
    which may check again (a library caller may skip ``preflight``), its pre-run check
    (None: nothing to check), and, for a stage whose models need the packet transport's
    ports, switches or per-packet timing, what those are (``packet_only``): a flow-level
    run (``fidelity: flow``) checks its section but does not build it."""

    name: str
    section: Callable[[Scenario], S]
    builder: Builder[S]
    checker: SectionCheck[S] | None = None
    packet_only: str | None = None

    def check(self, scenario: Scenario, fabric: Fabric) -> None:
        """Run the stage's pre-run check on its section of ``scenario``."""
        if self.checker is not None:
            self.checker(self.section(scenario), fabric, Locator(scenario.error))

    def build(self, scenario: Scenario, fabric: Fabric, wiring: Wiring) -> Stage:
        """Build the stage of one run from its section of ``scenario``."""
        return self.builder(self.section(scenario), fabric, wiring, Locator(scenario.error))


def workload_section(scenario: Scenario, *kinds: type) -> WorkloadSection:
    """The section of the workload stage that drives ``kinds``: its workloads, by index."""
    mine = tuple((i, wl) for i, wl in enumerate(scenario.workloads) if isinstance(wl, kinds))
    return WorkloadSection(
        workloads=mine,
        seed=scenario.seed,
        duration=scenario.duration,
        tenants=tuple(t.name for t in scenario.tenants),
    )
