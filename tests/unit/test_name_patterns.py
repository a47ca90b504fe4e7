"""Name patterns match whole strings: a trailing newline never passes (issue 13).

Python's `$` also matches before a final newline, so `^[a-z]+$` accepts "nl\\n": the hub
once stored projects `nl` and `nl\\n` side by side and rendered pod names from a workload
`bad\\n` that it then refused. Every anchored pattern in the hub and the agent ends in `\\Z`;
the validators built on them are checked at the boundary characters.
"""

from __future__ import annotations

import importlib
import re

import pytest

from agent.cluster.simulated import spec
from hub import errors
from hub.service import validate
from hub.sync import fields

MODULES = [
    "hub.service.validate",
    "hub.serving",
    "hub.sync.fields",
    "hub.adoption",
    "hub.store.db",
    "agent.render.validation",
    "agent.cluster.simulated.spec",
    "agent.cluster.simulated.node_selection",
    "agent.cluster.dgd_versions",
    "agent.devices.node_labels",
]


def _anchored_patterns(module_name: str) -> list[tuple[str, re.Pattern[str]]]:
    module = importlib.import_module(module_name)
    return [
        (name, value)
        for name, value in vars(module).items()
        if isinstance(value, re.Pattern) and str(value.pattern).startswith("^")
    ]


@pytest.mark.parametrize("module_name", MODULES)
def test_every_anchored_pattern_ends_at_the_end_of_the_string(module_name: str) -> None:
    patterns = _anchored_patterns(module_name)
    assert patterns, f"{module_name} has no anchored pattern: update MODULES"
    for name, pattern in patterns:
        assert not str(pattern.pattern).endswith("$"), f"{module_name}.{name} ends in $"
        assert str(pattern.pattern).endswith("\\Z"), f"{module_name}.{name}"


@pytest.mark.parametrize("suffix", ["\n", "\r\n", "\r", "\x00", " ", "\t"])
def test_hub_names_with_a_trailing_control_character_are_refused(suffix: str) -> None:
    with pytest.raises(errors.InvalidArgument):
        validate.dns_label("nl" + suffix, "project.name")
    with pytest.raises(errors.InvalidArgument):
        validate.device_class("H100-80GB" + suffix, "device_class")
    with pytest.raises(errors.InvalidArgument):
        validate.labels({"region" + suffix: "eu"}, "labels")
    with pytest.raises(errors.InvalidArgument):
        validate.labels({"region": "eu" + suffix}, "labels")
    with pytest.raises(errors.InvalidArgument):
        validate.quotas({"H100" + suffix: 1}, "quotas")


def test_the_valid_names_beside_them_pass() -> None:
    assert validate.dns_label("nl", "project.name") == "nl"
    assert validate.device_class("H100-80GB", "device_class") == "H100-80GB"
    assert validate.labels({"example.com/region": "eu-1"}, "labels")
    assert validate.labels({"k": ""}, "labels")


def test_stream_patterns_refuse_a_trailing_newline() -> None:
    for pattern, good in [
        (fields.DEPLOYMENT_ID, "dep_0123456789abcdef"),
        (fields.DNS_SUBDOMAIN, "node-1.example"),
        (fields.DNS_LABEL, "default"),
        (fields.DIGEST, "svg_0123456789abcdef"),
        (fields.DEVICE_CLASS, "H100-80GB"),
        (fields.AGENT_INSTANCE, "hangar-7x2k:1234"),
    ]:
        assert pattern.match(good)
        assert not pattern.match(good + "\n"), pattern.pattern


def test_agent_spec_patterns_refuse_a_trailing_newline() -> None:
    assert spec._CLASS_RE.match("H100-80GB")
    assert not spec._CLASS_RE.match("H100-80GB\n")


def test_quota_classes_are_capped() -> None:
    validate.quotas({f"c{i}": 1 for i in range(validate.MAX_QUOTA_CLASSES)}, "quotas")
    with pytest.raises(errors.InvalidArgument):
        validate.quotas({f"c{i}": 1 for i in range(validate.MAX_QUOTA_CLASSES + 1)}, "quotas")


def test_a_page_token_holding_a_lone_surrogate_is_invalid() -> None:
    import base64
    import json

    token = base64.urlsafe_b64encode(json.dumps({"after": "\udcff"}).encode()).decode()
    with pytest.raises(errors.InvalidArgument):
        validate.page(10, token)


def test_error_messages_are_capped_and_transport_safe() -> None:
    error = errors.InvalidArgument("name", "invalid " + "x" * 100_000 + "\udcff")
    assert len(error.message) < errors.MAX_MESSAGE_CHARS + 100
    error.message.encode("utf-8")  # no lone surrogate left
    assert "\\udcff" in errors.InvalidArgument("name", "bad \udcff").message
