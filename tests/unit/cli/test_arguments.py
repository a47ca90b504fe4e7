"""`wingsmith` argument parsing and dispatch; nothing here needs a running hub."""

from __future__ import annotations

import io
import json
import pathlib
import subprocess
import sys
import types

import pytest

from cli import commands
from cli import main as cli_main
from cli.errors import ApiError, PromotionRefused
from tests.unit.cli import builders

CLIENT_COMMANDS = (
    "get",
    "describe",
    "create",
    "apply",
    "scale",
    "set-priority",
    "set-quota",
    "enable",
    "disable",
    "delete",
    "discovered",
    "authority",
)
# The actions under a command word; each is a client command of its own.
ACTIONS = (
    "discovered track",
    "discovered ignore",
    "discovered promote",
    "authority review",
    "authority promote",
    "authority demote",
)


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


@pytest.mark.parametrize("command", [*CLIENT_COMMANDS, *ACTIONS])
def test_every_client_command_takes_the_connection_and_output_options(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_code(*command.split(), "--help") == 0
    out = capsys.readouterr().out
    for option in ("--hub-url", "--token", "--token-file", "-o FORMAT", "--no-headers"):
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
        ("set-priority", "workload", "llama"),
        ("set-priority", "workload", "llama", "urgent"),
        ("set-priority", "deployment", "llama.east", "high"),
        ("set-quota", "team-a"),
        ("set-quota", "team-a", "H100-80GB"),
        ("set-quota", "team-a", "=4"),
        ("set-quota", "team-a", "H100-80GB=-1"),
        ("enable", "workload", "llama"),
        ("disable", "deployment"),
        ("delete", "deployment", "llama.east"),
        ("get", "clusters", "-o", "jsonpath={.items[*]"),
        ("get", "clusters", "-o", "jsonpath={range .items[*]}{.cluster_id}"),
        ("get", "clusters", "--watch-interval", "soon"),
        ("describe", "allocation", "rep_1"),
        ("describe", "workload"),
        ("apply",),
        ("completion", "fish"),
        ("delete", "discovered", "east.ml.x"),
        ("discovered",),
        ("discovered", "track"),
        ("discovered", "adopt", "east.ml.x"),
        ("discovered", "promote", "east.ml.x"),
        ("discovered", "ignore", "east.ml.x", "east.ml.y"),
        ("authority",),
        ("authority", "review"),
        ("authority", "take", "llama.east"),
        ("authority", "promote", "llama.east", "llama.west"),
        ("authority", "demote", "llama.east", "--accept-differences"),
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
        (("get", "deployments", "--replica", "r"), "(filters: --workload, --cluster, --selector)"),
        (("get", "workload", "llama", "--project", "a"), "filters apply to lists"),
        (("get", "allocation", "rep_1"), "allocations have no REF"),
        (("set-quota", "team-a", "A=1", "A=2"), "device class 'A' given twice"),
        (("get", "workloads", "--all"), "--all applies to discovered only, not to workloads"),
        (("get", "discovered", "east.ml.x", "--all"), "filters apply to lists"),
        (("get", "discovered", "--project", "a"), "--project does not filter discovered"),
        (("delete", "workload"), "name what to delete: KIND REF... or -f FILE"),
        (("delete", "workload", "x", "-f", "f.yaml"), "either -f FILE or KIND REF..., not both"),
        (("describe", "workload", "x", "-o", "json"), "describe prints a page for people"),
        (("get", "workloads", "--watch", "--watch-interval", "0"), "--watch-interval must be"),
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


# -- the new commands' requests, through a fake client at the CLI's own seam -------------------


class FakeClient:
    """Records each request and answers it with a small canned resource."""

    def __init__(self, *, refusal: ApiError | None = None) -> None:
        self.requests: list[tuple[str, str, object]] = []
        # Raised by post, as HubClient raises the hub's error answers.
        self.refusal = refusal

    def get(self, path: str, params: dict[str, str] | None = None) -> dict[str, object]:
        self.requests.append(("GET", path, params))
        return builders.review() if path.endswith("/review") else builders.discovered()

    def list_all(self, path: str, key: str, params: dict[str, str]) -> list[dict[str, object]]:
        self.requests.append(("LIST", path, params))
        return [builders.discovered()]

    def post(self, path: str, body: dict[str, object]) -> dict[str, object]:
        self.requests.append(("POST", path, body))
        if self.refusal is not None:
            raise self.refusal
        return builders.workload() if path.endswith("/promote") else builders.deployment()


def run_prepared(
    *argv: str, fmt: str = "table", client: FakeClient | None = None
) -> tuple[FakeClient, str]:
    """Parse `argv` as main does, run the prepared action against a FakeClient."""
    args = parse(*argv)
    client = client or FakeClient()
    out = io.StringIO()
    ctx = commands.Context(client=client, output=fmt, out=out, err=io.StringIO())  # type: ignore[arg-type]
    args.prepare(args)(ctx)  # type: ignore[attr-defined]
    return client, out.getvalue()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ("get", "discovered"),
            ("LIST", "/v1/discovered", {}),
        ),
        (
            ("get", "discovered", "--cluster", "east", "--all"),
            ("LIST", "/v1/discovered", {"cluster_id": "east", "include_ignored": "true"}),
        ),
        (
            ("get", "discovered", "east.ml.legacy-qwen"),
            ("GET", "/v1/discovered/east.ml.legacy-qwen", None),
        ),
        (
            ("discovered", "track", "east.ml.legacy-qwen"),
            ("POST", "/v1/discovered/east.ml.legacy-qwen/track", {}),
        ),
        (
            ("discovered", "ignore", "dsc_1"),
            ("POST", "/v1/discovered/dsc_1/ignore", {}),
        ),
        (
            ("discovered", "promote", "east.ml.legacy-qwen", "--project", "search"),
            ("POST", "/v1/discovered/east.ml.legacy-qwen/promote", {"project": "search"}),
        ),
        (
            ("discovered", "promote", "east.ml.q", "--project", "search", "--name", "qwen",
             "--device-class", "A100-40GB"),
            ("POST", "/v1/discovered/east.ml.q/promote",
             {"project": "search", "workload_name": "qwen", "device_class": "A100-40GB"}),
        ),
        (
            ("authority", "review", "legacy-qwen.east"),
            ("GET", "/v1/deployments/legacy-qwen.east/review", None),
        ),
        (
            ("authority", "promote", "legacy-qwen.east"),
            ("POST", "/v1/deployments/legacy-qwen.east/authority", {"authority": "managed"}),
        ),
        (
            ("authority", "promote", "dep_1", "--accept-differences"),
            ("POST", "/v1/deployments/dep_1/authority",
             {"authority": "managed", "accept_differences": True}),
        ),
        (
            ("authority", "demote", "legacy-qwen.east"),
            ("POST", "/v1/deployments/legacy-qwen.east/authority", {"authority": "observed"}),
        ),
    ],
)  # fmt: skip
def test_each_new_command_sends_its_request(
    argv: tuple[str, ...], expected: tuple[str, str, object]
) -> None:
    client, _ = run_prepared(*argv)
    assert client.requests == [expected]


@pytest.mark.parametrize(
    ("argv", "first_words"),
    [
        (("discovered", "ignore", "east.ml.legacy-qwen"), ["NAME", "STATE"]),
        (("discovered", "promote", "east.ml.legacy-qwen", "--project", "p"), ["NAME", "PROJECT"]),
        (("authority", "demote", "legacy-qwen.east"), ["NAME", "CLUSTER"]),
        (("authority", "review", "legacy-qwen.east"), ["deployment:", "legacy-qwen.east"]),
    ],
)
def test_each_new_command_prints_what_the_hub_answered(
    argv: tuple[str, ...], first_words: list[str]
) -> None:
    _, out = run_prepared(*argv)
    assert out.split()[:2] == first_words


def test_authority_review_as_json_is_the_hubs_review_unchanged() -> None:
    _, out = run_prepared("authority", "review", "legacy-qwen.east", fmt="json")
    assert json.loads(out) == builders.review()


@pytest.mark.parametrize(
    "argv",
    [
        ("discovered", "-o", "json", "track", "east.ml.x"),
        ("discovered", "track", "east.ml.x", "-o", "json"),
        ("-o", "json", "authority", "demote", "llama.east"),
        ("authority", "-o", "json", "demote", "llama.east"),
    ],
)
def test_options_go_before_or_after_the_action_word(argv: tuple[str, ...]) -> None:
    assert parse(*argv).output == "json"  # type: ignore[attr-defined]


def test_a_refused_promotion_carries_the_hubs_message_and_a_hint_to_review() -> None:
    message = "the declared config differs: engine_args: declared (none), observed --x"
    client = FakeClient(refusal=ApiError(409, "FAILED_PRECONDITION", message))
    with pytest.raises(PromotionRefused) as refused:
        run_prepared("authority", "promote", "legacy-qwen.east", client=client)
    error = refused.value
    assert (error.status, error.code, error.api_message) == (409, "FAILED_PRECONDITION", message)
    assert (error.deployment, error.exit_code) == ("legacy-qwen.east", 1)
    assert "wingsmith authority review legacy-qwen.east" in error.hint
    assert "--accept-differences" in error.hint


@pytest.mark.parametrize(
    ("argv", "refusal"),
    [
        (("authority", "demote", "x.east"), ApiError(409, "FAILED_PRECONDITION", "no")),
        (("authority", "promote", "x.east"), ApiError(404, "NOT_FOUND", "no such deployment")),
    ],
)
def test_other_authority_errors_stay_the_hubs_error_without_a_hint(
    argv: tuple[str, ...], refusal: ApiError
) -> None:
    with pytest.raises(ApiError) as caught:
        run_prepared(*argv, client=FakeClient(refusal=refusal))
    assert type(caught.value) is ApiError
    assert caught.value.hint == ""


def test_the_clis_priority_classes_are_the_apis() -> None:
    """The CLI speaks REST only, so it keeps its own list: the API's enum, in its order."""
    from cli.kinds import PRIORITIES
    from hub.model import PRIORITIES as HUB_PRIORITIES
    from wingsmith.v1 import resources_pb2 as pb

    names = [v.name for v in pb.Priority.DESCRIPTOR.values if v.number]
    assert tuple(name.removeprefix("PRIORITY_").lower() for name in names) == PRIORITIES
    assert PRIORITIES == HUB_PRIORITIES
