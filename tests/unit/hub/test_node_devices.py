"""What ingest derives from a node's devices, kept while they stay the same records
(hub/store/node_devices.py): answered again only for the very same records, rebuilt for any
other, equal to a fresh build either way."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from hub.model import Device
from hub.store import node_devices


def gpu(n: int, **changes: Any) -> Device:
    device = Device(
        uuid=f"GPU-{n:08x}-0123-4567-89ab-0123456789ab",
        name="NVIDIA H100 80GB HBM3",
        memory_bytes=80 * 2**30,
        pci_bus_id=f"00000000:{n + 16:02x}:00.0",
        device_class="H100-80GB",
        healthy=True,
        health_reason="",
        verified=True,
    )
    return dataclasses.replace(device, **changes) if changes else device


def test_the_same_records_get_the_same_answer_without_a_rebuild() -> None:
    devices = tuple(gpu(n) for n in range(8))
    first = node_devices.derived(("east", "n1"), devices)
    again = node_devices.derived(("east", "n1"), tuple(devices))  # a new tuple, same records
    assert again is first
    assert first == node_devices.build(devices)


def test_other_records_are_answered_anew_even_when_equal() -> None:
    devices = tuple(gpu(n) for n in range(8))
    first = node_devices.derived(("east", "n2"), devices)
    copies = tuple(dataclasses.replace(d) for d in devices)  # equal values, other records
    again = node_devices.derived(("east", "n2"), copies)
    assert again is not first and again.digest == first.digest
    unhealthy = (*devices[:7], gpu(7, healthy=False, health_reason="XID 79"))
    changed = node_devices.derived(("east", "n2"), unhealthy)
    assert changed.digest != first.digest and changed == node_devices.build(unhealthy)
    fewer = node_devices.derived(("east", "n2"), devices[:7])
    assert fewer.devices == devices[:7] and fewer.ids == {d.uuid for d in devices[:7]}


def test_ids_include_a_mig_devices_parent() -> None:
    parent = gpu(0)
    mig = gpu(1, uuid="MIG-00000001-0123-4567-89ab-0123456789ab", parent_uuid=parent.uuid)
    assert node_devices.build((mig,)).ids == {mig.uuid, parent.uuid}


def test_rows_compare_equal_to_the_stored_integers_and_are_written_as_integers() -> None:
    (row,) = node_devices.rows((gpu(3, healthy=False),))
    stored = node_devices.stored_row(row)
    assert row == stored and hash(row) == hash(stored)
    assert [type(v) for v in stored[5:8:2]] == [int, int]


def test_it_holds_at_most_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_devices, "LIMIT", 4)
    devices = (gpu(0),)
    for n in range(10):
        node_devices.derived(("east", f"limit-{n}"), devices)
        assert len(node_devices._KEPT) <= 4
