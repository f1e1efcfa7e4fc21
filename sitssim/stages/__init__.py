"""The wiring of each layer into a run: one ``Stage`` per concern, listed in ``registry``.

Above the layers (workloads, fabric, link, phy), below ``simulation`` and ``preflight``,
which loop over :data:`sitssim.stages.registry.STAGES`.
"""
