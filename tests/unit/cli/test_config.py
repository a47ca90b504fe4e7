"""Where the client finds the hub URL and the admin token, in order."""

from __future__ import annotations

import pathlib

import pytest

from cli import config
from cli.errors import UsageError


def token(
    cwd: pathlib.Path,
    *,
    flag: str | None = None,
    token_file: str | None = None,
    environ: dict[str, str] | None = None,
) -> str:
    return config.admin_token(flag=flag, token_file=token_file, environ=environ or {}, cwd=cwd)


def test_the_flag_wins_over_the_environment(tmp_path: pathlib.Path) -> None:
    assert token(tmp_path, flag="a" * 20, environ={"WINGSMITH_ADMIN_TOKEN": "env"}) == "a" * 20


def test_a_token_file_wins_over_the_environment_and_is_stripped(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "hub.db.admin-token"
    path.write_text("wsk_secret\n")
    environ = {"WINGSMITH_ADMIN_TOKEN": "env"}
    assert token(tmp_path, token_file=str(path), environ=environ) == "wsk_secret"


def test_the_environment_is_used_without_flags(tmp_path: pathlib.Path) -> None:
    assert token(tmp_path, environ={"WINGSMITH_ADMIN_TOKEN": " env \n"}) == "env"


def test_the_local_hub_token_file_is_the_last_resort(tmp_path: pathlib.Path) -> None:
    (tmp_path / "wingsmith.db.admin-token").write_text("wsk_local\n")
    assert token(tmp_path) == "wsk_local"


def test_no_token_anywhere_says_how_to_give_one(tmp_path: pathlib.Path) -> None:
    with pytest.raises(UsageError) as caught:
        token(tmp_path)
    for way in ("--token", "--token-file", "WINGSMITH_ADMIN_TOKEN"):
        assert way in caught.value.message


def test_both_token_flags_are_refused(tmp_path: pathlib.Path) -> None:
    with pytest.raises(UsageError, match="not both"):
        token(tmp_path, flag="a", token_file="b")


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_an_empty_token_file_is_refused(tmp_path: pathlib.Path, content: str) -> None:
    path = tmp_path / "t"
    path.write_text(content)
    with pytest.raises(UsageError, match="empty"):
        token(tmp_path, token_file=str(path))


def test_an_unreadable_token_file_names_it(tmp_path: pathlib.Path) -> None:
    with pytest.raises(UsageError, match=r"cannot read the admin token from .*missing"):
        token(tmp_path, token_file=str(tmp_path / "missing"))


@pytest.mark.parametrize(
    ("flag", "environ", "expected"),
    [
        (None, {}, "http://127.0.0.1:8080"),
        (None, {"WINGSMITH_HUB_URL": "http://hub:8080/"}, "http://hub:8080"),
        ("https://hub.example", {"WINGSMITH_HUB_URL": "http://other"}, "https://hub.example"),
    ],
)
def test_the_hub_url(flag: str | None, environ: dict[str, str], expected: str) -> None:
    assert config.hub_url(flag, environ) == expected


@pytest.mark.parametrize("bad", ["127.0.0.1:8080", "grpc://hub:50051", "http://"])
def test_a_hub_url_that_is_not_http_is_a_usage_error(bad: str) -> None:
    with pytest.raises(UsageError, match="expected http://HOST:PORT"):
        config.hub_url(bad, {})
