"""`wingsmith authority review`: a deployment review (GET /v1/deployments/{ref}/review) drawn
for people.

The hub's DeploymentReview says what promoting a deployment to managed would change. This
module lays it out in four blocks, so that an operator can decide before running
`authority promote`:

    heading       the deployment, its authority, the hub's summary, whether pods restart
    differences   each one as "field: declared X, observed Y", the hub's own wording
    engine args   imported, declared (engine_args) and live args, one row per flag
    config        declared vs live replicas, engine version and serving digests

Pure: a JSON object in, a string out. `-o json` and `-o yaml` bypass it and print the review
unchanged (cli/commands.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from cli import cells, output

JsonObject = dict[str, Any]

# The hub writes an empty declared value as "(none)" in its refusal; the same word here.
NONE = "(none)"
# A flag given without a value ("--enforce-eager").
FLAG_SET = "(set)"
# Words before the first flag (a module path, a positional model).
POSITIONAL = "(args)"

_NUMBER = re.compile(r"-\d+(\.\d+)?$")


def render(review: JsonObject) -> str:
    blocks = [_heading(review), _differences(review), _engine_args(review), _config(review)]
    return "\n\n".join(blocks)


# -- heading ----------------------------------------------------------------------------------


def _heading(review: JsonObject) -> str:
    name = f"{cells.text(review.get('name'))} ({cells.text(review.get('deployment_id'))})"
    authority = cells.text(review.get("authority"))
    if review.get("adopted"):
        authority += ", adopted"
    rows = [
        ["deployment:", name],
        ["authority:", authority],
        ["summary:", cells.text(review.get("summary"))],
        ["restarts pods:", _restarts(review)],
    ]
    return output.format_rows(rows)


def _restarts(review: JsonObject) -> str:
    if review.get("authority") == "managed":
        # Nothing to promote: the agent already applies the declaration.
        return "n/a (already managed)"
    if review.get("restarts_pods"):
        return "yes, if promoted with --accept-differences (the pod template changes)"
    return "no"


# -- differences ------------------------------------------------------------------------------


def _differences(review: JsonObject) -> str:
    differences = review.get("differences") or []
    if not differences:
        return "differences: none"
    lines = ["differences (declared vs live):"]
    lines += [f"  {difference(d)}" for d in differences]
    return "\n".join(lines)


def difference(d: JsonObject) -> str:
    """One difference as the hub words it in a refusal: `engine_args: declared (none),
    observed --model x`."""
    declared = d.get("declared") or NONE
    observed = d.get("observed") or NONE
    return f"{cells.text(d.get('field'))}: declared {declared}, observed {observed}"


# -- engine args ------------------------------------------------------------------------------


def _engine_args(review: JsonObject) -> str:
    columns = [list(review.get(key) or []) for key in ("imported_args", "engine_args", "live_args")]
    if not any(columns):
        return "engine args: none imported, declared or live"
    rows = [["FLAG", "IMPORTED", "ENGINE_ARGS", "LIVE"], *flag_rows(columns)]
    return output.format_rows(rows)


def flag_rows(columns: Sequence[Sequence[str]]) -> list[list[str]]:
    """One row per flag found in any column: [flag, value in column 1, value in column 2, ...].

    A flag absent from a column is "-". A repeated flag gets one row per occurrence, paired by
    position. Rows keep the order in which flags first appear, reading the columns in turn.
    The hub compares argv word for word, so two columns with the same flags in another order
    look alike here; the differences block, which quotes the argv, still tells them apart.
    """
    parsed = [dict(_keyed(flags(argv))) for argv in columns]
    keys = list(dict.fromkeys(key for table in parsed for key in table))
    return [[key[0], *(table.get(key, cells.MISSING) for table in parsed)] for key in keys]


def flags(argv: Sequence[str]) -> list[tuple[str, str]]:
    """argv as (flag, value) pairs: `--tp 2` and `--tp=2` are ("--tp", "2"); a flag with no
    value is (flag, "(set)"); words before the first flag are ("(args)", "<words>")."""
    pairs: list[tuple[str, list[str]]] = []
    for word in argv:
        if _is_flag(word):
            flag, sep, value = word.partition("=")
            pairs.append((flag, [value] if sep else []))
        elif pairs:
            pairs[-1][1].append(word)
        else:
            pairs.append((POSITIONAL, [word]))
    return [(flag, " ".join(words) if words else FLAG_SET) for flag, words in pairs]


def _is_flag(word: str) -> bool:
    # "-1" is a value ("--seed -1"), not a flag.
    return word.startswith("-") and len(word) > 1 and not _NUMBER.match(word)


def _keyed(pairs: Sequence[tuple[str, str]]) -> list[tuple[tuple[str, int], str]]:
    """Each pair keyed by (flag, occurrence), so that a repeated flag pairs up by position."""
    seen: dict[str, int] = {}
    keyed = []
    for flag, value in pairs:
        seen[flag] = seen.get(flag, 0) + 1
        keyed.append(((flag, seen[flag]), value))
    return keyed


# -- declared vs live config ------------------------------------------------------------------


def _config(review: JsonObject) -> str:
    live_replicas = (
        f"{cells.text(review.get('live_replicas'))} "
        f"({cells.text(review.get('ready_replicas'))} ready)"
    )
    versions = ", ".join(review.get("live_engine_versions") or []) or cells.MISSING
    rows = [
        ["CONFIG", "DECLARED", "LIVE"],
        ["replicas", cells.text(review.get("declared_replicas")), live_replicas],
        ["engine version", cells.text(review.get("declared_engine_version")), versions],
        ["serving digest", cells.text(review.get("declared_serving_digest")), _digests(review)],
    ]
    return output.format_rows(rows)


def _digests(review: JsonObject) -> str:
    # Pods of an adopted DGD carry no digest label: the hub counts them as "unlabeled".
    live = review.get("live_digests") or {}
    return ", ".join(f"{digest}: {count}" for digest, count in live.items()) or cells.MISSING
