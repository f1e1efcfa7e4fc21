"""The spec's vocabulary that the model and the judges share: state names, wire formats and
receiver checks.

A judge may read the run's tables only, never a model module (``sitssim.spec``'s contract
in ``pyproject.toml``); what it needs to decode those tables lives here, below every model
layer, and the model imports the same definitions, so the two cannot drift apart.
"""
