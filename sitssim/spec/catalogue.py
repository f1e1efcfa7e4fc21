"""Every checkable clause of SITS2026 v1.2, as SPEC.md numbers and words them, with its limits.

Order here is the order of reports: by layer, bottom up. Each limit (value, operator,
unit) and each constant of a formula is written here once; the judges read them
from the clause. A clause the simulator cannot judge yet says so (``modelled=False``).
"""

from __future__ import annotations

from collections.abc import Iterable

from sitssim.spec.clause import Clause, Limit


def _none_over(unit: str) -> dict[str, Limit]:
    """The limit of a clause judged by counting what breaks it: none may."""
    return {"count": Limit("<=", unit, 0.0)}


CATALOGUE: tuple[Clause, ...] = (
    Clause(
        "phy.symbol_rate",
        "L1",
        "§2.1",
        "Links run at 64 GT/s PAM4 (32 GBd), measured from the PHY's symbol timing.",
        3,
        limits={"rate": Limit("==", "GBd", 32.0)},
        # A receiver counts against its own reference clock; PCIe allows each end's
        # transmitter UI ±300 ppm.
        params={"bits_per_symbol": 2, "tolerance_ppm": 300.0},
    ),
    Clause(
        "phy.training_sequence",
        "L1",
        "§2.1",
        "Training sequences are 512-symbol PRBS31, verified by the PRBS checker.",
        3,
        limits=_none_over("receivers"),
        params={"prbs_order": 31, "symbols": 512},
    ),
    Clause(
        "phy.eq_level3",
        "L1",
        "§3.1",
        "No link enters L0 without completing Level-3 equalisation (phases 0-3) "
        "with receiver BER below target.",
        3,
        limits=_none_over("L0 entries"),
        params={"phases": 4, "ber_target": 1e-4},
    ),
    Clause(
        "phy.phase_alignment",
        "L1",
        "§3.1",
        "CDR phase lock within a 256-UI window; frame-vs-symbol boundary error within ±0.125 UI.",
        3,
        limits={"lock": Limit("<=", "UI", 256.0), "phase_error": Limit("<=", "UI", 0.125)},
    ),
    Clause(
        "phy.retrain_trigger",
        "L1",
        "§3.1",
        "Dynamic retraining starts when measured BER > 1e-6 for 3 consecutive "
        "training cycles, and never otherwise.",
        3,
        limits=_none_over("mistimed retrainings"),
        params={"ber_threshold": 1e-6, "windows": 3},
    ),
    Clause(
        "phy.reset_to_l0",
        "L1",
        "§4.3 (spec §7.3.2)",
        "After a reset, every active link reaches L0 within 200 µs.",
        3,
        limits={"time": Limit("<=", "µs", 200.0)},
    ),
    Clause(
        "link.cdc_fifo_depth",
        "L2",
        "§3.1",
        "The CDC FIFO depth is at least (max_rtt_cycles << 1) + 4 and never overflows.",
        4,
        # Two parts: the words the FIFO lost in the worst-case burst (measured), and the
        # configured depth against the formula's, which is the run's: the cdc table's
        # formula_depth column (configured: the spec's rule is normative).
        limits={"lost": Limit("<=", "words", 0.0), "depth": Limit(">=", "entries")},
        # §3.1 declares the depth as `logic [7:0] fifo_depth`.
        params={"depth_register_max": 255},
    ),
    Clause(
        "link.cdc_sync_latency",
        "L2",
        "§3.1",
        "REFCLK->PHYCLK synchronisation latency < 1.2 ns at the SS corner, 125 °C.",
        4,
        limits={"latency": Limit("<", "ns", 1.2)},
        params={"corner": "SS/125C"},
    ),
    Clause(
        "link.handshake_setup",
        "L2",
        "§3.1",
        "Training-complete handshake setup time > 8.5 REFCLK cycles at FF, 0 °C.",
        4,
        limits={"setup": Limit(">", "REFCLK cycles", 8.5)},
        params={"corner": "FF/0C"},
    ),
    Clause(
        "link.ts_injection",
        "L2",
        "§2.1",
        "Every TS1/TS2 ordered set carries a SITS timestamp, strictly monotonic per link.",
        4,
        limits=_none_over("sets"),
        packet_facts="the timestamp each ordered set carries as it leaves its port",
    ),
    Clause(
        "fabric.hop_limit",
        "L3",
        "§2.2",
        "An end-to-end path crosses at most 7 hops (links).",
        2,
        limits={"hops": Limit("<=", "hops", 7.0)},
    ),
    Clause(
        "fabric.skew_budget",
        "L3",
        "§2.2",
        "Skew between GPUs <= 85 + (n - 1)·12.5 + 42 ns for n GPUs.",
        4,
        limits={"skew": Limit("<=", "ns")},
        params={"base_rtt_ns": 85.0, "per_gpu_ns": 12.5, "phy_uncertainty_ns": 42.0},
        packet_facts="fences timestamped as they leave and reach each GPU's port",
    ),
    Clause(
        "fabric.tso_window",
        "L3",
        "§2.2",
        "The transaction-ordering window is at least 2 × RTT_max + 150 ns, RTT_max the "
        "farthest GPU's p99 request->completion round trip under load.",
        2,
        limits={"required_window": Limit("<=", "ns")},
        params={"rtt_factor": 2.0, "margin_ns": 150.0, "rtt_quantile": 0.99},
        packet_facts=(
            "the p99 round trip of small probes queued behind whole packets (a fluid "
            "flow shares rates and never waits behind one)"
        ),
    ),
    Clause(
        "fabric.topology_limits",
        "L3",
        "§2.2",
        "Switch-based fabric: at most 8 GPUs and switch arbitration >= 35 ns per level; "
        "direct root complex to GPU: at most 4 GPUs.",
        2,
        limits={
            "gpus_switched": Limit("<=", "GPUs", 8.0),
            "gpus_direct_rc": Limit("<=", "GPUs", 4.0),
            "arbitration": Limit(">=", "ns", 35.0),
        },
    ),
    Clause(
        "switch.vc_quota",
        "L4",
        "§3.3",
        "At most 8 VCs per port; a port's quota table sums to at most 64 slots and is "
        "never changed while running.",
        limits={
            "slots": Limit("<=", "slots", 64.0),
            "vcs": Limit("<=", "VCs", 8.0),
            # Writes a running port's table took: the table is loaded at link training.
            "updates": Limit("<=", "updates", 0.0),
        },
    ),
    Clause(
        "switch.vc_tenants",
        "L4",
        "§3.3",
        "Ports shared by more than 8 tenants stay deadlock-free; a deadlock is detected "
        "and reported.",
        limits={
            # Deadlocks the run ran into: observed, by the watchdog, as a cycle of full
            # buffers (a cycle possible before the run is a warning, not a count).
            "deadlocks": Limit("<=", "deadlocks", 0.0),
        },
        packet_facts="full switch buffers and answer queues, watched for a cycle",
    ),
    Clause(
        "switch.ecmp_weight",
        "L4",
        "§2.3",
        "Implicit ECMP weight = max(1, ifSpeed/1e9 - int(2·lldp_delay_ms)); traffic "
        "splits in proportion.",
        limits={
            # Members whose weight is not the formula of their measured LLDP delay and
            # negotiated ifSpeed.
            "weights": Limit("<=", "members", 0.0),
            # A group's chi-square goodness of fit of flows per member to weight / sum:
            # at 1e-6 a conforming hash is failed once in a million groups.
            "split": Limit(">=", "p-value", 1e-6),
        },
        # Pearson's chi-square needs about 5 expected flows per member to hold.
        params={"min_expected_flows": 5.0},
        packet_facts="the switches' per-hop flow hashing and the LLDP probes' measured delay",
    ),
    Clause(
        "token.frame_format",
        "L5",
        "§2.4",
        "Token frames are token_id uint32, latency_hint int16 ms, ts_logical uint64 "
        "(14 bytes), in range and round-tripping bit-exactly.",
        5,
        limits=_none_over("bad frames"),
    ),
    Clause(
        "token.passthrough",
        "L5",
        "§2.4",
        "Every stage passes token_id and ts_logical through unchanged.",
        5,
        limits=_none_over("frames"),
    ),
    Clause(
        "token.emit_window",
        "L5",
        "§3.2",
        "Emission pacing is latency_hint + 5 ms if the hint is positive, else 5 ms.",
        5,
        limits=_none_over("frames"),
    ),
    Clause(
        "token.mhf_kv_alignment",
        "L5",
        "§2.4",
        "With the MHF marker, KV length, attention-mask length and RoPE offset equal "
        "the real token count.",
        5,
        limits={"deviation": Limit("<=", "tokens", 0.0)},
    ),
    Clause(
        "engine.fp8_overflow",
        "L5",
        "§1",
        "Adaptive FP8 lets no value exceed the chosen format's range (counted before saturation).",
        5,
        limits=_none_over("values"),
    ),
)


def index(clauses: Iterable[Clause]) -> dict[str, Clause]:
    """Clauses by ID, in catalogue order; an ID written twice is refused."""
    out: dict[str, Clause] = {}
    for clause in clauses:
        if clause.id in out:
            raise ValueError(f"clause {clause.id} declared twice")
        out[clause.id] = clause
    return out


CLAUSES: dict[str, Clause] = index(CATALOGUE)
