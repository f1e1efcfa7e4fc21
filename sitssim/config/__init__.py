"""Config models: one scenario section each, and the spec's and devices' values they check
against.

These sit below every model layer, so ``sitssim.scenario`` (which gathers them) can be
imported by the model, and loading a scenario imports no model (``tests/test_import_cost.py``).
A model takes its section from here; nothing here imports a model.
"""
