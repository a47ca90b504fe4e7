"""The List calls are one table (hub/api/listings.py): every List RPC of the contract has a
description there, answering with the RPC's own response type and filling its repeated
field, and the handler of that name runs it."""

from __future__ import annotations

import pytest

from hub.api import listings
from hub.api.handlers import ControlHandlers
from wingsmith.v1 import control_pb2 as cpb

SERVICE = cpb.DESCRIPTOR.services_by_name["ControlService"]
LIST_METHODS = sorted(m.name for m in SERVICE.methods if m.name.startswith("List"))
BY_METHOD = {listing.method: listing for listing in listings.LISTINGS}


def test_every_list_rpc_has_one_description_and_no_description_is_left_over() -> None:
    assert sorted(BY_METHOD) == LIST_METHODS
    assert len(BY_METHOD) == len(listings.LISTINGS), "one description per List RPC"


@pytest.mark.parametrize("method", LIST_METHODS)
def test_a_description_answers_with_the_rpcs_response_and_pages(method: str) -> None:
    listing = BY_METHOD[method]
    rpc = SERVICE.methods_by_name[method]
    assert listing.response.DESCRIPTOR is rpc.output_type
    items = rpc.output_type.fields_by_name[listing.items]
    assert items.is_repeated and items.message_type is not None
    assert "next_page_token" in rpc.output_type.fields_by_name
    request = rpc.input_type.fields_by_name
    assert {"page_size", "page_token"} <= set(request)
    for _, field in listing.parents:
        assert field in request, f"{method} names a parent field its request lacks"
    if listing.project_filter:
        assert "project" in request
    assert callable(getattr(ControlHandlers, method))
