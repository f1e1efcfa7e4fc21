"""Shared validation helpers of ``sitssim.errors``."""

from __future__ import annotations

import pytest

from sitssim.errors import LocatedValueError, reject_repeats


def test_a_repeat_is_located_at_its_second_appearance() -> None:
    with pytest.raises(LocatedValueError) as caught:
        reject_repeats(["gpu0", "gpu1", "gpu2", "gpu1", "gpu0"], "gpus", "GPU")
    assert caught.value.loc == ("gpus", 3)
    assert caught.value.message == "GPU 'gpu1' is listed twice"


def test_without_a_noun_the_value_alone_is_named() -> None:
    with pytest.raises(LocatedValueError) as caught:
        reject_repeats(["switch", "switch"], "advertised_by")
    assert (caught.value.loc, caught.value.message) == (
        ("advertised_by", 1),
        "'switch' is listed twice",
    )


def test_distinct_entries_pass() -> None:
    reject_repeats(["a", "b", "c"], "targets", "target")
    reject_repeats([], "targets", "target")
