"""The stage registry drives both commands: ``validate`` runs the stages' checks, ``run``
builds, starts and reads back every stage, in registry order."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pandas as pd
import pytest

import sitssim.simulation as simulation
from sitssim.errors import InputError, Locator
from sitssim.fabric.topology import Fabric, build_fabric
from sitssim.fabric.transport import Transport
from sitssim.preflight import CHECKS, preflight
from sitssim.scenario import Scenario, load_scenario
from sitssim.simulation import simulate
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring
from sitssim.stages.registry import STAGES

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _small(name: str = "fat_tree_8gpu.yaml", duration_ns: float = 2000.0) -> Scenario:
    """A shipped scenario, short: these tests check the wiring, not the figures."""

    def edit(data: dict) -> None:
        for wl in data.get("workloads", []):
            if wl.get("kind") == "inference":
                # An inference stage runs its requests to the end, whatever the duration.
                wl["requests"] = {
                    "kind": "generator",
                    "count": 1,
                    "prompt_tokens": 4,
                    "generated_tokens": 2,
                    "interval": "1us",
                }

    return load_scenario(SCENARIOS / name, edit=edit).updated(duration=duration_ns)


def test_validate_runs_every_stage_check_in_registry_order() -> None:
    assert [s for s in STAGES if s.checker is not None] == CHECKS
    names = [s.name for s in STAGES]
    assert len(set(names)) == len(names)
    # The PHY's references are checked first: every later stage reads the trained links.
    assert names[0] == "phy"
    # The flit stage times Recovery with the PHY stage's recover, so it comes after it.
    assert names.index("flit") > names.index("phy")


class _Spy(Stage):
    """A stage that records each hook, so the test sees when the orchestrator calls it."""

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def start(self, transport: Transport) -> None:
        self.seen.append(f"start at {transport.env.now}")

    def finish(self) -> None:
        self.seen.append("finish")

    def end_ns(self) -> float:
        return 5000.0

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        # Earlier stages' tables are there to read.
        self.seen.append(f"tables after {sorted({'phy_links', 'credits'} & set(run.tables))}")
        return {"spy": pd.DataFrame({"x": [1]})}

    def metrics(self, run: Finished) -> dict[str, object]:
        return {"link_layer": {"spy": True}, "spy": {"simulated_ns": run.simulated_ns}}


def test_a_registered_stage_is_built_started_and_read_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []

    def build(duration: float, fabric: Fabric, wiring: Wiring, where: Locator) -> Stage:
        seen.append(f"build with recover {wiring.recover is not None}")
        return _Spy(seen)

    spy = StageSpec("spy", section=lambda scenario: scenario.duration, builder=build)
    monkeypatch.setattr(simulation, "STAGES", (*STAGES, spy))
    result = simulate(_small())
    assert seen == [
        "build with recover True",
        "start at 0",
        "finish",
        "tables after ['credits', 'phy_links']",
    ]
    # The stage's end stretches the run; its table comes after every earlier stage's.
    assert result.simulated_ns == 5000.0
    names = list(result.tables)
    assert names[-1] == "spy" and names.index("config") < names.index("phy_links")
    # A shared section is extended, not replaced; a new one comes last.
    assert result.metrics["link_layer"]["spy"] is True
    assert "credit_stalls" in result.metrics["link_layer"]
    assert "flits_sent" in result.metrics["link_layer"]
    assert list(result.metrics)[-1] == "spy"
    assert result.metrics["spy"] == {"simulated_ns": 5000.0}


def test_the_metrics_sections_come_in_registry_order() -> None:
    metrics = simulate(_small("llama3_8b_tp8_nvswitch.yaml")).metrics
    keys = list(metrics)
    # The transport's own figures first (ending with simulated_ns), then each stage's.
    assert keys[keys.index("simulated_ns") + 1 :] == ["phy", "link_layer", "inference"]
    assert list(metrics["link_layer"])[:2] == ["links_with_errors", "flits_sent"]
    assert list(metrics["link_layer"])[-1] == "credit_stall_ns"


def test_the_transactions_stage_adds_its_reads_to_the_probes_in_place() -> None:
    result = simulate(_small("direct_rc_host_io.yaml"))
    names = list(result.tables)
    assert names[:2] == ["messages", "probes"]
    assert names[-2:] == ["transactions", "rob_stalls"]
    probes = result.tables["probes"]
    reads = result.tables["messages"]
    from_probes = reads[reads["kind"] == "probe_request"]
    # Every probe request's row, then one per transaction read, which probes alone lack.
    assert len(probes) > len(from_probes) > 0
    assert probes["probe_id"].iloc[: len(from_probes)].tolist() == from_probes["msg_id"].tolist()


def _first_annotation(fn: object) -> str:
    parameter = next(iter(inspect.signature(fn).parameters.values()))
    return str(parameter.annotation)


def _declares_scenario(spec: StageSpec) -> bool:
    """Whether the spec's builder or check is declared to take the ``Scenario``."""
    hooks = [spec.builder] if spec.checker is None else [spec.builder, spec.checker]
    return any("Scenario" in _first_annotation(hook) for hook in hooks)


def _whole_builder(scenario: Scenario, fabric: Fabric, wiring: Wiring, where: Locator) -> Stage:
    return Stage()


def _whole_check(scenario: Scenario, fabric: Fabric, where: Locator) -> None:
    """A check handed the whole scenario, as the PHY stage's once was."""


def _section_builder(duration: float, fabric: Fabric, wiring: Wiring, where: Locator) -> Stage:
    return Stage()


def test_no_stage_builder_or_check_is_declared_to_take_the_scenario() -> None:
    assert [spec.name for spec in STAGES if _declares_scenario(spec)] == []
    # The same test catches a builder or a check alone declared to take it.
    whole = StageSpec("whole", section=lambda scenario: scenario, builder=_whole_builder)
    assert _declares_scenario(whole)
    sectioned = StageSpec("part", section=lambda s: s.duration, builder=_section_builder)
    assert not _declares_scenario(sectioned)
    assert _declares_scenario(dataclasses.replace(sectioned, checker=_whole_check))


@dataclasses.dataclass(frozen=True)
class _Carrying:
    seed: int
    scenario: Scenario


def _carries_scenario(section: object) -> bool:
    """Whether ``section`` is the scenario, or a dataclass with the scenario in a field."""
    if dataclasses.is_dataclass(section):
        fields = [getattr(section, f.name) for f in dataclasses.fields(section)]
    else:
        fields = [section]
    return any(isinstance(v, Scenario) for v in fields)


@pytest.mark.parametrize(
    "name", ["llama3_8b_tp8_nvswitch.yaml", "direct_rc_host_io.yaml", "fat_tree_8gpu.yaml"]
)
def test_each_stage_is_built_and_checked_from_its_own_section_only(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Every builder and check is handed what its selector picks, never the scenario (nor a
    section that carries it along)."""
    received: dict[str, list[object]] = {}

    def spying(spec: StageSpec) -> StageSpec:
        def builder(section: object, *rest: object) -> Stage:
            received.setdefault(spec.name, []).append(section)
            return spec.builder(section, *rest)

        def checker(section: object, *rest: object) -> None:
            received.setdefault(spec.name, []).append(section)
            spec.checker(section, *rest)

        return dataclasses.replace(
            spec, builder=builder, checker=None if spec.checker is None else checker
        )

    spied = tuple(spying(s) for s in STAGES)
    monkeypatch.setattr(simulation, "STAGES", spied)
    monkeypatch.setattr("sitssim.preflight.CHECKS", [s for s in spied if s.checker is not None])
    scenario = _small(name)
    # The spies catch the scenario itself and a section that carries it along.
    assert _carries_scenario(scenario) and _carries_scenario(_Carrying(1, scenario))
    preflight(scenario)
    assert sorted(received) == sorted(s.name for s in STAGES if s.checker is not None)
    received.clear()
    simulate(scenario)
    assert sorted(received) == sorted(s.name for s in STAGES)
    for stage, sections in received.items():
        assert not any(_carries_scenario(section) for section in sections), stage


def test_a_stage_error_is_located_in_the_whole_scenario(tmp_path: Path) -> None:
    """A check handed only its section still names the scenario's file, line and field."""
    text = (SCENARIOS / "fat_tree_8gpu.yaml").read_text()
    assert "workloads:" in text
    text = text.replace(
        "workloads:\n", "workloads:\n  - {kind: collective, sizes: [4KiB], gpus: [gpu0, nope]}\n"
    )
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    scenario = load_scenario(path)
    (collectives,) = [s for s in STAGES if s.name == "collectives"]
    line = text.splitlines().index("workloads:") + 2
    with pytest.raises(InputError) as caught:
        collectives.check(scenario, build_fabric(scenario))
    assert str(caught.value).startswith(f"{path}:{line}: workloads[0].gpus[1]:")
    assert "unknown node 'nope'" in str(caught.value)
