"""Message kinds: one table of codes, each kind with its flow-control class."""

from __future__ import annotations

import pytest

from sitssim.fabric import messages
from sitssim.fabric.messages import FC_CLASS_OF_KIND, KIND_NAMES, MESSAGE_KINDS, MessageKind
from sitssim.link.credit_link import FC_CLASSES
from sitssim.link.credits import FcClass


def test_a_kind_without_a_flow_control_class_cannot_be_defined() -> None:
    with pytest.raises(TypeError):
        MessageKind("orphan")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="orphan"):
        MessageKind("orphan", None)  # type: ignore[arg-type]


def test_reads_are_non_posted_and_completions_completions() -> None:
    classes = {k.name: k.fc_class for k in MESSAGE_KINDS}
    assert classes == {
        "data": FcClass.P,
        "probe_request": FcClass.NP,
        "probe_completion": FcClass.CPL,
        "clock_sync": FcClass.P,
        "fence": FcClass.P,
        "collective": FcClass.P,
        "txn_write": FcClass.P,
        "txn_read": FcClass.NP,
        "txn_completion": FcClass.CPL,
        "tenant_request": FcClass.NP,
        "tenant_response": FcClass.CPL,
        "lldp": FcClass.P,
        "peer_copy": FcClass.P,
    }


def test_the_hot_path_index_names_the_declared_class() -> None:
    # The transport indexes the credit stage's per-class arrays with these.
    assert [FC_CLASSES[i] for i in FC_CLASS_OF_KIND] == [k.fc_class for k in MESSAGE_KINDS]


def test_codes_are_table_positions_and_unchanged() -> None:
    # Codes travel in the schedule and name rows of the messages table.
    assert KIND_NAMES == (
        "data",
        "probe_request",
        "probe_completion",
        "clock_sync",
        "fence",
        "collective",
        "txn_write",
        "txn_read",
        "txn_completion",
        "tenant_request",
        "tenant_response",
        "lldp",
        "peer_copy",
    )
    codes = {name: getattr(messages, f"KIND_{name.upper()}") for name in KIND_NAMES}
    assert codes == {name: i for i, name in enumerate(KIND_NAMES)}
