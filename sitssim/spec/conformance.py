"""Each clause's witnesses, property tests and basis, as data: the conformance matrix.

SPEC.md asks of every clause a shipped run where it passes and one where it genuinely
fails, the failing one of a kind SPEC.md names for the clause (emergent,
misconfiguration, faulty device, mutation). A witness is an ordinary scenario under
``scenarios/``, run with the catalogue's limits and the registry's judges as they are:
no witness edits a limit or a judge. ``FAILURES`` lists, per failing scenario, every
clause it fails with the reason, so a witness that fails more than one clause says
why for each; ``CONFORMANCE`` lists, per clause, its basis, the witness kinds SPEC.md
names, its passing witnesses and the property tests (files of ``tests/properties/``)
that check it.

``tests/spec/test_conformance.py`` holds this data to the golden reports of the
witnesses (each failing witness fails its clause with evidence rows, and fails no
clause it does not list; each passing witness passes), to the property tests' own
docstrings, and to SPEC.md's clause tables. ``sitssim clauses --matrix`` prints the
matrix, and ``docs/conformance.md`` holds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from sitssim.spec.catalogue import CLAUSES

WitnessKind = Literal["emergent", "misconfiguration", "faulty device", "mutation"]
# What the clause's verdicts rest on, over its witnesses: values the run observed, values
# the scenario or a profile set, or either, depending on which limit is broken.
Basis = Literal["measured", "configured", "both"]


@dataclass(frozen=True)
class Failure:
    """Why a scenario fails one clause, and which kind of witness that makes it."""

    kind: WitnessKind
    why: str


FAILURES: Mapping[str, Mapping[str, Failure]] = {
    "scenarios/violations/faulty_phy.yaml": {
        "phy.training_sequence": Failure(
            "faulty device", "gpu2-sw1.0 trains with PRBS15, gpu3-sw1.0 with 256-symbol sets"
        ),
        "phy.eq_level3": Failure("faulty device", "gpu1-sw1.0 never runs EQ phase 3"),
        "phy.retrain_trigger": Failure(
            "faulty device", "gpu0-sw1.0 retrains after 2 cycles above 1e-6 instead of 3"
        ),
    },
    "scenarios/violations/lossy_links.yaml": {
        "phy.phase_alignment": Failure(
            "emergent", "the CDR locks more slowly behind the poorer equaliser"
        ),
        "phy.reset_to_l0": Failure(
            "emergent", "20-22 dB channels need more LMS iterations in Level-3 EQ"
        ),
    },
    "scenarios/violations/symbol_rate_32gt.yaml": {
        "phy.symbol_rate": Failure(
            "misconfiguration", "links at 32 GT/s: every receiver counts 16 GBd on its REFCLK"
        ),
    },
    "scenarios/violations/training_set_256.yaml": {
        "phy.training_sequence": Failure(
            "faulty device",
            "gpu1-rc0's framers lock on markers 272 symbols apart (256-symbol sets)",
        ),
    },
    "scenarios/violations/cdc_undersized.yaml": {
        "link.cdc_fifo_depth": Failure(
            "emergent", "a 192-word FIFO loses words to the worst-case burst"
        ),
    },
    "scenarios/violations/cdc_formula_short.yaml": {
        "link.cdc_fifo_depth": Failure(
            "misconfiguration", "215 words lose nothing, but §3.1's formula asks 218"
        ),
    },
    "scenarios/violations/faulty_link.yaml": {
        "link.cdc_sync_latency": Failure(
            "faulty device", "gpu3's receiver synchronises with three flops instead of two"
        ),
        "link.ts_injection": Failure(
            "faulty device",
            "gpu5's stamp clock steps back 10 µs, and gpu2 sends every 50th set unstamped",
        ),
    },
    "scenarios/violations/cdc_three_flop.yaml": {
        "link.cdc_sync_latency": Failure(
            "misconfiguration", "three-flop synchronisers on a 2 GHz clock: 1.63 ns at SS/125C"
        ),
    },
    "scenarios/violations/cdc_single_flop.yaml": {
        "link.handshake_setup": Failure(
            "misconfiguration", "single-flop synchronisers finish the handshake in ~6 cycles"
        ),
    },
    "scenarios/violations/chain_9hop.yaml": {
        "fabric.hop_limit": Failure("emergent", "a chain of eight switches: paths of 9 links"),
    },
    "scenarios/violations/skew_asymmetric.yaml": {
        "fabric.skew_budget": Failure(
            "emergent", "two GPUs sit five switches deeper than the others"
        ),
    },
    "scenarios/violations/tso_loaded.yaml": {
        "fabric.tso_window": Failure(
            "emergent", "90 % load stretches the p99 round trip past a 1 µs window"
        ),
    },
    "scenarios/reference/switch_hol.yaml": {
        "fabric.topology_limits": Failure(
            "misconfiguration", "16 GPUs behind one switch (a reference bench, not a SITS fabric)"
        ),
    },
    "scenarios/violations/topology_switched_12gpu.yaml": {
        "fabric.topology_limits": Failure(
            "misconfiguration", "12 GPUs train and carry traffic in a switch fat tree"
        ),
    },
    "scenarios/violations/topology_direct_rc_5gpu.yaml": {
        "fabric.topology_limits": Failure(
            "misconfiguration", "5 GPUs train and carry traffic on one root complex"
        ),
    },
    "scenarios/violations/topology_slow_arbitration.yaml": {
        "fabric.topology_limits": Failure(
            "misconfiguration", "the spine switches arbitrate in 30 ns (configured)"
        ),
    },
    "scenarios/violations/vc_overquota.yaml": {
        "switch.vc_quota": Failure("misconfiguration", "two tenants' tables sum to 124 slots"),
    },
    "scenarios/violations/vc_quota_runtime_update.yaml": {
        "switch.vc_quota": Failure(
            "faulty device", "nvs1's firmware applies quota writes on running ports"
        ),
    },
    "scenarios/violations/nine_tenants.yaml": {
        "switch.vc_tenants": Failure(
            "emergent", "requests and completions share VCs: a message-dependent deadlock"
        ),
    },
    "scenarios/violations/ecmp_faulty_hash.yaml": {
        "switch.ecmp_weight": Failure("faulty device", "vendor_a's hash ignores the weights"),
    },
    "scenarios/violations/latency_hint_overflow.yaml": {
        "token.frame_format": Failure(
            "emergent", "a 40 s prefill measures a latency hint beyond int16's 32767 ms"
        ),
    },
    "scenarios/violations/token_renumbering.yaml": {
        "token.passthrough": Failure("faulty device", "the first stage renumbers every token"),
    },
    "scenarios/violations/pacing_ignores_hint.yaml": {
        "token.emit_window": Failure("faulty device", "the pacer keeps 5 ms whatever the hint"),
    },
    "scenarios/violations/mhf_naive.yaml": {
        "token.mhf_kv_alignment": Failure(
            "misconfiguration", "the engine caches the MHF marker as a token"
        ),
    },
    "scenarios/violations/fp8_heavy_tail.yaml": {
        "engine.fp8_overflow": Failure(
            "emergent", "Student-t outputs fool the std-based E4M3 choice"
        ),
    },
}


@dataclass(frozen=True)
class Conformance:
    """One clause's row of the matrix, less what ``FAILURES`` and the catalogue say."""

    clause: str
    basis: Basis
    kinds: tuple[WitnessKind, ...]
    """The failing witness kinds SPEC.md names for the clause."""
    passing: tuple[str, ...]
    property_tests: tuple[str, ...] = ()
    """Files of ``tests/properties/`` whose docstrings name the clause."""


FAT_TREE = "scenarios/fat_tree_8gpu.yaml"
DECODE = "scenarios/llama3_8b_decode_hgx.yaml"
TP8 = "scenarios/llama3_8b_tp8_nvswitch.yaml"

CONFORMANCE: tuple[Conformance, ...] = (
    Conformance(
        "phy.symbol_rate",
        "measured",
        ("misconfiguration",),
        (FAT_TREE,),
        ("test_phy_rate_properties.py",),
    ),
    Conformance(
        "phy.training_sequence",
        "measured",
        ("faulty device",),
        (FAT_TREE,),
        ("test_phy_prbs_properties.py",),
    ),
    Conformance(
        "phy.eq_level3",
        "measured",
        ("faulty device",),
        (FAT_TREE,),
        ("test_phy_eq_properties.py", "test_phy_ltssm_properties.py"),
    ),
    Conformance(
        "phy.phase_alignment",
        "measured",
        ("emergent",),
        (FAT_TREE,),
        ("test_phy_cdr_properties.py",),
    ),
    Conformance(
        "phy.retrain_trigger",
        "measured",
        ("faulty device",),
        ("scenarios/violations/ber_drift.yaml",),
        ("test_phy_training_properties.py",),
    ),
    Conformance(
        "phy.reset_to_l0",
        "measured",
        ("emergent",),
        (FAT_TREE,),
        (
            "test_phy_eq_properties.py",
            "test_phy_ltssm_properties.py",
            "test_phy_training_properties.py",
        ),
    ),
    Conformance(
        "link.cdc_fifo_depth",
        "both",
        ("emergent",),
        (FAT_TREE,),
        ("test_link_cdc_properties.py",),
    ),
    Conformance(
        "link.cdc_sync_latency",
        "measured",
        ("misconfiguration",),
        (FAT_TREE,),
        ("test_link_cdc_properties.py",),
    ),
    Conformance(
        "link.handshake_setup",
        "measured",
        ("misconfiguration",),
        (FAT_TREE,),
        ("test_link_cdc_properties.py",),
    ),
    Conformance(
        "link.ts_injection",
        "measured",
        ("faulty device",),
        (FAT_TREE,),
        ("test_clock_properties.py",),
    ),
    Conformance(
        "fabric.hop_limit", "measured", ("emergent",), (FAT_TREE,), ("test_fabric_properties.py",)
    ),
    Conformance(
        "fabric.skew_budget", "measured", ("emergent",), (FAT_TREE,), ("test_clock_properties.py",)
    ),
    Conformance(
        "fabric.tso_window", "measured", ("emergent",), (FAT_TREE,), ("test_fabric_properties.py",)
    ),
    Conformance(
        "fabric.topology_limits",
        "both",
        ("misconfiguration",),
        (FAT_TREE, "scenarios/direct_rc_4gpu.yaml"),
        ("test_fabric_properties.py",),
    ),
    Conformance(
        "switch.vc_quota",
        "both",
        ("misconfiguration", "faulty device"),
        ("scenarios/nvswitch_tenants_quota.yaml",),
        ("test_switch_quota_properties.py", "test_vc_quota_properties.py"),
    ),
    Conformance(
        "switch.vc_tenants",
        "measured",
        ("emergent",),
        ("scenarios/violations/nine_tenants_separate_vcs.yaml",),
        ("test_switch_deadlock_properties.py",),
    ),
    Conformance(
        "switch.ecmp_weight",
        "measured",
        ("faulty device",),
        ("scenarios/ecmp_multivendor.yaml",),
        ("test_switch_ecmp_properties.py",),
    ),
    Conformance(
        "token.frame_format",
        "measured",
        ("emergent", "mutation"),
        (DECODE,),
        ("test_token_codec_machine.py", "test_token_properties.py"),
    ),
    Conformance(
        "token.passthrough",
        "measured",
        ("faulty device",),
        (DECODE,),
        (
            "test_inference_properties.py",
            "test_token_codec_machine.py",
            "test_token_properties.py",
        ),
    ),
    Conformance(
        "token.emit_window",
        "measured",
        ("faulty device",),
        (DECODE,),
        (
            "test_inference_properties.py",
            "test_token_codec_machine.py",
            "test_token_properties.py",
        ),
    ),
    Conformance(
        "token.mhf_kv_alignment",
        "measured",
        ("misconfiguration",),
        (TP8,),
        ("test_token_properties.py",),
    ),
    Conformance(
        "engine.fp8_overflow", "measured", ("emergent",), (TP8,), ("test_engine_properties.py",)
    ),
)

BY_CLAUSE: dict[str, Conformance] = {c.clause: c for c in CONFORMANCE}


def failing(clause: str) -> dict[str, Failure]:
    """The scenarios that fail ``clause``, each with its kind and reason."""
    return {path: fails[clause] for path, fails in FAILURES.items() if clause in fails}


def also_fails(path: str, clause: str) -> dict[str, str]:
    """Every other clause the failing witness ``path`` of ``clause`` fails, with the reason."""
    return {other: f.why for other, f in FAILURES[path].items() if other != clause}


MATRIX_COLUMNS = (
    "clause",
    "layer",
    "rule",
    "basis",
    "witness kind",
    "property tests",
    "passing witness",
    "failing witness",
)
SCENARIOS = "scenarios/"


@dataclass(frozen=True)
class MatrixRow:
    """One clause's row: the catalogue's words, its conformance entry and its failing witnesses."""

    clause: str
    layer: str
    rule: str
    basis: Basis
    kinds: tuple[WitnessKind, ...]
    property_tests: tuple[str, ...]
    passing: tuple[str, ...]
    failing: Mapping[str, Failure]

    def cells(self, sep: str) -> tuple[str, ...]:
        """The row under ``MATRIX_COLUMNS``, the items of a cell joined by ``sep``; a
        witness is named under ``scenarios/``, and a failing one is followed by its kind
        and every other clause it fails. A cell with nothing in it yet is empty."""
        fails: list[str] = []
        for path, failure in self.failing.items():
            fails += [path.removeprefix(SCENARIOS), f"({failure.kind})"]
            fails += [f"also fails {other}" for other in also_fails(path, self.clause)]
        return (
            self.clause,
            self.layer,
            self.rule,
            self.basis,
            sep.join(self.kinds),
            sep.join(self.property_tests),
            sep.join(p.removeprefix(SCENARIOS) for p in self.passing),
            sep.join(fails),
        )


def matrix() -> list[MatrixRow]:
    """One row per clause, in catalogue order."""
    return [
        MatrixRow(
            clause.id,
            clause.layer,
            clause.text,
            BY_CLAUSE[clause.id].basis,
            BY_CLAUSE[clause.id].kinds,
            BY_CLAUSE[clause.id].property_tests,
            BY_CLAUSE[clause.id].passing,
            failing(clause.id),
        )
        for clause in CLAUSES.values()
    ]


def multi_clause_witnesses() -> dict[str, dict[str, str]]:
    """The failing witnesses that fail more than one clause: each clause and why."""
    return {
        path: {clause: f.why for clause, f in fails.items()}
        for path, fails in FAILURES.items()
        if len(fails) > 1
    }
