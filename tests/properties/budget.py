"""How many examples a slow property draws: a count for the ``ci`` profile, scaled by the
loaded profile's ``max_examples`` over ci's, so ``dev`` and ``nightly`` draw more of them.

Read when a test module is imported, which is after pytest has loaded the profile (from
``--hypothesis-profile`` or ``HYPOTHESIS_PROFILE``, see tests/conftest.py).
"""

from __future__ import annotations

from hypothesis import settings


def examples(under_ci: int) -> int:
    """``under_ci`` examples under the ci profile, proportionally more or fewer under another."""
    ratio = settings.default.max_examples / settings.get_profile("ci").max_examples
    return max(1, round(under_ci * ratio))
