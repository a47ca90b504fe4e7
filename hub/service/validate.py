"""Input rules shared by the use cases: names, labels, device classes, paging. Pure.

Every rule raises hub.errors.InvalidArgument naming the field and saying what is accepted.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping

from hub import errors
from hub.model import PRIORITIES, PRIORITY_DEFAULT

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
DEVICE_CLASS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")
LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z"
)
# A Kubernetes node name: a DNS-1123 subdomain.
NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?\Z")
MAX_REPLICAS = 10_000
MAX_QUOTA = 1_000_000
# Device classes per project: a fleet has a handful; the cap keeps one request from storing
# thousands of rows that every admission then reads.
MAX_QUOTA_CLASSES = 64
MAX_LABELS = 64
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


def dns_label(value: str, field: str, *, max_length: int = 63) -> str:
    if not value:
        raise errors.InvalidArgument(field, "required")
    if len(value) > max_length or not DNS_LABEL.match(value):
        raise errors.InvalidArgument(
            field,
            f"invalid {value!r}: use lower-case letters, digits and '-', starting and ending "
            f"with a letter or digit, at most {max_length} characters",
        )
    return value


def device_class(value: str, field: str) -> str:
    if not value or not DEVICE_CLASS.match(value):
        raise errors.InvalidArgument(
            field,
            f"invalid device class {value!r} (letters, digits, '.', '_', '-'; e.g. H100-80GB)",
        )
    return value


def node_name(value: str, field: str) -> str:
    if len(value) > 253 or not NODE_NAME.match(value):
        raise errors.InvalidArgument(
            field,
            f"invalid node name {value!r}: a Kubernetes node name (lower-case letters, digits,"
            " '-' and '.', at most 253 characters)",
        )
    return value


def labels(values: Mapping[str, str], field: str) -> dict[str, str]:
    """Kubernetes' label rules: a key is an optional DNS-subdomain prefix (<= 253) and '/',
    then a name of 1..63 characters [A-Za-z0-9] with '-', '_', '.' inside; a value is the same
    as a name, or empty; at most MAX_LABELS labels."""
    if len(values) > MAX_LABELS:
        raise errors.InvalidArgument(field, f"at most {MAX_LABELS} labels, not {len(values)}")
    for key, value in values.items():
        if not label_key_ok(key):
            raise errors.InvalidArgument(
                f"{field}.{key}",
                f"invalid label key {key!r}: [prefix/]name, the name 1..63 characters"
                " [A-Za-z0-9] with '-', '_', '.' inside, the prefix a DNS subdomain",
            )
        if not LABEL_VALUE.match(value):
            raise errors.InvalidArgument(
                f"{field}.{key}",
                f"invalid label value {value!r}: empty, or at most 63 characters [A-Za-z0-9]"
                " with '-', '_', '.' inside",
            )
    return dict(values)


def label_key_ok(key: str) -> bool:
    prefix = key.rpartition("/")[0]
    return len(prefix) <= 253 and bool(LABEL_KEY.match(key))


def quotas(values: Mapping[str, int], field: str) -> dict[str, int]:
    if len(values) > MAX_QUOTA_CLASSES:
        raise errors.InvalidArgument(field, f"at most {MAX_QUOTA_CLASSES} device classes")
    for key, limit in values.items():
        device_class(key, f"{field}.{key}")
        if not 0 <= limit <= MAX_QUOTA:
            raise errors.InvalidArgument(f"{field}.{key}", f"must be between 0 and {MAX_QUOTA}")
    return dict(values)


def replicas(value: int, field: str) -> int:
    if not 0 <= value <= MAX_REPLICAS:
        raise errors.InvalidArgument(field, f"must be between 0 and {MAX_REPLICAS}")
    return value


def priority(value: str, field: str) -> str:
    """A priority class ("" is the default, normal)."""
    if not value:
        return PRIORITY_DEFAULT
    if value not in PRIORITIES:
        raise errors.InvalidArgument(
            field, f"invalid priority {value!r}: one of {', '.join(PRIORITIES)}"
        )
    return value


def page(page_size: int, page_token: str) -> tuple[int, str]:
    """(limit, last key seen) from a request's page_size and opaque page_token."""
    if page_size < 0:
        raise errors.InvalidArgument("page_size", "must be >= 0")
    limit = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    if not page_token:
        return limit, ""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(page_token.encode()))
        after = decoded["after"]
        if not isinstance(after, str):
            raise ValueError("after")
        after.encode()  # a lone surrogate ("\udcff" in the JSON) is no key we ever wrote
    except (ValueError, KeyError, TypeError, binascii.Error, RecursionError) as e:
        raise errors.InvalidArgument(
            "page_token", "invalid: pass back the next_page_token of a previous response"
        ) from e
    return limit, after


def next_token(keys: list[str], limit: int) -> str:
    """The token for the page after one that returned `keys` (empty when it was the last)."""
    if len(keys) < limit or not keys:
        return ""
    return base64.urlsafe_b64encode(json.dumps({"after": keys[-1]}).encode()).decode()
