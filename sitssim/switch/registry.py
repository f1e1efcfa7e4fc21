"""Switch models by the name a scenario's ``switch.model`` gives them.

A new switch model is one module (a ``Node`` subclass whose ``arrive(msg, in_port)`` is
the model) and one line here; the scenario's ``switch.model`` field lists the names. The
transport builds every node with ``Node``'s signature, so each entry is a factory: from
the scenario's ``switch`` section to the node class, its parameters fixed on the class.
The forwarding mode (``switch.forwarding``) applies to every model alike: it is a class
attribute the transport reads when it chooses each port's class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from sitssim.fabric.nodes import Node, OutputQueuedSwitch
from sitssim.scenario import SwitchParams
from sitssim.switch.input_queued import input_queued_model

SWITCH_MODELS: dict[str, Callable[[SwitchParams], type[Node]]] = {
    # An ideal output-queued switch has no parameters beyond its arbitration latency,
    # which the fabric builder charges as the node's fixed latency.
    "output_queued": lambda _params: OutputQueuedSwitch,
    "input_queued": input_queued_model,
}


def switch_model(
    params: SwitchParams, vc_slots: Mapping[int, tuple[int, ...]] | None = None
) -> type[Node]:
    """The node class of every switch of a scenario whose ``switch`` section is ``params``;
    ``vc_slots`` (per channel into a switch, its port's slots per VC) weighs quota-weighted
    VC arbitration."""
    model = SWITCH_MODELS[params.model](params)
    if params.vc_arbiter == "quota_weighted":
        model = type(
            f"QuotaWeighted{model.__name__}",
            (model,),
            {"__slots__": (), "vc_slots": MappingProxyType(dict(vc_slots or {}))},
        )
    if params.forwarding == "cut_through":
        model = type(
            f"CutThrough{model.__name__}",
            (model,),
            {"__slots__": (), "cut_through_bytes": params.cut_through_bytes},
        )
    return model
