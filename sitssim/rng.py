"""Seeded random streams: one scenario seed, one independent generator per component.

A run is reproducible from its seed alone (architecture principle 5), and a component's
draws must not depend on which other components exist or in what order they draw: adding
a workload or a link must never shift another's stream. So each component derives its own
``numpy.random.Generator`` from the seed and its name, instead of sharing one generator.

This module is a leaf: every layer draws from it, so it imports nothing from sitssim.
"""

from __future__ import annotations

import zlib

import numpy as np


def component_rng(seed: int, *name: object) -> np.random.Generator:
    """A generator for one named component: adding a component never shifts another's stream.

    The name's parts are joined with ``/`` and hashed with CRC-32, so the stream is a pure
    function of (seed, name) across processes and Python versions (``hash()`` is salted).
    Changing this derivation changes every random draw of every run.
    """
    key = zlib.crc32("/".join(map(str, name)).encode())
    return np.random.default_rng(np.random.SeedSequence([seed, key]))
