"""`wingsmith` argument parsing and dispatch; nothing here needs a running hub."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import types

import pytest

from cli import main as cli_main

CLIENT_COMMANDS = ("get", "create", "scale", "set-quota", "enable", "disable", "delete")


@pytest.fixture(autouse=True)
def no_ambient_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    """No token or URL from the developer's shell or a hub started in the working directory."""
    monkeypatch.delenv("WINGSMITH_HUB_URL", raising=False)
    monkeypatch.delenv("WINGSMITH_ADMIN_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)


def parse(*argv: str) -> object:
    return cli_main.build_parser().parse_args(list(argv))


def exit_code(*argv: str) -> int:
    with pytest.raises(SystemExit) as caught:
        cli_main.main(list(argv))
    return int(caught.value.code or 0)


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code("--help") == 0
    out = capsys.readouterr().out
    for command in (*cli_main.LAUNCHERS, *CLIENT_COMMANDS):
        assert f"    {command} " in out


@pytest.mark.parametrize("command", CLIENT_COMMANDS)
def test_every_client_command_takes_the_connection_and_output_options(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_code(command, "--help") == 0
    out = capsys.readouterr().out
    for option in ("--hub-url", "--token", "--token-file", "-o {table,json,yaml}"):
        assert option in out


@pytest.mark.parametrize("word", ["workload", "workloads", "Workloads", "WORKLOAD"])
def test_get_takes_singular_or_plural_in_any_case(word: str) -> None:
    args = parse("get", word, "llama")
    assert (args.kind, args.ref) == (word.lower(), "llama")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("get", "clusters"), None),
        (("-o", "json", "get", "clusters"), "json"),
        (("get", "clusters", "-o", "yaml"), "yaml"),
        (("-o", "json", "get", "clusters", "--output", "yaml"), "yaml"),
    ],
)
def test_the_output_option_goes_before_or_after_the_command(
    argv: tuple[str, ...], expected: str | None
) -> None:
    assert parse(*argv).output == expected  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "argv",
    [
        ("get",),
        ("get", "pods"),
        ("get", "clusters", "-o", "xml"),
        ("create",),
        ("scale", "workload", "llama"),
        ("scale", "workload", "llama", "--replicas", "-1"),
        ("scale", "workload", "llama", "--replicas", "two"),
        ("scale", "deployment", "llama.east", "--replicas", "1"),
        ("set-quota", "team-a"),
        ("set-quota", "team-a", "H100-80GB"),
        ("set-quota", "team-a", "=4"),
        ("set-quota", "team-a", "H100-80GB=-1"),
        ("enable", "workload", "llama"),
        ("disable", "deployment"),
        ("delete", "deployment", "llama.east"),
        ("delete", "workload"),
        ("nonsense",),
    ],
)
def test_usage_errors_exit_2(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(*argv) == 2
    assert "usage: wingsmith" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (("get", "clusters", "--project", "a"), "--project does not filter clusters"),
        (("get", "deployments", "--replica", "r"), "(filters: --workload, --cluster)"),
        (("get", "workload", "llama", "--project", "a"), "filters apply to lists"),
        (("get", "allocation", "rep_1"), "allocations have no REF"),
        (("set-quota", "team-a", "A=1", "A=2"), "device class 'A' given twice"),
    ],
)
def test_argument_checks_come_before_the_token_and_exit_2(
    argv: tuple[str, ...], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # No token is configured: the usage problem is reported, not the missing token.
    assert cli_main.main(list(argv)) == 2
    err = capsys.readouterr().err
    assert problem in err
    assert "usage: wingsmith" in err


def test_a_bad_create_file_is_reported_before_the_token(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kind: Pod\n")
    assert cli_main.main(["create", "-f", str(path)]) == 1
    assert capsys.readouterr().err.startswith(f"error: {path}: document 1: unknown kind 'Pod'")


def test_a_client_command_without_a_token_exits_2_saying_how_to_give_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli_main.main(["get", "clusters"]) == 2
    assert "no admin token: pass --token TOKEN or --token-file PATH" in capsys.readouterr().err


@pytest.mark.parametrize(("word", "module"), [(w, m) for w, (m, _) in cli_main.LAUNCHERS.items()])
def test_launchers_hand_the_rest_of_the_command_line_to_their_program(
    word: str, module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: list[list[str]] = []
    fake = types.ModuleType(module)
    fake.main = received.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module, fake)
    # Options a client command would refuse go through untouched.
    assert cli_main.main([word, "--db", "x.db", "--help", "-o", "pdf"]) == 0
    assert received == [["--db", "x.db", "--help", "-o", "pdf"]]


def test_wingsmith_hub_help_is_the_hubs_own(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code("hub", "--help") == 0
    assert capsys.readouterr().out.startswith("usage: wingsmith hub")


def test_client_commands_load_neither_the_hub_nor_the_agent() -> None:
    probe = (
        "import sys, cli.main; cli.main.build_parser(); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'hub', 'agent', 'wingsmith'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"
