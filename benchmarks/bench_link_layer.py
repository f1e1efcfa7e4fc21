"""Cost of the link layer: the saturated fat tree with flits, replay and credits on vs off.

Issue 4's target: with flit-mode replay and credit flow control switched on, the transport
keeps at least 50 % of the foundation's hop-events per second. Both configurations run the
same injection schedule, interleaved, in one process; the ratio of their medians is what
counts (absolute rates on a shared machine are noise).

    python benchmarks/bench_link_layer.py [--messages 60000] [--ber 1e-6]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_transport import Setup, _timed, build, saturating_scenario
from targets import target, verdict

from sitssim.errors import Locator
from sitssim.fabric.transport import Transport
from sitssim.scenario import Scenario
from sitssim.stages.credits import build_credit_stage
from sitssim.stages.flit import build_flit_stage
from sitssim.stages.phy import phy_section, run_phy

TARGET = 0.5


def with_link_layer(scenario: Scenario, ber: float, hdr: int, data: int) -> Scenario:
    link_layer = scenario.link_layer.model_copy(
        update={
            "flit": scenario.link_layer.flit.model_copy(update={"pre_fec_ber": ber}),
            "credits": scenario.link_layer.credits.model_copy(
                update={"header_credits": hdr, "data_credits": data}
            ),
        }
    )
    return scenario.model_copy(update={"link_layer": link_layer})


def run_once(setup: Setup, scenario: Scenario | None) -> tuple[float, float, dict[str, int]]:
    """Wall and CPU seconds of one ``Transport.run`` (link layer from ``scenario``, or none),
    and what the link layer did in it (replays, credit stalls)."""
    flit = credit = None
    if scenario is not None:
        recover = run_phy(phy_section(scenario), setup.fabric, Locator(scenario.error)).recover
        flit = build_flit_stage(scenario.link_layer.flit, scenario.seed, setup.fabric, recover)
        credit = build_credit_stage(scenario.link_layer.credits, setup.fabric)
    transport = Transport(
        simpy.Environment(),
        setup.fabric,
        setup.router,
        setup.nodes,
        setup.schedule,
        None if flit is None else flit.links,
        None if credit is None else credit.links,
    )
    wall, cpu = _timed(transport.run)
    done = {}
    if flit is not None and credit is not None:
        done = {
            "replays": len(flit.log.t_ns),
            "credit_stalls": int(credit.summary()["credit_stalls"]),
        }
    return wall, cpu, done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=60_000)
    parser.add_argument("--load", type=float, default=0.95)
    parser.add_argument("--ber", type=float, default=1e-6, help="pre-FEC BER of every link")
    parser.add_argument("--header-credits", type=int, default=32)
    parser.add_argument("--data-credits", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    setup = build(args.messages, args.load, seed=1)
    scenario = with_link_layer(
        saturating_scenario(args.messages, args.load, 1),
        args.ber,
        args.header_credits,
        args.data_credits,
    )
    plain, full = [], []
    for _ in range(args.repeats):
        plain.append(run_once(setup, None))
        full.append(run_once(setup, scenario))
    rate_plain = setup.hop_events / statistics.median(w for w, _, _ in plain)
    rate_full = setup.hop_events / statistics.median(w for w, _, _ in full)
    ratio = rate_full / rate_plain
    cpu_ratio = statistics.median(c for _, c, _ in plain) / statistics.median(c for _, c, _ in full)
    # Each repetition's own ratio: how far one pair of runs strays on a shared machine.
    paired = sorted(p[0] / f[0] for p, f in zip(plain, full, strict=True))
    print(f"workload        : {len(setup.schedule):,} messages, {setup.hop_events:,} hop-events")
    print(f"foundation      : {rate_plain:12,.0f} hop-events/s")
    print(
        f"flits+credits   : {rate_full:12,.0f} hop-events/s  (BER {args.ber:g}, "
        f"{args.header_credits} hdr / {args.data_credits} data credits per class)"
    )
    done = full[-1][2]
    print(
        f"  each link-layer run: {done['replays']:,} replays, "
        f"{done['credit_stalls']:,} credit stalls"
    )
    kept = target("hop-events/s with flits and credits against without", ratio, ">=", TARGET, "x")
    print(f"ratio           : {ratio:8.2f}   (target >= {TARGET:g}) [{verdict(kept['met'])}]")
    print(f"  CPU-time ratio {cpu_ratio:.2f}; per repetition {paired[0]:.2f} to {paired[-1]:.2f}")
    if args.json is not None:
        figures = {
            "ratio": ratio,
            "cpu_ratio": cpu_ratio,
            "paired": paired,
            "replays": done["replays"],
            "credit_stalls": done["credit_stalls"],
            "targets": [kept],
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
