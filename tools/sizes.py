"""Size figures of the code (issue 21): lines per module and lines per function.

`python -m tools.sizes` prints, over the Python modules of hub/, agent/, cli/ and common/
(or the folders named), the median, p90 and max of lines per module with the number of modules
over 500 lines, and the median, p90 and max of lines per function, the largest of each named.
A module's lines are its physical lines; a function's are from its `def` (decorators left
out) to its last line, for every function and method, nested ones too (a nested function's
lines count in its parent as well). p90 is the inclusive 90th percentile (Python's
`statistics.quantiles(..., method="inclusive")`). `--json` prints the figures as JSON, to
compare two trees: `git worktree add /tmp/old main && (cd /tmp/old && python -m tools.sizes)`.
"""

from __future__ import annotations

import argparse
import ast
import json
import pathlib
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass

FOLDERS = ("hub", "agent", "cli", "common")
BIG_MODULE = 500


@dataclass(frozen=True)
class Sized:
    name: str
    lines: int


def modules(root: pathlib.Path, folders: Sequence[str]) -> list[Sized]:
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            with path.open(encoding="utf-8") as f:
                found.append(Sized(str(path.relative_to(root)), sum(1 for _ in f)))
    return found


def functions(root: pathlib.Path, module: Sized) -> list[Sized]:
    tree = ast.parse((root / module.name).read_text(encoding="utf-8"), module.name)
    return [
        Sized(f"{module.name}:{node.name}", (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def figures(sizes: Sequence[Sized]) -> dict[str, float | int | str]:
    lines = [s.lines for s in sizes]
    largest = max(sizes, key=lambda s: s.lines)
    return {
        "count": len(lines),
        "median": statistics.median(lines),
        "p90": statistics.quantiles(lines, n=10, method="inclusive")[-1],
        "max": largest.lines,
        "largest": largest.name,
    }


def measure(root: pathlib.Path, folders: Sequence[str]) -> dict[str, dict[str, float | int | str]]:
    mods = modules(root, folders)
    funcs = [f for m in mods for f in functions(root, m)]
    module_figures = figures(mods)
    module_figures["over_500"] = sum(1 for m in mods if m.lines > BIG_MODULE)
    return {"modules": module_figures, "functions": figures(funcs)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.sizes", description=__doc__)
    parser.add_argument("folders", nargs="*", default=list(FOLDERS))
    parser.add_argument("--root", default=".", help="the tree to measure (default: here)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--over", action="store_true", help=f"also list the modules over {BIG_MODULE} lines"
    )
    args = parser.parse_args(argv)
    root = pathlib.Path(args.root)
    result = measure(root, args.folders)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    m, f = result["modules"], result["functions"]
    print(f"over {', '.join(args.folders)}:")
    print(
        f"lines per module:   median {m['median']}, p90 {m['p90']}, max {m['max']}"
        f" ({m['largest']}); {m['count']} modules, {m['over_500']} over {BIG_MODULE}"
    )
    print(
        f"lines per function: median {f['median']}, p90 {f['p90']}, max {f['max']}"
        f" ({f['largest']}); {f['count']} functions"
    )
    if args.over:
        for sized in sorted(modules(root, args.folders), key=lambda s: -s.lines):
            if sized.lines > BIG_MODULE:
                print(f"  {sized.lines:5d} {sized.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
