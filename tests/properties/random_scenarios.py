"""Small valid scenarios drawn at random, for end-to-end runs (``test_random_runs.py``).

``random_scenarios()`` draws a scenario as plain data (a dict, as a YAML file holds it)
across what a scenario can ask of the model: each topology kind (``fat_tree``,
``direct_rc``, ``nvswitch``, a random connected ``graph`` that may have a root complex,
GPUs that forward and tied paths, and the ``crossbar`` bench); one or two link profiles
(rate, lanes, encoding, flight time); the switch model (output-queued, or input-queued
with FIFO inputs or VOQs, round-robin or iSLIP, 1-3 iterations), store-and-forward or
cut-through; flow-control credits (off, or finite header and/or data credits advertised
by some kinds of node, with a drawn max payload and UpdateFC delay); flit errors with
Ack/Nak replay (none, or a pre-FEC BER up to 3e-4, some with a narrow REPLAY_NUM so that
rollovers send links to Recovery); the CDC FIFO; clocks with clock sync and fences (a
switch's own traffic); tenants with dealt VC quota tables (several VCs, so several credit
pools per channel) and quota-weighted VC arbitration; weighted ECMP; the PHY (nominal, a
noisy channel with short BER windows that retrains in L0, a lossy channel, no EQ phase 3,
an SNR step mid-run); and one to three workloads of synthetic traffic (every pattern its
GPU count allows, Poisson or periodic, by load or interval), probes, bare collectives,
ordered transactions and tenants' requests (which may deadlock, and then the watchdog
stops the run with messages in flight). The seed is drawn too.

Every draw stays small, a few GPUs and one to four microseconds of traffic, so one run
takes a fraction of a second. Validity is by construction (the loader is the judge:
``scenario_from_data`` raises on anything invalid, and the test would fail): an input
buffer is sized from the credits that feed it (a VC's header credits for each
flow-control class the traffic uses, plus a slack of 0-2 messages, so that it can fill
exactly) or made as deep as the schema allows where nothing bounds what arrives.

``variety`` labels each draw's choices (topology kind, switch model, credits, ...), which
the tests tally to state, and hold, the share of each that a profile draws.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from sitssim.scenario import MAX_INPUT_BUFFER

ScenarioData = dict[str, Any]

TOPOLOGIES = ("fat_tree", "direct_rc", "nvswitch", "graph", "crossbar")
SWITCHES = ("output_queued", "iq_fifo", "iq_voq")
WORKLOADS = ("synthetic", "probes", "collective", "transactions", "tenant_requests")
POWER_OF_TWO_PATTERNS = ("bit_complement", "transpose", "shuffle")
PATTERNS = ("uniform_random", "permutation", "hotspot", "tornado", "pair")
PHY_KINDS = ("nominal", "ber_retrain", "lossy", "no_phase3", "snr_step")


def _classes(workloads: list[dict[str, Any]], clocks: bool) -> int:
    """How many flow-control classes (P, NP, Cpl) the traffic uses: an input's buffer per
    VC holds what each one's credits let in."""
    used = {"P"} if clocks else set()
    for wl in workloads:
        kind = wl["kind"]
        if kind in ("synthetic", "collective"):
            used.add("P")
        elif kind in ("probes", "tenant_requests"):
            used.update(("NP", "Cpl"))
        else:
            if wl["read_fraction"] < 1:
                used.add("P")
            if wl["read_fraction"] > 0:
                used.update(("NP", "Cpl"))
    return len(used)


@dataclass
class RandomScenario:
    """One draw: the scenario data and the labels of what was drawn."""

    data: ScenarioData
    variety: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"RandomScenario(variety={self.variety!r}, data={self.data!r})"


@dataclass
class _Fabric:
    """What the workloads need to know of the drawn topology."""

    topology: dict[str, Any]
    gpus: list[str]
    switches: bool
    root_complex: bool
    # One link, named as the PHY names links (endpoints sorted, joined by "-").
    a_link: str
    senders: list[str] | None = None
    receivers: list[str] | None = None


def _ns(value: float) -> str:
    return f"{value:g}ns"


@st.composite
def _profile(draw: st.DrawFn) -> dict[str, Any]:
    profile: dict[str, Any] = {
        # The spec's rate, mostly.
        "rate": draw(st.sampled_from(["16GT/s", "32GT/s", "64GT/s", "64GT/s"])),
        "lanes": draw(st.sampled_from([2, 4, 8, 16])),
        "encoding": draw(st.sampled_from(["flit256", "flit256", "128b130b", "none"])),
    }
    if draw(st.booleans()):
        profile["propagation"] = _ns(draw(st.sampled_from([0, 2, 5, 20, 50])))
    else:
        profile["length"] = draw(st.sampled_from(["5cm", "30cm", "1m"]))
    return profile


@st.composite
def _graph(draw: st.DrawFn, profiles: list[str]) -> _Fabric:
    """A random connected graph: a random tree over GPUs, switches and perhaps a root
    complex, plus perhaps an edge that closes a cycle (tied shortest paths)."""
    n_gpus = draw(st.integers(2, 4))
    n_switches = draw(st.integers(0, 2))
    gpus = [f"g{i}" for i in range(n_gpus)]
    nodes = [{"id": g, "kind": "gpu"} for g in gpus]
    nodes += [
        {"id": f"s{i}", "kind": "switch", "level": draw(st.integers(1, 2))}
        for i in range(n_switches)
    ]
    root_complex = draw(st.booleans())
    if root_complex:
        nodes.append({"id": "r0", "kind": "root_complex"})
    order = draw(st.permutations([n["id"] for n in nodes]))
    edges: list[tuple[str, str]] = []
    for k in range(1, len(order)):
        edges.append((order[draw(st.integers(0, k - 1))], order[k]))
    if len(order) >= 3 and draw(st.booleans()):
        a, b = draw(st.lists(st.sampled_from(order), min_size=2, max_size=2, unique=True))
        if (a, b) not in edges and (b, a) not in edges:
            edges.append((a, b))
    topology = {
        "kind": "graph",
        "nodes": nodes,
        "edges": [
            {
                "a": a,
                "b": b,
                "link": draw(st.sampled_from(profiles)),
                "links": draw(st.integers(1, 2)),
            }
            for a, b in edges
        ],
    }
    return _Fabric(topology, gpus, n_switches > 0, root_complex, "-".join(sorted(edges[0])))


@st.composite
def _topology(draw: st.DrawFn, kind: str, profiles: list[str]) -> _Fabric:
    if kind == "graph":
        return draw(_graph(profiles))
    link = draw(st.sampled_from(profiles))
    if kind == "fat_tree":
        levels = draw(st.integers(1, 2))
        radix = draw(st.integers(2, 4))
        spines = 1 if levels == 1 else draw(st.integers(1, 2))
        gpus = draw(st.integers(2, min(radix**levels, 6)))
        rc = draw(st.booleans())
        topology = {
            "kind": "fat_tree",
            "gpus": gpus,
            "levels": levels,
            "radix": radix,
            "spines": spines,
            "root_complex": rc,
            "link": link,
        }
        return _Fabric(topology, [f"gpu{i}" for i in range(gpus)], True, rc, "gpu0-sw1.0")
    if kind == "direct_rc":
        gpus = draw(st.integers(2, 4))
        topology = {"kind": "direct_rc", "gpus": gpus, "link": link}
        return _Fabric(topology, [f"gpu{i}" for i in range(gpus)], False, True, "gpu0-rc0")
    if kind == "nvswitch":
        gpus = draw(st.integers(2, 4))
        planes = draw(st.integers(1, 3))
        topology = {
            "kind": "nvswitch",
            "gpus": gpus,
            "planes": planes,
            "links_per_gpu": planes + draw(st.integers(0, 2)),
            "link": link,
        }
        return _Fabric(topology, [f"gpu{i}" for i in range(gpus)], True, False, "gpu0-nvs0")
    ports = draw(st.integers(2, 3))
    senders = [f"in{i}" for i in range(ports)]
    receivers = [f"out{i}" for i in range(ports)]
    return _Fabric(
        {"kind": "crossbar", "ports": ports, "link": link},
        senders + receivers,
        True,
        False,
        "in0-xbar",
        senders,
        receivers,
    )


@st.composite
def _credits(
    draw: st.DrawFn, fabric: _Fabric, input_queued: bool, bench: bool
) -> dict[str, Any] | None:
    """Credits, or None; with input-queued switches the switches mostly advertise them, so
    that their buffers are bounded by what the credits let in. A bench has them."""
    if not bench and not draw(st.booleans()):
        return None
    max_payload = draw(st.sampled_from([256, 1024, 4096]))
    tlp = max_payload // 16
    # One header credit is where a switch's input buffer fills to its bound most often.
    header: int | str = draw(st.sampled_from([1, 1, 2, 3, 6, "infinite"]))
    data: int | str = draw(st.one_of(st.integers(tlp, 3 * tlp), st.just("infinite")))
    if header == "infinite" and data == "infinite":
        header = draw(st.integers(1, 6))
    kinds = ["gpu", "switch", "root_complex"]
    if fabric.senders is not None:
        # The crossbar bench: its receivers never back-pressure.
        advertised = ["switch"]
    else:
        advertised = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=3, unique=True))
        if input_queued and "switch" not in advertised and draw(st.integers(0, 3)):
            advertised.append("switch")
    return {
        "header_credits": header,
        "data_credits": data,
        "max_payload": f"{max_payload}B",
        "update_delay": _ns(draw(st.sampled_from([0, 10, 100]))),
        "advertised_by": advertised,
    }


@st.composite
def _switch(
    draw: st.DrawFn, label: str, credits: dict[str, Any] | None, quota: bool, classes: int
) -> dict[str, Any]:
    switch: dict[str, Any] = {"arbitration": _ns(draw(st.sampled_from([10, 40, 60])))}
    if draw(st.booleans()):
        switch["forwarding"] = "cut_through"
        switch["cut_through_bytes"] = f"{draw(st.sampled_from([64, 256, 1024]))}B"
    if label == "output_queued":
        return switch
    switch.update(
        model="input_queued",
        voq=label == "iq_voq",
        allocator=draw(st.sampled_from(["round_robin", "islip"])),
        iterations=draw(st.integers(1, 3)),
    )
    into_switch = credits is not None and "switch" in credits["advertised_by"]
    if into_switch and credits["header_credits"] != "infinite":
        # What the credits let into one input's VC buffer, and mostly no slack, so that
        # it can fill exactly.
        slack = draw(st.sampled_from([0, 0, 1, 2]))
        switch["input_buffer"] = classes * credits["header_credits"] + slack
    else:
        # Nothing upstream bounds what arrives: as deep as a buffer may be.
        switch["input_buffer"] = MAX_INPUT_BUFFER
    if quota and draw(st.booleans()):
        switch["vc_arbiter"] = "quota_weighted"
    return switch


@st.composite
def _synthetic(draw: st.DrawFn, fabric: _Fabric, tenants: list[str]) -> dict[str, Any]:
    gpus = fabric.gpus
    patterns = list(PATTERNS)
    if len(gpus) & (len(gpus) - 1) == 0:
        patterns += POWER_OF_TWO_PATTERNS
    pattern = draw(st.sampled_from(patterns))
    workload: dict[str, Any] = {
        "kind": "synthetic",
        "pattern": pattern,
        "arrivals": draw(st.sampled_from(["poisson", "periodic"])),
        "message_bytes": f"{draw(st.sampled_from([64, 256, 1000, 2048, 4096]))}B",
        "tenant": draw(st.sampled_from(tenants)),
    }
    if draw(st.booleans()):
        workload["load"] = draw(st.sampled_from([0.05, 0.2, 0.5, 0.9, 1.3]))
    else:
        workload["interval"] = _ns(draw(st.sampled_from([50, 200, 500])))
    if pattern == "pair":
        src, dst = draw(st.lists(st.sampled_from(gpus), min_size=2, max_size=2, unique=True))
        workload.update(src=src, dst=dst)
    elif fabric.senders is not None and pattern == "uniform_random":
        workload.update(sources=fabric.senders, destinations=fabric.receivers)
    elif pattern == "hotspot":
        workload["hotspot"] = draw(st.sampled_from(gpus))
    return workload


@st.composite
def _workload(
    draw: st.DrawFn, kind: str, fabric: _Fabric, tenants: list[str], duration_ns: int
) -> dict[str, Any]:
    gpus = fabric.gpus
    tenant = draw(st.sampled_from(tenants))
    if kind == "synthetic":
        return draw(_synthetic(fabric, tenants))
    if kind == "probes":
        return {
            "kind": "probes",
            "interval": _ns(draw(st.sampled_from([200, 500, 1000]))),
            "turnaround": _ns(draw(st.sampled_from([0, 50]))),
            "tenant": tenant,
        }
    if kind == "collective":
        operation = draw(st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]))
        algorithms = ["ring", "direct"]
        if operation == "all_reduce":
            algorithms += ["tree", "one_shot"]
        ranks = draw(st.lists(st.sampled_from(gpus), min_size=2, max_size=len(gpus), unique=True))
        return {
            "kind": "collective",
            "operation": operation,
            "algorithm": draw(st.sampled_from(algorithms)),
            "sizes": [f"{draw(st.sampled_from([4, 16, 48]))}KiB"],
            "max_message_bytes": f"{draw(st.sampled_from([1, 4, 16]))}KiB",
            "gpus": ranks,
            "tenant": tenant,
        }
    if kind == "transactions":
        return {
            "kind": "transactions",
            "interval": _ns(draw(st.sampled_from([100, 300]))),
            "read_fraction": draw(st.sampled_from([0.0, 0.5, 1.0])),
            "rob_depth": draw(st.integers(1, 8)),
            "relaxed_ordering": draw(st.sampled_from([0.0, 0.5])),
            "stop": _ns(duration_ns),
            "tenant": tenant,
        }
    return {
        "kind": "tenant_requests",
        "load": draw(st.sampled_from([0.1, 0.3, 0.6])),
        "completion_queue": draw(st.integers(1, 4)),
        "turnaround": _ns(draw(st.sampled_from([0, 100]))),
        # The watchdog's window: a stalled run is stopped this long after its last delivery.
        "ack_timeout": "5us",
        "stop": _ns(duration_ns),
    }


def _phy(kind: str, fabric: _Fabric, profiles: dict[str, Any], duration_ns: int) -> dict[str, Any]:
    """The scenario fields a PHY variant sets: channels, the device profile, a drift."""
    if kind == "ber_retrain":
        # A noisy channel and short BER windows: links retrain in L0 while traffic runs.
        for profile in profiles.values():
            profile["channel"] = {"snr_db": 20}
        return {"phy": {"training_cycle_bits": 1e5}}
    if kind == "lossy":
        for profile in profiles.values():
            profile["channel"] = {"loss_db": 15}
        return {}
    if kind == "no_phase3":
        return {"phy": {"run_eq_phase3": False}}
    if kind == "snr_step":
        # 18.5 dB: the retraining's EQ fails a phase and the link walks back through Detect.
        step = {
            "link": fabric.a_link,
            "kind": "step",
            "start": _ns(duration_ns // 2),
            "snr_db": 18.5,
        }
        return {"phy": {"training_cycle_bits": 1e5}, "drift": [step]}
    return {}


@st.composite
def random_scenarios(draw: st.DrawFn, topology: str | None = None) -> RandomScenario:
    """A small valid scenario (module docstring); ``topology`` pins its kind."""
    variety: dict[str, str] = {}
    names = ["default", "alt"][: draw(st.integers(1, 2))]
    profiles = {name: draw(_profile()) for name in names}
    kind = topology or draw(st.sampled_from(TOPOLOGIES))
    fabric = draw(_topology(kind, names))
    variety["topology"] = kind
    duration_ns = draw(st.sampled_from([1000, 2000, 4000]))
    data: ScenarioData = {
        "name": "random_run",
        "seed": draw(st.integers(0, 2**16)),
        "duration": _ns(duration_ns),
        "topology": fabric.topology,
        "links": profiles,
    }

    n_tenants = draw(st.integers(1, 3))
    data["tenants"] = n_tenants
    tenants = [f"t{i}" for i in range(n_tenants)]
    quota = fabric.switches and draw(st.booleans())
    variety["vcs"] = "quota" if quota else "vc0"

    # The crossbar as the bench it is, mostly: input-queued, credited, its senders saturating
    # its receivers with posted writes, which fills its input buffers to their bound.
    bench = fabric.senders is not None and draw(st.integers(0, 2)) > 0
    switches = SWITCHES[1:] if bench else SWITCHES
    switch_label = draw(st.sampled_from(switches)) if fabric.switches else "none"
    variety["switch"] = switch_label
    credits = draw(_credits(fabric, switch_label.startswith("iq"), bench))
    variety["credits"] = "off" if credits is None else "on"
    link_layer: dict[str, Any] = {}
    if credits is not None:
        link_layer["credits"] = credits
    ber = draw(st.sampled_from([None, None, 1e-6, 1e-5, 1e-4, 3e-4]))
    variety["flit"] = "clean" if ber is None else "errors"
    if ber is not None:
        link_layer["flit"] = {
            "pre_fec_ber": ber,
            "replay_num_bits": draw(st.sampled_from([1, 3])),
            "nak_policy": draw(st.sampled_from(["standard", "selective"])),
        }
    # Only at 64 GT/s: the depth search behind the CDC tables takes seconds at lower rates.
    full_rate = all(p["rate"] == "64GT/s" for p in profiles.values())
    cdc = full_rate and draw(st.integers(0, 2)) == 0
    variety["cdc"] = "on" if cdc else "off"
    if cdc:
        # A given depth: sizing one by the formula searches the worst case for seconds.
        link_layer["cdc"] = {
            "fifo_depth": draw(st.sampled_from([16, 64])),
            "corners": draw(st.sampled_from([["TT/25C"], ["SS/125C", "FF/0C"]])),
        }
    if link_layer:
        data["link_layer"] = link_layer

    clocks = draw(st.integers(0, 3)) == 0
    variety["clocks"] = "on" if clocks else "off"
    if clocks:
        data["clocks"] = {"sync_interval": "500ns", "fence_interval": "500ns"}

    if bench:
        variety["workloads"] = "bench"
        bench = {
            "kind": "synthetic",
            "pattern": "uniform_random",
            "sources": fabric.senders,
            "destinations": fabric.receivers,
            "message_bytes": f"{draw(st.sampled_from([256, 2048]))}B",
            "load": draw(st.sampled_from([0.9, 1.3])),
        }
        data["workloads"] = [bench]
    else:
        kinds = ["synthetic", "probes", "collective", "transactions", "tenant_requests"]
        chosen = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=3, unique=True))
        variety["workloads"] = "+".join(sorted(chosen))
        data["workloads"] = [draw(_workload(k, fabric, tenants, duration_ns)) for k in chosen]

    if fabric.switches:
        classes = _classes(data["workloads"], clocks)
        switch = draw(_switch(switch_label, credits, quota, classes))
        if quota:
            switch["vc_quota"] = {"vcs_per_tenant": draw(st.integers(1, 3))}
        # Weighed by LLDP, every member of a group must be a switch with a vendor profile:
        # in a fat tree they are (elsewhere a GPU may forward, and be a member).
        ecmp = kind == "fat_tree" and draw(st.integers(0, 2)) == 0
        variety["ecmp"] = "on" if ecmp else "off"
        if ecmp:
            switch["vendor"] = "v"
            switch["vendors"] = {"v": {"lldp_processing": "10us"}}
            switch["ecmp"] = {"fields": ["src", "dst", "qp"], "queue_pairs": 4}
        data["switch"] = switch
    data["root_complex"] = {"arbitration": _ns(draw(st.sampled_from([0, 20])))}

    phy = draw(st.sampled_from(PHY_KINDS + ("nominal",) * 5))
    variety["phy"] = phy
    data.update(_phy(phy, fabric, profiles, duration_ns))

    return RandomScenario(data, variety)
