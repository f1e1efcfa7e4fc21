"""Switch models by the name a scenario's ``switch.model`` gives them.

A new switch model is one module (a ``Node`` subclass whose ``arrive(msg, in_port)`` is
the model) and one line here; the scenario's ``switch.model`` field lists the names.
"""

from __future__ import annotations

from sitssim.fabric.nodes import Node, OutputQueuedSwitch

SWITCH_MODELS: dict[str, type[Node]] = {"output_queued": OutputQueuedSwitch}
