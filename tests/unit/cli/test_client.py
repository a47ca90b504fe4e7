"""The REST client's pure parts: reading error answers, quoting refs into paths."""

from __future__ import annotations

import json

import pytest

from cli import commands, kinds
from cli.client import error_from_body
from cli.errors import ApiError, CliError, HubUnreachable, ManifestError, UsageError


def test_the_hubs_error_body_gives_status_code_and_message() -> None:
    body = {"error": {"code": 404, "status": "NOT_FOUND", "message": "workload 'x' not found"}}
    error = error_from_body(404, json.dumps(body).encode())
    assert (error.status, error.code) == (404, "NOT_FOUND")
    assert error.api_message == "workload 'x' not found"
    assert error.message == "404 NOT_FOUND: workload 'x' not found"
    assert error.exit_code == 1


@pytest.mark.parametrize(
    ("raw", "reason", "expected"),
    [
        (b"<html>Bad Gateway</html>", "Bad Gateway", "502 BAD_GATEWAY: <html>Bad Gateway</html>"),
        (b"", "Bad Gateway", "502 BAD_GATEWAY: Bad Gateway"),
        (b'{"detail": "nope"}', "", '502 HTTP_ERROR: {"detail": "nope"}'),
    ],
)
def test_an_error_body_that_is_not_the_hubs_is_quoted(
    raw: bytes, reason: str, expected: str
) -> None:
    assert error_from_body(502, raw, reason=reason).message == expected


def test_an_unreachable_hub_names_the_url_and_the_ways_to_change_it() -> None:
    error = HubUnreachable("http://127.0.0.1:8080", "connection refused")
    assert "http://127.0.0.1:8080 (connection refused)" in error.message
    assert "--hub-url" in error.message and "WINGSMITH_HUB_URL" in error.message


@pytest.mark.parametrize(
    ("ref", "path"),
    [
        ("llama", "/v1/workloads/llama"),
        ("llama.east", "/v1/workloads/llama.east"),
        # A ':' would read as a custom verb, a '/' as another segment (docs/rest.md).
        ("a:b/c", "/v1/workloads/a%3Ab%2Fc"),
    ],
)
def test_a_ref_is_quoted_into_one_path_segment(ref: str, path: str) -> None:
    assert commands.resource_path(kinds.WORKLOAD, ref) == path


@pytest.mark.parametrize(
    ("error", "exit_code"),
    [
        (ApiError(409, "FAILED_PRECONDITION", "in use"), 1),
        (HubUnreachable("http://h", "timed out"), 1),
        (ManifestError("f.yaml", 2, "unknown kind"), 1),
        (UsageError("no admin token"), 2),
    ],
)
def test_each_error_has_its_exit_code(error: CliError, exit_code: int) -> None:
    assert error.exit_code == exit_code
