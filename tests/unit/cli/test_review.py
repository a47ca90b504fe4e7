"""`authority review` drawn for people (cli/review.py), from small DeploymentReview objects."""

from __future__ import annotations

import pytest

from cli import review
from tests.unit.cli import builders


def block(text: str, first_line: str) -> list[str]:
    """The lines of the blank-line separated block that starts with `first_line`."""
    for chunk in text.split("\n\n"):
        lines = chunk.splitlines()
        if lines[0].startswith(first_line):
            return lines
    raise AssertionError(f"no block starts with {first_line!r} in:\n{text}")


def test_a_refused_adoption_reads_as_heading_differences_args_and_config() -> None:
    assert review.render(builders.review()).splitlines() == [
        "deployment:     legacy-qwen.east (dep_1)",
        "authority:      observed, adopted",
        "summary:        taking control with these differences accepted restarts pods "
        "(new template)",
        "restarts pods:  yes, if promoted with --accept-differences (the pod template changes)",
        "",
        "differences (declared vs live):",
        "  engine_args: declared (none), observed --model Qwen/Qwen2.5-7B-Instruct "
        "--tensor-parallel-size 2",
        "",
        "FLAG                    IMPORTED                  ENGINE_ARGS  LIVE",
        "--model                 Qwen/Qwen2.5-7B-Instruct  -            Qwen/Qwen2.5-7B-Instruct",
        "--tensor-parallel-size  2                         -            2",
        "",
        "CONFIG          DECLARED  LIVE",
        "replicas        2         2 (2 ready)",
        "engine version  0.9.1     0.9.1",
        "serving digest  svg_ab12  unlabeled: 2",
    ]


@pytest.mark.parametrize(
    ("difference", "line"),
    [
        (("replicas", "4", "2"), "replicas: declared 4, observed 2"),
        (("engine_args", "", "--x 1"), "engine_args: declared (none), observed --x 1"),
        (("engine_args", "--x 1", ""), "engine_args: declared --x 1, observed (none)"),
        (
            ("engine_version", "0.9.1", "0.9.1, 0.10.0"),
            "engine_version: declared 0.9.1, observed 0.9.1, 0.10.0",
        ),
    ],
)
def test_each_difference_reads_as_declared_and_observed(
    difference: tuple[str, str, str], line: str
) -> None:
    assert review.difference(builders.difference(*difference)) == line


def test_a_matching_declaration_says_no_differences_and_no_restart() -> None:
    text = review.render(
        builders.review(
            differences=[],
            restarts_pods=False,
            engine_args=builders.LEGACY_ARGS,
            summary="the declaration matches the cluster: taking control changes nothing",
        )
    )
    assert block(text, "deployment:")[3] == "restarts pods:  no"
    assert block(text, "differences") == ["differences: none"]
    assert block(text, "FLAG")[1].split() == ["--model", *["Qwen/Qwen2.5-7B-Instruct"] * 3]


def test_a_managed_deployment_has_nothing_to_promote() -> None:
    managed = builders.review(
        authority="managed", adopted=False, summary="managed: the agent reconciles it"
    )
    assert block(review.render(managed), "deployment:")[1:] == [
        "authority:      managed",
        "summary:        managed: the agent reconciles it",
        "restarts pods:  n/a (already managed)",
    ]


def test_no_args_anywhere_is_one_line_and_no_live_config_is_dashes() -> None:
    text = review.render(
        builders.review(
            imported_args=[], engine_args=[], live_args=[], live_engine_versions=[], live_digests={}
        )
    )
    assert block(text, "engine args") == ["engine args: none imported, declared or live"]
    assert block(text, "CONFIG")[2:] == [
        "engine version  0.9.1     -",
        "serving digest  svg_ab12  -",
    ]


def test_live_digests_list_each_digest_with_its_replicas() -> None:
    text = review.render(builders.review(live_digests={"svg_ab12": 1, "svg_old": 2}))
    assert block(text, "CONFIG")[3] == "serving digest  svg_ab12  svg_ab12: 1, svg_old: 2"


@pytest.mark.parametrize(
    ("argv", "pairs"),
    [
        ([], []),
        (["--tp", "2"], [("--tp", "2")]),
        (["--tp=2"], [("--tp", "2")]),
        (["--enforce-eager", "--seed", "-1"], [("--enforce-eager", "(set)"), ("--seed", "-1")]),
        (["--served-model-name", "a", "b"], [("--served-model-name", "a b")]),
        (["serve", "m", "--tp", "2"], [("(args)", "serve m"), ("--tp", "2")]),
        (["-"], [("(args)", "-")]),
    ],
)
def test_argv_is_read_as_flags_and_their_values(
    argv: list[str], pairs: list[tuple[str, str]]
) -> None:
    assert review.flags(argv) == pairs


def test_flag_rows_pair_each_flag_across_columns_and_repeated_flags_by_position() -> None:
    imported = ["--model", "m", "--env", "A", "--env", "B"]
    declared = ["--env", "A"]
    live = ["--model", "m", "--max-model-len", "8192", "--env", "A", "--env", "C"]
    assert review.flag_rows([imported, declared, live]) == [
        ["--model", "m", "-", "m"],
        ["--env", "A", "A", "A"],
        ["--env", "B", "-", "C"],
        ["--max-model-len", "-", "-", "8192"],
    ]
