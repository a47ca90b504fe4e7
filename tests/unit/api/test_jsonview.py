"""REST list answers made straight from the views (hub/api/jsonview.py) are byte for byte what
the message path makes of the same views: `jsonmap.to_json` of the response message that gRPC
answers, dumped as the gateway dumps it.

Random views of every list response's item type (every field drawn at random, defaults and
None among the draws, enum words among the words of the enum they become) go through both
outputs of hub/api/convert.py; the dumped documents must be the same bytes. A view that one
path refuses (a word no enum has, an integer beyond its field's range) must be refused by the
other too, with an error of the same type.
"""

from __future__ import annotations

import dataclasses
import json
import random
import types
import typing
from typing import Any

import pytest

from common import convert as rule
from hub import model
from hub.api import convert, jsonmap, jsonview, listings
from hub.service import views
from wingsmith.v1 import control_pb2 as cpb
from wingsmith.v1 import resources_pb2 as pb

# What each list's service call reads: the item type its conversion takes.
ITEM_TYPES: dict[str, Any] = {
    "ListProjects": views.ProjectView,
    "ListClusters": views.ClusterView,
    "ListWorkloads": views.WorkloadView,
    "ListDeployments": views.DeploymentView,
    "ListDiscovered": model.Discovered,
    "ListReplicas": views.ReplicaView,
    "ListAllocations": model.Allocation,
    "ListApiTokens": model.ApiToken,
    "ListAuditRecords": model.AuditRecord,
}
LISTINGS = {listing.method: listing for listing in listings.LISTINGS}


def _enum_words_by_name() -> dict[str, list[str]]:
    """Field name -> the words of the enums fields of that name have, over every message: a
    view's word field (`phase`, `state`) becomes the enum of the message field it feeds."""
    words: dict[str, set[str]] = {}
    for module in (pb, cpb):
        for desc in module.DESCRIPTOR.message_types_by_name.values():
            for field in desc.fields:
                if field.enum_type is not None:
                    words.setdefault(field.name, set()).update(rule.enum_words(field.enum_type))
    return {name: sorted(found) for name, found in words.items()}


WORDS = _enum_words_by_name()
# Where fields of one name are several enums ("state"): the record's own.
OWN_WORDS = {
    ("Discovered", "state"): sorted(rule.enum_words(pb.DiscoveredState.DESCRIPTOR)),
    ("WorkloadRollout", "state"): sorted(rule.enum_words(pb.RolloutState.DESCRIPTOR)),
    ("ClusterWave", "state"): sorted(rule.enum_words(pb.RolloutState.DESCRIPTOR)),
}
TEXTS = ["", "a", "é ü 中", 'quote " and \\ back', "line\nbreak", "x" * 40]


class _Draw:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def record(self, record_type: Any, depth: int = 0) -> Any:
        hints = typing.get_type_hints(record_type)
        values = {}
        for f in dataclasses.fields(record_type):
            if not f.init:
                continue
            has_default = (
                f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            )
            if has_default and self.rng.random() < 0.2:
                continue
            words = OWN_WORDS.get((record_type.__name__, f.name)) or WORDS.get(f.name)
            values[f.name] = self.value(hints[f.name], words, depth)
        if self.rng.random() < 0.1 and rule.default_of(record_type) is not None:
            return rule.default_of(record_type)
        return record_type(**values)

    def value(self, hint: Any, words: list[str] | None, depth: int) -> Any:
        """A value of `hint`; a string mostly among `words` when given (an enum's)."""
        rng = self.rng
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        if origin is typing.Literal:
            return rng.choice(args)
        if origin in (typing.Union, types.UnionType):
            rest = [a for a in args if a is not type(None)]
            if type(None) in args and rng.random() < 0.3:
                return None
            return self.value(rng.choice(rest), words, depth)
        if origin in (tuple, list, frozenset, set):
            count = rng.choice([0, 1, 2, 3]) if depth < 3 else 0
            items = [self.value(args[0], words, depth + 1) for _ in range(count)]
            return origin(items) if origin is not list else items
        if origin is not None and len(args) == 2:  # dict, Mapping
            count = rng.choice([0, 1, 2]) if depth < 3 else 0
            return {self.text(): self.value(args[1], words, depth + 1) for _ in range(count)}
        if hint is bool:
            return rng.random() < 0.5
        if hint is int:
            if rng.random() < 0.01:  # beyond an int32 field, or a product of some (refused)
                return rng.choice([2**31, 2**40, 10**6])
            return rng.choice([0, 1, 2, 3, 7, 100, 65_535])
        if hint is float:
            return rng.choice(
                [0.0, 1.0, 0.5, 1_764_900_000.123456, 1_764_900_000 + rng.random(), rng.random()]
            )
        if hint is str:
            if words and rng.random() < 0.98:
                return rng.choice(words)
            return self.text()
        if dataclasses.is_dataclass(hint):
            return self.record(hint, depth + 1)
        raise AssertionError(f"no draw for {hint!r}")

    def text(self) -> str:
        return self.rng.choice([*TEXTS, f"s{self.rng.randint(0, 999)}"])


def _both(listing: listings.Listing[Any, Any], items: Any) -> tuple[Any, Any]:
    """(bytes or the error) of each path: the message path, the direct one."""
    results = []
    for out in (convert.MESSAGES, convert.JSON):
        try:
            answer = listings.respond(listing, items, "t", out)
            is_json = isinstance(answer, jsonview.Document)
            body = answer.body if is_json else jsonmap.to_json(answer)
            results.append(json.dumps(body).encode())
        except Exception as e:  # compared below: refused both ways alike (which field's
            # value the error names may differ: the paths check fields in another order)
            results.append(type(e))
    return results[0], results[1]


@pytest.mark.parametrize("method", sorted(LISTINGS))
def test_a_list_page_from_the_views_is_the_message_paths_bytes(method: str) -> None:
    listing = LISTINGS[method]
    rng = random.Random(f"jsonview {listing.items}")
    draw = _Draw(rng)
    converted = 0
    for _ in range(300):
        items = [draw.record(ITEM_TYPES[method]) for _ in range(rng.randint(0, 4))]
        by_message, direct = _both(listing, items)
        assert direct == by_message, items
        converted += isinstance(direct, bytes)
    assert converted >= 150, f"only {converted} of 300 pages converted: draw better words"


def test_every_list_is_drawn() -> None:
    """Every List RPC's description (hub/api/listings.py) has its item type here."""
    assert set(ITEM_TYPES) == set(LISTINGS)


def test_an_empty_page_and_defaults_are_written_as_to_json_writes_them() -> None:
    document = jsonview.document(cpb.ListDeploymentsResponse, deployments=[], next_page_token="")
    message = cpb.ListDeploymentsResponse()
    assert json.dumps(document.body) == json.dumps(jsonmap.to_json(message))
    assert document.type_name == "wingsmith.v1.ListDeploymentsResponse"
    # A message type from no record: every field at its default, nulls for unset messages.
    assert jsonview.build(pb.Deployment, None) == jsonmap.to_json(pb.Deployment())


def test_a_word_no_enum_has_is_refused_both_ways() -> None:
    token = model.ApiToken(name="t", role="nope", projects=(), create_time=0.0, created_by="x")
    by_message, direct = _both(LISTINGS["ListApiTokens"], [token])
    assert by_message is ValueError
    assert direct == by_message
