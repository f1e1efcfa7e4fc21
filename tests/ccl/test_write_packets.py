import pytest

from sitssim.ccl.write_packets import CE_WRITES, SM_WRITES, WritePackets


def test_an_sm_write_carries_128_bytes_behind_a_16_byte_header() -> None:
    assert SM_WRITES.wire_bytes(0) == 0
    assert SM_WRITES.wire_bytes(1) == 17
    assert SM_WRITES.wire_bytes(128) == 144
    assert SM_WRITES.wire_bytes(129) == 161
    assert SM_WRITES.wire_bytes(1 << 20) == (1 << 20) * 9 // 8


def test_a_copy_engine_pays_half_the_headers_of_an_sm() -> None:
    data = 1 << 20
    sm = SM_WRITES.wire_bytes(data) - data
    ce = CE_WRITES.wire_bytes(data) - data
    assert sm == 2 * ce


@pytest.mark.parametrize("budget", [1, 16, 17, 143, 144, 145, 288, 300, 256 * 1024])
def test_data_within_is_the_most_that_fits_the_budget(budget: int) -> None:
    data = SM_WRITES.data_within(budget)
    assert data >= 1
    if budget > SM_WRITES.header_bytes:
        assert SM_WRITES.wire_bytes(data) <= budget
    if budget >= SM_WRITES.packet_bytes:
        # Whole packets only: one more data byte would need another header.
        assert data % SM_WRITES.payload_bytes == 0
        assert SM_WRITES.wire_bytes(data + SM_WRITES.payload_bytes) > budget


def test_a_packet_needs_some_payload() -> None:
    with pytest.raises(ValueError):
        WritePackets("none", payload_bytes=0, header_bytes=16)
    with pytest.raises(ValueError):
        SM_WRITES.wire_bytes(-1)
