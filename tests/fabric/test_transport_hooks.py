"""The transport's seams for later layers: link outages and delivery notifications."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import simpy

from sitssim.fabric.messages import KIND_DATA
from sitssim.fabric.routing import Router
from sitssim.fabric.topology import build_fabric
from sitssim.fabric.transport import Transport
from sitssim.scenario import scenario_from_data
from sitssim.stages.schedule import scenario_schedule


def idle_transport(one_link_data: Callable[..., dict[str, Any]]) -> Transport:
    scenario = scenario_from_data(one_link_data([]))
    fabric = build_fabric(scenario)
    nodes = sorted(fabric.graph)
    schedule = scenario_schedule(scenario, fabric, {n: i for i, n in enumerate(nodes)})
    return Transport(simpy.Environment(), fabric, Router(fabric), nodes, schedule)


def test_a_message_waits_out_an_outage_that_its_serialisation_would_overlap(
    one_link_data: Callable[..., dict[str, Any]],
) -> None:
    transport = idle_transport(one_link_data)
    port = transport.ports[transport.fabric.channel_index[("a", "b")]]
    service = 4096 * port.inv_bw
    # Starts before the outage but would still be on the wire when it begins.
    port.add_outage(service / 2, 1000.0)
    transport.inject(0, 1, 4096, 0, KIND_DATA, 0)
    transport.run()
    assert transport.t_deliver[0] == 1000.0 + service + port.fwd_delay


def test_a_message_that_ends_before_an_outage_is_not_delayed(
    one_link_data: Callable[..., dict[str, Any]],
) -> None:
    transport = idle_transport(one_link_data)
    port = transport.ports[transport.fabric.channel_index[("a", "b")]]
    service = 64 * port.inv_bw
    port.add_outage(service * 2, 1000.0)
    transport.inject(0, 1, 64, 0, KIND_DATA, 0)
    transport.run()
    assert transport.t_deliver[0] == service + port.fwd_delay


def test_on_deliver_is_called_once_per_message_at_its_delivery(
    one_link_data: Callable[..., dict[str, Any]],
) -> None:
    transport = idle_transport(one_link_data)
    seen: list[tuple[int, float]] = []

    def bounce(msg: int) -> None:
        seen.append((msg, transport.env.now))
        if len(seen) < 3:
            transport.inject(
                1 - transport.src[msg], transport.src[msg], 256, 0, KIND_DATA, 0, on_deliver=bounce
            )

    transport.inject(0, 1, 256, 0, KIND_DATA, 0, on_deliver=bounce)
    transport.run()
    assert [m for m, _ in seen] == [0, 1, 2]
    assert [t for _, t in seen] == list(np.asarray(transport.t_deliver)[:3])
    assert len(transport.src) == 3


def test_progress_of_a_closed_loop_with_no_expected_end_stays_a_few_reports(
    one_link_data: Callable[..., dict[str, Any]],
) -> None:
    """A workload that gives no estimate of its end (a collective sweep, say) once made
    the progress ticks fall every 0.02 ns: a 10 ms run took hours. Reports now stay a
    fixed share of the run so far, and their expected end only grows."""
    transport = idle_transport(one_link_data)
    bounces = 2000

    def bounce(msg: int) -> None:
        if msg < bounces:
            transport.env.timeout(5_000.0).callbacks.append(
                lambda _ev: transport.inject(0, 1, 64, 0, KIND_DATA, 0, on_deliver=bounce)
            )

    transport.inject(0, 1, 64, 0, KIND_DATA, 0, on_deliver=bounce)
    reports: list[tuple[float, float]] = []
    end = transport.run(lambda now, total: reports.append((now, total)))
    assert end > 1e7
    assert 20 < len(reports) < 400
    assert all(now <= total for now, total in reports)
    totals = [total for _, total in reports]
    assert totals == sorted(totals)
