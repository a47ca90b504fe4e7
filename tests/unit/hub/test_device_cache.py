"""The cache of validated devices (hub/sync/observed.py `DeviceCache`): a device reported as
before is not converted and checked again, but the cache never answers for other bytes, a
changed device is checked again (and refused if it breaks a rule), a refused one is never
kept, and it holds at most its limit, however many devices the fleet reports."""

from __future__ import annotations

import random
import threading
import time

import pytest

from hub import errors, wire
from hub.model import Device
from hub.sync import convert, observed
from hub.sync.fields import Checker
from hub.sync.observed import DeviceCache
from wingsmith.v1 import resources_pb2, sync_pb2

# For the device checks, which read no clock (a report's time is checked against a fresh one).
CHECK = Checker(now_ns=time.time_ns(), max_skew_ns=5 * 10**9)


def gpu(n: int, **fields: object) -> resources_pb2.Device:
    message = resources_pb2.Device(
        uuid=f"GPU-{n:08x}-0123-4567-89ab-0123456789ab",
        name="NVIDIA H100 80GB HBM3",
        memory_bytes=80 * 2**30,
        pci_bus_id="00000000:17:00.0",
        device_class="H100-80GB",
        healthy=True,
        verified=True,
    )
    for name, value in fields.items():
        setattr(message, name, value)
    return message


def test_a_device_reported_again_is_not_checked_again() -> None:
    cache = DeviceCache(8)
    first = cache.device(gpu(1), CHECK, "nodes[0]", 0)
    again = cache.device(gpu(1), CHECK, "nodes[0]", 0)
    assert again is first  # served from the cache
    assert first == wire.record_from(Device, gpu(1))
    assert len(cache) == 1


@pytest.mark.parametrize(
    "change",
    [
        {"healthy": False, "health_reason": "xid 79"},
        {"healthy": False},
        {"memory_bytes": 40 * 2**30},
        {"verified": False},
        {"nvlink_domain": "fabric.2"},
        {"parent_uuid": "GPU-00000009-0123-4567-89ab-0123456789ab"},
        {"uuid": "GPU-00000002-0123-4567-89ab-0123456789ab"},
    ],
)
def test_other_bytes_get_their_own_record(change: dict[str, object]) -> None:
    cache = DeviceCache(8)
    before = cache.device(gpu(1), CHECK, "nodes[0]", 0)
    after = cache.device(gpu(1, **change), CHECK, "nodes[0]", 0)
    assert after == wire.record_from(Device, gpu(1, **change))
    assert after != before
    # And the first is still itself.
    assert cache.device(gpu(1), CHECK, "nodes[0]", 0) == before


def test_a_changed_device_is_checked_again_and_a_refused_one_never_kept() -> None:
    cache = DeviceCache(8)
    cache.device(gpu(1), CHECK, "nodes[0]", 0)
    bad = gpu(1, pci_bus_id="bus\x00")
    for _ in range(2):  # refused each time: not kept
        with pytest.raises(errors.InvalidArgument) as refused:
            cache.device(bad, CHECK, "observations.nodes[2]", 5)
        assert refused.value.field == "observations.nodes[2].devices[5].pci_bus_id"
    assert len(cache) == 1


def test_it_holds_at_most_its_limit() -> None:
    cache = DeviceCache(16)
    for n in range(1000):
        device = cache.device(gpu(n), CHECK, "nodes[0]", 0)
        assert device.uuid == gpu(n).uuid
        assert len(cache) <= 16
    assert len(cache) == 16
    # Whatever it kept answers for its own bytes only.
    for n in range(1000):
        assert cache.device(gpu(n), CHECK, "nodes[0]", 0) == wire.record_from(Device, gpu(n))


def test_a_new_device_takes_a_random_place_when_full() -> None:
    """Not the oldest's: devices reported in turn, more of them than the cache holds, would
    otherwise never be found (each is dropped just before it is reported again)."""
    draws: list[int] = []

    def draw(limit: int) -> int:
        draws.append(limit)
        return 1  # always the second place

    cache = DeviceCache(3, draw=draw)
    kept = [cache.device(gpu(n), CHECK, "nodes[0]", 0) for n in range(3)]
    newest = cache.device(gpu(3), CHECK, "nodes[0]", 0)
    assert draws == [3]
    assert cache.device(gpu(0), CHECK, "nodes[0]", 0) is kept[0]
    assert cache.device(gpu(2), CHECK, "nodes[0]", 0) is kept[2]
    assert cache.device(gpu(3), CHECK, "nodes[0]", 0) is newest
    assert cache.device(gpu(1), CHECK, "nodes[0]", 0) is not kept[1]  # its place was taken
    # In turn over twice as many devices as it holds, it still finds a good share of them
    # (oldest-first would find none: each would be dropped just before its turn came).
    cache = DeviceCache(100, draw=random.Random(23).randrange)
    last: dict[int, Device] = {}
    hits = 0
    for turn in range(10):
        for n in range(200):
            device = cache.device(gpu(n), CHECK, "nodes[0]", 0)
            hits += turn > 0 and device is last[n]
            last[n] = device
    assert hits > 0.1 * 9 * 200, hits  # about 0.2 expected


def test_threads_sharing_it_keep_it_bounded_and_right() -> None:
    cache = DeviceCache(64)
    wrong: list[str] = []

    def report(offset: int) -> None:
        for n in range(2000):
            k = (n * 7 + offset) % 300
            if cache.device(gpu(k), CHECK, "nodes[0]", 0).uuid != gpu(k).uuid:
                wrong.append(gpu(k).uuid)

    threads = [threading.Thread(target=report, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not wrong
    assert len(cache) == 64


def test_a_node_report_uses_it_and_sees_a_change() -> None:
    """Through the batch's validation: a device's health flip is seen at once."""

    def batch(healthy: bool) -> sync_pb2.ObservationBatch:
        node = sync_pb2.NodeObservation(
            node_id="node-a",
            observe_unix_nanos=time.time_ns(),
            devices=[gpu(77, healthy=healthy, health_reason="" if healthy else "xid 79")],
        )
        return sync_pb2.ObservationBatch(seq=1, nodes=[node])

    # A checker of this moment: the module's CHECK was made at collection, and a report stamped
    # now is "in the future" for it once the run is older than its skew.
    check = Checker(now_ns=time.time_ns(), max_skew_ns=5 * 10**9)
    first = convert.observations(batch(True), check).nodes[0].devices[0]
    assert convert.observations(batch(True), check).nodes[0].devices[0] is first
    flipped = convert.observations(batch(False), check).nodes[0].devices[0]
    assert (flipped.healthy, flipped.health_reason) == (False, "xid 79")
    assert len(observed.DEVICES) <= observed.DEVICE_CACHE_LIMIT


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        DeviceCache(0)
