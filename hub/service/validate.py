"""Input rules shared by the use cases: names, labels, device classes, paging. Pure.

Every rule raises hub.errors.InvalidArgument naming the field and saying what is accepted.
Each rule is also data (`Rule`: a pattern, bounds, a description), the one statement of it:
the functions here check values with it, and the REST contract (hub/api/contract.py) puts
the same `Rule` on the fields it guards in the OpenAPI document, so the two cannot drift
(tests/unit/api/test_document_rules.py holds every `validate.*` call to a documented field).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from hub import errors
from hub.model import PRIORITIES, PRIORITY_DEFAULT


@dataclass(frozen=True)
class Rule:
    """One input rule as data. `pattern` is the body of a regular expression both Python and
    ECMA-262 (JSON Schema) read alike; `regex` anchors it for Python (`\\Z`: `$` would let a
    trailing newline through), the document anchors it with `^...$` (ECMA's `$` is the end).
    A map rule has `keys`/`values`, a list rule `items`; `limit` bounds their size."""

    description: str
    pattern: str = ""
    max_length: int | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    keys: Rule | None = None
    values: Rule | None = None
    items: Rule | None = None
    limit: int | None = None
    # What the value must not contain anywhere (JSON Schema `not: {pattern}`), when saying it
    # inside `pattern` would take a lookahead.
    forbidden: str = ""
    # A JSON Schema `format` for a value no pattern can describe (an opaque token).
    format: str = ""
    # The rule holds only when the value is set: "" (or 0) passes unchecked.
    optional: bool = False

    @property
    def regex(self) -> re.Pattern[str]:
        return _compiled(self.pattern)

    def optional_form(self) -> Rule:
        return self if self.optional else Rule(**{**self.__dict__, "optional": True})


_DNS_LABEL_BODY = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_NAME_BODY = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_SUBDOMAIN_BODY = rf"{_DNS_LABEL_BODY}(\.{_DNS_LABEL_BODY})*"


def _compiled(body: str) -> re.Pattern[str]:
    return re.compile(rf"^(?:{body})\Z")


_DEVICE_CLASS_BODY = r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}"
_LABEL_KEY_BODY = rf"({_SUBDOMAIN_BODY}/)?{_LABEL_NAME_BODY}"
_LABEL_VALUE_BODY = rf"({_LABEL_NAME_BODY})?"
DNS_LABEL = _compiled(_DNS_LABEL_BODY)
DEVICE_CLASS = _compiled(_DEVICE_CLASS_BODY)
LABEL_KEY = _compiled(_LABEL_KEY_BODY)
# A Kubernetes node name: a DNS-1123 subdomain.
NODE_NAME = _compiled(_SUBDOMAIN_BODY)
LABEL_VALUE = _compiled(_LABEL_VALUE_BODY)
MAX_REPLICAS = 10_000
MAX_QUOTA = 1_000_000
# Device classes per project: a fleet has a handful; the cap keeps one request from storing
# thousands of rows that every admission then reads.
MAX_QUOTA_CLASSES = 64
MAX_LABELS = 64
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


def name_rule(max_length: int = 63) -> Rule:
    """A resource name: a DNS label of at most `max_length` characters."""
    return Rule(
        f"a DNS label: lower-case letters, digits and '-', starting and ending with a letter"
        f" or digit, at most {max_length} characters",
        pattern=_DNS_LABEL_BODY,
        max_length=max_length,
    )


NAME = name_rule()
DEVICE_CLASS_RULE = Rule(
    "a device class: letters, digits, '.', '_', '-', at most 63 characters (e.g. H100-80GB)",
    pattern=_DEVICE_CLASS_BODY,
)
NODE_RULE = Rule(
    "a Kubernetes node name (a DNS-1123 subdomain: lower-case letters, digits, '-' and '.',"
    " at most 253 characters)",
    pattern=_SUBDOMAIN_BODY,
    max_length=253,
)
LABELS_RULE = Rule(
    f"Kubernetes labels, at most {MAX_LABELS}: a key is [prefix/]name (the name 1..63"
    " characters [A-Za-z0-9] with '-', '_', '.' inside, the prefix a DNS subdomain of at most"
    " 253 characters); a value is empty or like a name",
    keys=Rule("a label key", pattern=_LABEL_KEY_BODY, max_length=253 + 1 + 63),
    values=Rule("a label value", pattern=_LABEL_VALUE_BODY, max_length=63),
    limit=MAX_LABELS,
)
QUOTAS_RULE = Rule(
    f"devices per device class, each 0..{MAX_QUOTA}, at most {MAX_QUOTA_CLASSES} classes",
    keys=DEVICE_CLASS_RULE,
    values=Rule("a device count", minimum=0, maximum=MAX_QUOTA),
    limit=MAX_QUOTA_CLASSES,
)
REPLICAS_RULE = Rule(f"0..{MAX_REPLICAS} replicas", minimum=0, maximum=MAX_REPLICAS)
PAGE_SIZE_RULE = Rule(
    f"at most this many results (0: {DEFAULT_PAGE_SIZE}; more than {MAX_PAGE_SIZE} reads as"
    f" {MAX_PAGE_SIZE})",
    minimum=0,
)
# Kubernetes' equality-based selector (hub/service/selectors.py parses it): terms `k=v`,
# `k==v`, `k!=v`, `k`, `!k` joined by commas, spaces around a term allowed.
_SELECTOR_TERM = rf"!? *{_LABEL_KEY_BODY}|{_LABEL_KEY_BODY}(==|!=|=){_LABEL_VALUE_BODY}"
SELECTOR_RULE = Rule(
    "a label selector: comma-separated k=v, k==v, k!=v, k (present) or !k (absent), all of"
    f" which must hold, at most {2 * MAX_LABELS} of them; empty: everything",
    pattern=rf" *|( *({_SELECTOR_TERM}) *)(,( *({_SELECTOR_TERM}) *))*",
    optional=True,
)
PAGE_TOKEN_RULE = Rule(
    "the next_page_token of a previous response to the same call, unchanged (empty: the first"
    " page); any other value is refused",
    format="page-token",
    optional=True,
)


def dns_label(value: str, field: str, *, max_length: int = 63) -> str:
    if not value:
        raise errors.InvalidArgument(field, "required")
    if len(value) > max_length or not NAME.regex.match(value):
        raise errors.InvalidArgument(
            field,
            f"invalid {value!r}: use lower-case letters, digits and '-', starting and ending "
            f"with a letter or digit, at most {max_length} characters",
        )
    return value


def device_class(value: str, field: str) -> str:
    if not value or not DEVICE_CLASS_RULE.regex.match(value):
        raise errors.InvalidArgument(
            field,
            f"invalid device class {value!r} (letters, digits, '.', '_', '-'; e.g. H100-80GB)",
        )
    return value


def node_name(value: str, field: str) -> str:
    if len(value) > 253 or not NODE_RULE.regex.match(value):
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
