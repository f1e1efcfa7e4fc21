"""Every checkable clause of SITS2026 v1.2, as SPEC.md numbers and words them.

Order here is the order of reports: by layer, bottom up. ``issue`` names the
issue whose model produces the facts a clause is judged on.
"""

from __future__ import annotations

from sitssim.spec.registry import Clause, declare

for _clause in (
    Clause(
        "phy.symbol_rate",
        "L1",
        "§2.1",
        "Links run at 64 GT/s PAM4 (32 GBd), measured from the PHY's symbol timing.",
        3,
    ),
    Clause(
        "phy.training_sequence",
        "L1",
        "§2.1",
        "Training sequences are 512-symbol PRBS31, verified by the PRBS checker.",
        3,
    ),
    Clause(
        "phy.eq_level3",
        "L1",
        "§3.1",
        "No link enters L0 without completing Level-3 equalisation (phases 0-3) "
        "with receiver BER below target.",
        3,
    ),
    Clause(
        "phy.phase_alignment",
        "L1",
        "§3.1",
        "CDR phase lock within a 256-UI window; frame-vs-symbol boundary error within ±0.125 UI.",
        3,
    ),
    Clause(
        "phy.retrain_trigger",
        "L1",
        "§3.1",
        "Dynamic retraining starts when measured BER > 1e-6 for 3 consecutive "
        "training cycles, and never otherwise.",
        3,
    ),
    Clause(
        "phy.reset_to_l0",
        "L1",
        "§4.3 (spec §7.3.2)",
        "After a reset, every active link reaches L0 within 200 µs.",
        3,
    ),
    Clause(
        "link.cdc_fifo_depth",
        "L2",
        "§3.1",
        "The CDC FIFO depth is at least (max_rtt_cycles << 1) + 4 and never overflows.",
        4,
    ),
    Clause(
        "link.cdc_sync_latency",
        "L2",
        "§3.1",
        "REFCLK->PHYCLK synchronisation latency < 1.2 ns at the SS corner, 125 °C.",
        4,
    ),
    Clause(
        "link.handshake_setup",
        "L2",
        "§3.1",
        "Training-complete handshake setup time > 8.5 REFCLK cycles at FF, 0 °C.",
        4,
    ),
    Clause(
        "link.ts_injection",
        "L2",
        "§2.1",
        "Every TS1/TS2 ordered set carries a SITS timestamp, strictly monotonic per link.",
        4,
    ),
    Clause(
        "fabric.hop_limit", "L3", "§2.2", "An end-to-end path crosses at most 7 hops (links).", 2
    ),
    Clause(
        "fabric.skew_budget",
        "L3",
        "§2.2",
        "Skew between GPUs <= 85 + (n - 1)·12.5 + 42 ns for n GPUs.",
        4,
    ),
    Clause(
        "fabric.tso_window",
        "L3",
        "§2.2",
        "The transaction-ordering window is at least 2 × RTT_max + 150 ns, RTT_max the "
        "farthest GPU's p99 request->completion round trip under load.",
        2,
    ),
    Clause(
        "fabric.topology_limits",
        "L3",
        "§2.2",
        "Switch-based fabric: at most 8 GPUs and switch arbitration >= 35 ns per level; "
        "direct root complex to GPU: at most 4 GPUs.",
        2,
    ),
    Clause(
        "switch.vc_quota",
        "L4",
        "§3.3",
        "At most 8 VCs per port; a port's quota table sums to at most 64 slots and is "
        "never changed while running.",
    ),
    Clause(
        "switch.vc_tenants",
        "L4",
        "§3.3",
        "Ports shared by more than 8 tenants stay deadlock-free; a deadlock is detected "
        "and reported.",
    ),
    Clause(
        "switch.ecmp_weight",
        "L4",
        "§2.3",
        "Implicit ECMP weight = max(1, ifSpeed/1e9 - int(2·lldp_delay_ms)); traffic "
        "splits in proportion.",
    ),
    Clause(
        "token.frame_format",
        "L5",
        "§2.4",
        "Token frames are token_id uint32, latency_hint int16 ms, ts_logical uint64 "
        "(14 bytes), in range and round-tripping bit-exactly.",
        5,
    ),
    Clause(
        "token.passthrough",
        "L5",
        "§2.4",
        "Every stage passes token_id and ts_logical through unchanged.",
        5,
    ),
    Clause(
        "token.emit_window",
        "L5",
        "§3.2",
        "Emission pacing is latency_hint + 5 ms if the hint is positive, else 5 ms.",
        5,
    ),
    Clause(
        "token.mhf_kv_alignment",
        "L5",
        "§2.4",
        "With the MHF marker, KV length, attention-mask length and RoPE offset equal "
        "the real token count.",
        5,
    ),
    Clause(
        "engine.fp8_overflow",
        "L5",
        "§1",
        "Adaptive FP8 lets no value exceed the chosen format's range (counted before saturation).",
        5,
    ),
):
    declare(_clause)
