"""The command line's arguments: what every command's parser shares.

`cli.main.build_parser` adds each command from the module of its role: `reads` (get,
describe, explain, audit), `changes` (create, apply, scale, set-priority, set-quota,
enable/disable, delete, label) and `operations` (rotate-token, cordon/uncordon/drain,
discovered, rollout, authority, token). Each command's `add_X(sub, client)` defines its
arguments and a `prepare` that checks them (a usage error never needs a hub) and returns the
action to run against the hub (cli/commands.py and its neighbours). Here: the parser helpers
(a command, a group of actions, and the arguments many commands take alike: KIND, --dry-run,
-f FILE) and the argument types they share.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cli import commands, jsonpath, kinds, output

if TYPE_CHECKING:
    # Generic only in typeshed, not at runtime.
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

Action = Callable[[commands.Context], None]


def command(
    sub: Subparsers,
    client: argparse.ArgumentParser,
    *,
    name: str,
    help_text: str,
    prepare: Callable[[argparse.Namespace], Action],
) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, parents=[client], help=help_text, description=help_text)
    parser.set_defaults(prepare=prepare, parser=parser)
    return parser


def group(
    sub: Subparsers, client: argparse.ArgumentParser, *, name: str, help_text: str
) -> Subparsers:
    """A command word with actions under it (`wingsmith discovered track REF`). It takes the
    client options too, so that they may come before or after the action word as well."""
    parser = sub.add_parser(name, parents=[client], help=help_text, description=help_text)
    return parser.add_subparsers(dest="action", metavar="ACTION", required=True)


def kind_argument(
    parser: argparse.ArgumentParser,
    choices: Sequence[str] | None,
    help_text: str = "",
    **options: Any,
) -> None:
    """The KIND word, in any case, one of `choices` (None: the command's prepare checks it);
    its help lists them unless `help_text` says it."""
    parser.add_argument(
        "kind",
        metavar="KIND",
        type=str.lower,
        choices=choices,
        help=help_text or choices_help(choices or ()),
        **options,
    )


def dry_run_flag(parser: argparse.ArgumentParser, help_text: str = "") -> None:
    """--dry-run: the hub answers what it would do and writes nothing."""
    parser.add_argument("--dry-run", action="store_true", help=help_text or DRY_RUN_HELP)


def file_argument(parser: argparse.ArgumentParser) -> None:
    """-f FILE, required: the YAML or JSON documents a command reads (- for stdin)."""
    parser.add_argument(
        "-f", "--filename", required=True, metavar="FILE", help="the file, or - for stdin"
    )


def all_kinds_help() -> str:
    return ", ".join(k.plural for k in kinds.KINDS if k.all_param)


DRY_RUN_HELP = (
    "ask the hub what it would do (placement, admission, restarts, preemptions), writing nothing"
)


def whole_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def quota_pair(text: str) -> tuple[str, int]:
    device_class, sep, limit = text.partition("=")
    if not sep or not device_class:
        raise argparse.ArgumentTypeError(f"expected CLASS=N (e.g. H100-80GB=16), got {text!r}")
    return device_class, whole_number(limit)


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if value < 0 or value != value:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def sort_path(text: str) -> str:
    path = text.strip()
    try:
        jsonpath.compile_template(path if path.startswith("{") else "{" + path + "}")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return path


def output_format(text: str) -> str:
    try:
        return output.parse_format(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def choices_help(words: Sequence[str]) -> str:
    return "one of: " + ", ".join(words)
