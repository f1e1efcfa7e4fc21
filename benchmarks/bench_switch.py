"""Switch-model speed: the input-queued switch against the output-queued one, same workload.

Run as ``python benchmarks/bench_switch.py [--messages N] [--pairs 5] [--voq] [--json PATH]``.

The workload is ``bench_transport.py``'s: the fabric of ``scenarios/fat_tree_8gpu.yaml``
under saturating uniform random traffic (load 0.95 on every GPU), one schedule drawn once.
The transport runs it with every switch output-queued (the default model) and with every
switch input-queued (``switch.model: input_queued``, its defaults, or VOQs with iSLIP with
``--voq``; on this fabric of one VC without credits the transport builds FIFO switches as
``OneVcFifoSwitch``, as it would a scenario's), in interleaved pairs in this one process,
so that a slow spell of the shared machine hits both alike. The figure is the median over
pairs of input-queued hop-events per CPU-second over output-queued ones (a hop-event: one
channel crossed by a delivered message). The two models compute different things
(head-of-line blocking costs latency), so only their delivered message counts are
compared. Not a test: nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import time
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_transport import build
from targets import target, verdict

from sitssim.fabric.nodes import Node, OutputQueuedSwitch
from sitssim.fabric.transport import Transport
from sitssim.scenario import SwitchParams
from sitssim.switch.registry import SWITCH_MODELS

TARGET = 0.5


def run_once(setup: object, model: type[Node]) -> tuple[float, int]:
    """CPU seconds of one transport run with ``model`` switches, and messages delivered."""
    transport = Transport(
        simpy.Environment(),
        setup.fabric,  # type: ignore[attr-defined]
        setup.router,  # type: ignore[attr-defined]
        setup.nodes,  # type: ignore[attr-defined]
        setup.schedule,  # type: ignore[attr-defined]
        switch_model=model,
    )
    # The previous run's fabric is garbage with cycles: collect it now, so that neither
    # model pays for the other's leftovers inside its timed run.
    gc.collect()
    cpu = time.process_time()
    transport.run()
    cpu = time.process_time() - cpu
    return cpu, sum(not math.isnan(t) for t in transport.t_deliver)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages injected")
    parser.add_argument("--pairs", type=int, default=5, help="interleaved pairs of runs")
    parser.add_argument("--voq", action="store_true", help="VOQs with iSLIP, not FIFOs")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.messages < 1 or args.pairs < 1:
        parser.error("--messages and --pairs must be >= 1")
    setup = build(args.messages, 0.95, 1)
    params = SwitchParams(
        model="input_queued",
        voq=args.voq,
        allocator="islip" if args.voq else "round_robin",
        input_buffer=2**20,
    )
    input_queued = SWITCH_MODELS["input_queued"](params)
    ratios = []
    for _ in range(args.pairs):
        oq_cpu, oq_done = run_once(setup, OutputQueuedSwitch)
        iq_cpu, iq_done = run_once(setup, input_queued)
        if iq_done != oq_done:
            raise SystemExit(f"delivered {iq_done} input-queued against {oq_done} output-queued")
        # Same hop-events in both runs (same routes), so the rate ratio is the time ratio.
        ratios.append(oq_cpu / iq_cpu)
        print(f"output-queued {oq_cpu:.3f} s, input-queued {iq_cpu:.3f} s CPU: {ratios[-1]:.3f}")
    ratio = statistics.median(ratios)
    kind = "VOQ + iSLIP" if args.voq else "FIFO, round robin"
    figure = f"input-queued ({kind}) / output-queued hop-events per CPU-second"
    speed = target(figure, ratio, ">=", TARGET, "x")
    print(
        f"{figure}: {ratio:.2f}, median of {len(ratios)} (target >= {TARGET:g}) "
        f"[{verdict(speed['met'])}]"
    )
    if args.json is not None:
        figures = {"ratios": ratios, "ratio": ratio, "targets": [speed]}
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
