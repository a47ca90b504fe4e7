"""`wingsmith hub` and `wingsmith agent` refuse bad flags before they start: exit 2 with
`error: <flag>: <problem>`, no traceback, nothing created."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import main as agent_main
from hub.app import command as hub_app

AGENT = ["--hub", "127.0.0.1:50051", "--cluster-id", "east", "--token", "wsa_token"]


def refused(main: object, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as caught:
        main(argv)  # type: ignore[operator]
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("nodes=two", "nodes='two': expected a whole number 1..1000"),
        ("bogus=1", "unknown key 'bogus'; accepted: nodes, gpus, class"),
        ("ready_after=abc", "ready_after='abc': expected a duration like 500ms"),
        ("nodes=2,", "is not key=value"),
        ("", "pass exactly one of --simulate SPEC or --kubernetes"),
    ],
)
def test_a_bad_simulate_spec_exits_2_naming_the_key_and_what_is_allowed(
    spec: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(agent_main.main, [*AGENT, "--simulate", spec], capsys)
    assert err.startswith("error: ")
    assert said in err
    if spec:
        assert err.startswith("error: --simulate: ")


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--hub", "nope"], "--hub"),
        (["--log-level", "loud"], "--log-level"),
        (["--sim-seed", "/does/not/exist.yaml"], "--sim-seed"),
        (["--client-cert", "c.pem"], "--client-cert"),
        (["--hub-ca", "/does/not/exist.pem"], "--hub-ca"),
    ],
)
def test_other_bad_agent_flags_exit_2_naming_the_flag(
    extra: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(agent_main.main, [*AGENT, "--simulate", "nodes=1", *extra], capsys)
    assert err.startswith(f"error: {flag}: ")


def test_a_seed_file_with_a_bad_manifest_is_refused_before_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text("kind: NotADgd\n")
    err = refused(
        agent_main.main, [*AGENT, "--simulate", "nodes=1", "--sim-seed", str(seed)], capsys
    )
    assert err.startswith("error: --sim-seed: ")


def test_the_agent_without_a_token_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(agent_main.ENV_TOKEN, raising=False)
    err = refused(agent_main.main, ["--cluster-id", "east", "--simulate", "nodes=1"], capsys)
    assert "cluster token is required" in err


def hub_args(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "--db",
        str(tmp_path / "hub.db"),
        "--grpc-listen",
        "127.0.0.1:0",
        "--http-listen",
        "127.0.0.1:0",
        *extra,
    ]


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--grpc-listen", "nope"], "--grpc-listen"),
        (["--log-level", "loud"], "--log-level"),
        (["--stale-after", "0"], "--stale-after"),
        (["--heartbeat-interval", "60"], "--heartbeat-interval"),
        (["--max-connection-age", "soon"], "--max-connection-age"),
        (["--tls-cert", "/does/not/exist", "--tls-key", "/does/not/exist"], "--tls-cert"),
        (["--client-ca", "ca.pem"], "--client-ca"),
    ],
)
def test_bad_hub_flags_exit_2_before_the_database_is_created(
    tmp_path: Path, extra: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(hub_app.main, hub_args(tmp_path, *extra), capsys)
    assert err.startswith(f"error: {flag}: ")
    assert not list(tmp_path.iterdir()), "nothing was created"


def test_preemption_is_off_unless_the_hub_is_started_with_it(tmp_path: Path) -> None:
    assert hub_app.settings_of(hub_app.parse_args(hub_args(tmp_path))).preemption is False
    with_flag = hub_app.parse_args(hub_args(tmp_path, "--preemption"))
    assert hub_app.settings_of(with_flag).preemption is True


def test_a_short_admin_token_is_refused_before_the_database_is_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WINGSMITH_ADMIN_TOKEN", "too-short")
    err = refused(hub_app.main, hub_args(tmp_path), capsys)
    assert "at least 16 characters" in err
    assert not list(tmp_path.iterdir()), "no database, no migrations"


def test_a_missing_database_directory_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(hub_app.main, ["--db", str(tmp_path / "no" / "hub.db")], capsys)
    assert err.startswith("error: --db: ")


def test_hub_help_shows_the_default_addresses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        hub_app.parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: 127.0.0.1:50051)" in out
    assert "(default: 127.0.0.1:8080)" in out
    assert "(default: wingsmith.db)" in out


def test_a_postgresql_store_without_an_admin_token_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("WINGSMITH_ADMIN_TOKEN", raising=False)
    err = refused(hub_app.main, ["--database-url", "postgresql://u@db/wingsmith"], capsys)
    assert err.startswith("error: --db: a PostgreSQL store is shared by every hub")
    assert "WINGSMITH_ADMIN_TOKEN" in err


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--log-level", "chatty"], "--log-level"),
        (["--otlp-endpoint", "otel:4317"], "--otlp-endpoint"),
    ],
)
def test_the_hub_and_the_agent_refuse_the_shared_logging_flags_alike(
    tmp_path: Path, extra: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    hub_err = refused(hub_app.main, hub_args(tmp_path, *extra), capsys)
    agent_err = refused(agent_main.main, [*AGENT, "--simulate", "nodes=1", *extra], capsys)
    assert hub_err.startswith(f"error: {flag}: ")
    assert hub_err == agent_err


def test_the_otlp_endpoint_defaults_to_the_opentelemetry_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4317")
    assert hub_app.parse_args(hub_args(tmp_path)).otlp_endpoint == "http://otel:4317"
    agent_args = agent_main.parse_args([*AGENT, "--simulate", "nodes=1"])
    assert agent_args.otlp_endpoint == "http://otel:4317"
    assert agent_args.log_format == "text"
