"""The rules every field an agent sends is checked against: the name patterns, the limits,
and `Checker`, whose checks raise hub.errors.InvalidArgument naming the field's path and what
is accepted. Used by `hub.sync.convert` (the stream's messages) and `hub.sync.observed` (the
records of an observation batch)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from hub import errors

DEPLOYMENT_ID = re.compile(r"^dep_[0-9a-f]{16}\Z")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\Z")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
DIGEST = re.compile(r"^svg_[0-9a-f]{16}\Z")
DEVICE_CLASS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")
PRINTABLE = re.compile(r"^[\x20-\x7e]*\Z")
# A device UUID as NVML reports it: "GPU-" or "MIG-" and a UUID in 8-4-4-4-12 hex digits.
# Nothing around it (no spaces), no '/', no '..': it names a row, a metric label and a DGD
# field, and is compared byte for byte with the kubelet's ids.
_NVML_UUID = (
    r"(?:GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
DEVICE_UUID = re.compile(rf"^{_NVML_UUID}\Z")
# A device id as the kubelet lists it for a pod (docs/kubelet.md): a device UUID, a
# time-sliced replica of one (`<uuid>::<n>`), or a MIG device in the pre-R470 form
# `MIG-GPU-<uuid>/<gi>/<ci>`.
DEVICE_ID = re.compile(
    rf"^(?:{_NVML_UUID}(?:::[0-9]{{1,4}})?|MIG-GPU-[0-9a-fA-F-]{{36}}/[0-9]{{1,3}}/[0-9]{{1,3}})\Z"
)
DEVICE_UUID_RULE = "an NVML device UUID: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx or MIG-..."
# A pod name, or host:pid for an agent outside Kubernetes.
# "", "adapter", or "autoscaler:" and a field manager's name (printable, no spaces).
REPLICAS_OWNER = re.compile(r"^(|adapter|autoscaler:[\x21-\x7e]{1,128})\Z")
# A Kubernetes API version ("v1beta1", "v1alpha1", "v1"), or "none".
DGD_VERSION = re.compile(r"^(none|v[0-9]+((alpha|beta)[0-9]+)?)\Z")
AGENT_INSTANCE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._:-]*[A-Za-z0-9])?\Z")
ROLES = ("", "worker", "prefill", "decode")
MAX_PER_BATCH = 10_000
MAX_REPLICAS = 10_000
MAX_DEVICES_PER_NODE = 1024
MAX_ARGS = 256
# An applied object's body (a DGD is a few KiB; the agent truncates above this).
MAX_APPLIED_BYTES = 256 * 1024
APPLIED_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")
# Device memory above 1 PiB is no GPU's: such a value (2^64-1, say) is refused here, with its
# field named, rather than failing the database write that would carry it (SQLite integers
# are signed 64-bit).
MAX_MEMORY_BYTES = 2**50


class Checker:
    """Field checks that know their path; `now_ns` bounds observation times."""

    def __init__(self, *, now_ns: int, max_skew_ns: int) -> None:
        self.now_ns = now_ns
        self.max_skew_ns = max_skew_ns

    def text(self, value: str, path: str, *, limit: int, required: bool = False) -> str:
        if required and not value:
            raise errors.InvalidArgument(path, "required")
        if not printable(value, limit):
            raise errors.InvalidArgument(path, f"at most {limit} printable ASCII characters")
        return value

    def pattern(
        self, value: str, pattern: re.Pattern[str], path: str, *, what: str, limit: int = 253
    ) -> str:
        if len(value) > limit or not pattern.match(value):
            raise errors.InvalidArgument(path, f"invalid {what}: {value[:80]!r}")
        return value

    def count(self, value: int, path: str, *, limit: int) -> int:
        if not 0 <= value <= limit:
            raise errors.InvalidArgument(path, f"must be between 0 and {limit}")
        return value

    def observed_at(self, value: int, path: str) -> int:
        if value <= 0:
            raise errors.InvalidArgument(path, "required: the observation time in Unix nanoseconds")
        if value > self.now_ns + self.max_skew_ns:
            raise errors.InvalidArgument(
                path, "is in the future beyond the allowed clock skew: check the agent's clock"
            )
        return value

    def unique(self, keys: Iterable[object], path: str, *, what: str) -> None:
        seen: set[object] = set()
        for key in keys:
            if key in seen:
                raise errors.InvalidArgument(path, f"duplicate {what} {key!r}")
            seen.add(key)


def printable(value: str, limit: int) -> bool:
    return len(value) <= limit and value.isascii() and value.isprintable()
