"""The contract: generated/ matches the protos, and every RPC of the descriptor is served."""

from __future__ import annotations

import filecmp
from pathlib import Path

from hub.api.control import ControlHandlers
from tools import genproto
from wingsmith.v1 import control_pb2, resources_pb2, sync_pb2

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_matches_the_protos(tmp_path: Path) -> None:
    genproto.generate(tmp_path)
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(
        p.relative_to(ROOT / "generated")
        for p in (ROOT / "generated").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert fresh == committed, "generated/ has other files: run python -m tools.genproto"
    stale = [
        str(p)
        for p in fresh
        if not filecmp.cmp(tmp_path / p, ROOT / "generated" / p, shallow=False)
    ]
    assert stale == [], f"generated/ is stale, run python -m tools.genproto: {stale}"


def test_every_control_rpc_has_a_handler() -> None:
    service = control_pb2.DESCRIPTOR.services_by_name["ControlService"]
    missing = [
        m.name for m in service.methods if not callable(getattr(ControlHandlers, m.name, None))
    ]
    assert missing == []


def test_every_control_rpc_has_an_http_rule() -> None:
    from google.api import annotations_pb2

    service = control_pb2.DESCRIPTOR.services_by_name["ControlService"]
    unrouted = [
        m.name for m in service.methods if not m.GetOptions().HasExtension(annotations_pb2.http)
    ]
    assert unrouted == []


def test_enum_values_follow_the_prefix_rule_the_json_mapping_relies_on() -> None:
    for module in (resources_pb2, sync_pb2, control_pb2):
        for enum in module.DESCRIPTOR.enum_types_by_name.values():
            prefix = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(enum.name))
            for value in enum.values:
                assert value.name.startswith(prefix.upper() + "_"), value.name
