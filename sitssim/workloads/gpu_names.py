"""The check every workload driver makes of the GPUs a scenario names."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sitssim.errors import Locator
    from sitssim.fabric.topology import Fabric


def require_gpu(where: Locator, fabric: Fabric, loc: tuple, name: str) -> None:
    """Refuse ``name``, at scenario location ``loc``, unless it is a GPU of ``fabric``."""
    if name not in fabric.graph:
        raise where.error(
            loc, f"unknown node {name!r}; GPUs are {fabric.gpus[0]}..{fabric.gpus[-1]}"
        )
    if fabric.node_kind(name) != "gpu":
        raise where.error(loc, f"{name!r} is a {fabric.node_kind(name)}, not a GPU")
