"""hub/access.py decisions, table-driven, and the RPC table of hub/api/permissions.py."""

from __future__ import annotations

import pytest

from hub import access, errors
from hub.api import permissions
from wingsmith.v1 import control_pb2

VIEWER = access.Principal("token/v", access.ROLE_VIEWER)
OPERATOR = access.Principal("token/o", access.ROLE_OPERATOR, frozenset({"a", "b"}))
ADMIN = access.Principal("token/x", access.ROLE_ADMIN)


@pytest.mark.parametrize(
    ("principal", "needs", "projects", "allowed"),
    [
        (VIEWER, access.NEEDS_READ, None, True),
        (VIEWER, access.NEEDS_PROJECT, {"a"}, False),
        (VIEWER, access.NEEDS_ADMIN, None, False),
        (OPERATOR, access.NEEDS_READ, None, True),
        (OPERATOR, access.NEEDS_PROJECT, {"a"}, True),
        (OPERATOR, access.NEEDS_PROJECT, {"a", "b"}, True),
        (OPERATOR, access.NEEDS_PROJECT, {"a", "c"}, False),
        (OPERATOR, access.NEEDS_PROJECT, {"c"}, False),
        (OPERATOR, access.NEEDS_PROJECT, None, False),  # bound to no project
        (OPERATOR, access.NEEDS_ADMIN, None, False),
        (ADMIN, access.NEEDS_PROJECT, None, True),
        (ADMIN, access.NEEDS_ADMIN, None, True),
        (access.ADMIN, access.NEEDS_ADMIN, None, True),
    ],
)
def test_authorize(
    principal: access.Principal, needs: str, projects: set[str] | None, allowed: bool
) -> None:
    if allowed:
        access.authorize(principal, action="Call", needs=needs, projects=projects)
        return
    with pytest.raises(errors.PermissionDenied) as refused:
        access.authorize(principal, action="Call", needs=needs, projects=projects)
    assert principal.actor in refused.value.message and "Call" in refused.value.message


def test_a_refusal_names_the_projects_outside_the_operators() -> None:
    with pytest.raises(errors.PermissionDenied) as refused:
        access.authorize(OPERATOR, action="DeleteWorkload", needs="project", projects={"c"})
    assert "touches project c" in refused.value.message
    assert "operator of a, b" in refused.value.message


def test_every_control_rpc_is_classified() -> None:
    methods = control_pb2.DESCRIPTOR.services_by_name["ControlService"].methods
    missing = [m.name for m in methods if m.name not in permissions.RULES]
    assert not missing, f"decide who may call {missing} in hub/api/permissions.py"
    for name, rule in permissions.RULES.items():
        assert rule.needs in access.NEEDS, name
        assert (rule.project is not None) == (rule.needs == access.NEEDS_PROJECT), name
        if rule.needs == access.NEEDS_READ:
            assert not rule.mutating, name


def test_an_unclassified_rpc_is_the_admins_and_audited() -> None:
    rule = permissions.rule_for("SomeFutureRpc")
    assert rule.needs == access.NEEDS_ADMIN and rule.mutating
