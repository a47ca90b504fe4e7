"""Reading a DynamoGraphDeployment's shape: its workers, their roles, engine flags and GPUs. Pure.

Shared by the reconciler (which enforces replicas and engine flags on adopted DGDs), the
observer and discovery (which describe DGDs). DGD specs are plain dicts as Kubernetes
serializes them (shared/reference/dynamo-dgd.md).

Engine flags. A container's argv is its `command` followed by its `args` (Kubernetes appends
args to command; without a command, to the image's entrypoint). Manifests start the same
engine in three spellings:
- exec form: command [python3, -m, dynamo.vllm], args [--model, X, ...];
- shell form: command [/bin/sh, -c], args ["python3 -m dynamo.vllm --model X ..."], one string;
- wrapper form: command [sh, -c, 'setup && exec "$@"', sh], args [python3, -m, dynamo.trtllm,
  ...] (the renderer's TRT-LLM wrapper, agent/render/trtllm.py).
`engine_argv` unwraps a `sh|bash -c` script (shlex) to the engine's own argv; `engine_flags`
drops its launcher (`python3 -m dynamo.vllm`, or the executable) and keeps the flags. Those
flags are what imported_args, live_args and an adopted deployment's engine_args hold, and
`with_engine_flags` puts other flags in their place, keeping the launcher and any wrapper.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.cluster import port

# componentType values of worker services (newer Dynamo also spells the role there).
WORKER_TYPES = frozenset({"worker", "prefill", "decode"})
SHELLS = frozenset({"sh", "bash", "dash", "ash", "ksh", "zsh"})
_SEPARATORS = frozenset({";", ";;", "&", "&&", "|", "||", "\n"})
_PUNCTUATION = ";&|()<>\n"
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_ALL_POSITIONALS = ("$@", "$*")
_FD_REDIRECT = re.compile(r"(?<=\s)\d+(?=[<>])")


class Unrewritable(ValueError):
    """The engine runs from a shell script whose flags cannot be replaced safely."""


def role_of(name: str, service: Mapping[str, Any]) -> str:
    """worker | prefill | decode: subComponentType (or componentType) when it says, else the
    service name."""
    for key in ("subComponentType", "componentType"):
        value = service.get(key, "")
        if value in ("prefill", "decode"):
            return str(value)
    lowered = name.lower()
    return "prefill" if "prefill" in lowered else "decode" if "decode" in lowered else "worker"


def is_worker(service: Mapping[str, Any]) -> bool:
    return service.get("componentType") in WORKER_TYPES


def workers(services: Mapping[str, Any]) -> list[str]:
    return [n for n, s in services.items() if is_worker(s)]


def main_worker(services: Mapping[str, Any]) -> str | None:
    """The worker whose args describe the engine: the decode worker, or the only worker."""
    names = workers(services)
    for name in names:
        if role_of(name, services[name]) == "decode":
            return name
    return names[0] if names else None


def main_container(service: Mapping[str, Any]) -> Mapping[str, Any]:
    container: Mapping[str, Any] = service.get("extraPodSpec", {}).get("mainContainer", {})
    return container


def worker_args(service: Mapping[str, Any]) -> list[str]:
    """The engine flags the service's spec declares (command + args, unwrapped)."""
    return engine_flags(engine_argv(container_argv(main_container(service))))


def live_flags(name: str, service: Mapping[str, Any], pods: Sequence[port.Pod]) -> list[str]:
    """The engine flags a service runs: the argv of its oldest running pod (what the engine
    really runs; during a rollout, what still runs from before it), else its spec's."""
    running = sorted(
        (p for p in pods if p.argv and p.node_name and _belongs(p, name, service)),
        key=lambda p: (p.created_unix, p.name),
    )
    if running:
        return engine_flags(engine_argv(list(running[0].argv)))
    return worker_args(service)


def _belongs(pod: port.Pod, name: str, service: Mapping[str, Any]) -> bool:
    component = pod.labels.get(port.DYNAMO_COMPONENT)
    if component is not None:
        return component == name
    # Older Grove pods lack the component label: match the role instead.
    sub = pod.labels.get(port.DYNAMO_SUB_COMPONENT_TYPE, "")
    return sub in ("", role_of(name, service)) or role_of(name, service) == "worker"


def container_argv(container: Mapping[str, Any]) -> list[str]:
    return [*_words(container.get("command")), *_words(container.get("args"))]


def engine_argv(argv: Sequence[str]) -> list[str]:
    """The engine's own argv: `argv` itself, or the engine command of a `sh -c` script with
    "$@" expanded. A script shlex cannot read is returned as it is."""
    index = _script_index(argv)
    if index is None:
        return list(argv)
    script = _Script.parse(argv[index])
    if script is None:
        return list(argv)
    return _expand(script.engine, argv[index + 1 :])


def engine_flags(argv: Sequence[str]) -> list[str]:
    """The flags of an engine argv: what follows its launcher."""
    return list(argv[_launcher_end(argv) :])


def with_engine_flags(container: Mapping[str, Any], flags: Sequence[str]) -> dict[str, Any]:
    """The container with its engine's flags replaced by `flags`; the launcher, any shell
    wrapper and every other field kept. Raises Unrewritable for a script it cannot edit."""
    argv = container_argv(container)
    index = _script_index(argv)
    if index is None:
        new_argv = [*argv[: _launcher_end(argv)], *flags]
    else:
        new_argv = _rewrite_script(argv, index, flags)
    return _split_like(container, new_argv)


def gpus_of(service: Mapping[str, Any]) -> int:
    resources = service.get("resources", {})
    for kind in ("limits", "requests"):
        value = resources.get(kind, {}).get("gpu")
        if value is not None:
            try:
                return int(str(value))
            except ValueError:
                return 0
    return 0


# -- argv internals ---------------------------------------------------------------------------


def _words(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def _script_index(argv: Sequence[str]) -> int | None:
    """Where the script is when argv runs a shell with -c (`sh -c`, `bash -lc`, `sh -e -c`)."""
    if not argv or os.path.basename(argv[0]) not in SHELLS:
        return None
    index = 1
    while index < len(argv) and argv[index][:1] in ("-", "+") and argv[index] not in ("-", "--"):
        option = argv[index]
        index += 1
        if option in ("-o", "+o"):
            index += 1  # its argument: `-o pipefail`
        elif option.startswith("-") and not option.startswith("--") and "c" in option[1:]:
            return index if index < len(argv) else None
    return None


def _launcher_end(argv: Sequence[str]) -> int:
    """How many words launch the engine: `exec`, `env` and VAR=value prefixes, then the program
    (for Python, with its options up to `-m module`, or the script). Flags come after."""
    index = 0
    while index < len(argv) and (argv[index] in ("exec", "env") or _ASSIGNMENT.match(argv[index])):
        index += 1
    if index >= len(argv) or argv[index].startswith("-"):
        return index  # no program: the image's entrypoint runs the engine
    program = os.path.basename(argv[index])
    index += 1
    if not program.startswith("python"):
        return index
    while index < len(argv) and argv[index].startswith("-"):
        option = argv[index]
        index += 1
        if option == "-m":
            return min(index + 1, len(argv))
        if option in ("-X", "-W"):
            index += 1
    return min(index + 1, len(argv))


@dataclass(frozen=True)
class _Script:
    """A `sh -c` script as words: the engine command's words, and whether the whole script is
    that one command with nothing a re-quoting could change (no expansion, redirection, ...)."""

    engine: tuple[str, ...]
    simple: bool

    @classmethod
    def parse(cls, script: str) -> _Script | None:
        # shlex forgets what touched what: drop the file descriptor of `2>&1` first.
        lexer = shlex.shlex(
            _FD_REDIRECT.sub(" ", script), posix=True, punctuation_chars=_PUNCTUATION
        )
        lexer.whitespace = " \t\r"
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:
            return None  # unbalanced quotes: not something to take apart
        segments: list[list[str]] = [[]]
        plain, redirect = True, False
        for token in tokens:
            if token in _SEPARATORS:
                segments.append([])
            elif set(token) <= set(_PUNCTUATION):
                plain = False
                redirect = bool(set(token) & set("<>"))
            elif redirect:
                redirect = False  # the redirection's target is no word of the command
            else:
                segments[-1].append(token)
        commands = [s for s in segments if s]
        if not commands:
            return None
        # The engine's command: the last one that runs Dynamo or "$@", else the last one.
        engine = next(
            (
                c
                for c in reversed(commands)
                if any(w.startswith("dynamo.") or w in _ALL_POSITIONALS for w in c)
            ),
            commands[-1],
        )
        simple = len(commands) == 1 and plain and not set(script) & set("$`\\*?[~")
        return cls(tuple(engine), simple)


def _expand(words: Sequence[str], positionals: Sequence[str]) -> list[str]:
    """A script's words with "$@" replaced by the positional parameters ($1...)."""
    result: list[str] = []
    for word in words:
        result.extend(positionals[1:] if word in _ALL_POSITIONALS else [word])
    return result


def _rewrite_script(argv: Sequence[str], index: int, flags: Sequence[str]) -> list[str]:
    script, positionals = argv[index], list(argv[index + 1 :])
    parsed = _Script.parse(script)
    if parsed is None:
        raise Unrewritable("its shell script cannot be parsed")
    words = list(parsed.engine)
    at = next((i for i, w in enumerate(words) if w in _ALL_POSITIONALS), None)
    if at is not None and at == len(words) - 1:
        # The engine takes its words from the positional parameters: replace those.
        engine = [*words[:at], *positionals[1:]]
        end = _launcher_end(engine)
        if end < at:
            raise Unrewritable("its shell script itself passes flags to the engine")
        zeroth = positionals[:1] or ["sh"]
        return [*argv[: index + 1], *zeroth, *engine[at:end], *flags]
    if at is None and parsed.simple:
        # One plain command: write it again with the new flags.
        new_script = shlex.join([*words[: _launcher_end(words)], *flags])
        return [*argv[:index], new_script, *positionals]
    raise Unrewritable("its shell script does more than run the engine")


def _split_like(container: Mapping[str, Any], argv: Sequence[str]) -> dict[str, Any]:
    """Put argv back as command + args, keeping the container's command where it still
    starts argv (then only args change, the smallest edit)."""
    result = dict(container)
    command = _words(container.get("command"))
    if list(argv[: len(command)]) == command:
        rest = list(argv[len(command) :])
        if rest or "args" in container:
            result["args"] = rest
    else:
        result["command"] = list(argv)
        result.pop("args", None)
    return result
