"""Serving configs: validation, normalization and the serving digest. Pure.

Called by the service layer on every create and update, before anything is stored, so a
stored config is always valid and normalized (parallelism 0 -> 1, workers 0 -> 1). The digest
is "svg_" + the first 16 hex digits of SHA-256 over the canonical JSON of the normalized
config: same config, same digest, on every machine and every Python version.

The digest's input is not the whole config. The fields of the first schema (PINNED_FIELDS)
always enter it, exactly as they did then; any field added since enters only when it differs
from its default. So a release that adds a serving field (a new KV-cache knob) leaves every
stored config's digest where it was, and nothing rolls on upgrade; a workload that sets the new
field gets a new digest, as it should (docs/rollouts.md).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from typing import Any

from hub import errors
from hub.model import ENGINES, ROUTER_MODES, SERVING_MODES, KvCache, Serving

MAX_PARALLEL = 1024
MAX_ENGINE_ARGS = 256
MAX_ENGINE_ARG_LENGTH = 4096
MAX_WORKERS = 64
MAX_BLOCK_SIZE = 4096
_QUANTIZATION = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,31}\Z")
_KV_DTYPE = re.compile(r"^[a-z0-9][a-z0-9_]{0,15}\Z")
_VERSION = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?\Z")
_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/:@-]{0,254}\Z")
# Dynamo reads its runtime version off an image tag only when the tag is a strict Semantic
# Versioning 2.0.0 version (a leading v/V allowed): the operator's ParseImageVersion. The agent
# has the same rule (agent/cluster/dgd_versions.py); tests hold both to the same cases.
_NUM = r"(?:0|[1-9][0-9]*)"
_PRE_ID = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_BUILD_ID = r"[0-9A-Za-z-]+"
_SEMVER_TAG = re.compile(
    rf"^[vV]?{_NUM}\.{_NUM}\.{_NUM}"
    rf"(?:-{_PRE_ID}(?:\.{_PRE_ID})*)?(?:\+{_BUILD_ID}(?:\.{_BUILD_ID})*)?\Z"
)
# The CRD's pattern for runtimeVersionOverride.
_RUNTIME_VERSION = re.compile(r"^(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\Z")
# A model reference as vLLM, SGLang and TensorRT-LLM take it (`--model`, `--model-path`):
# - a Hugging Face repo id, `org/name` (or a legacy top-level `name`): each part letters,
#   digits, '-', '_', '.', starting and ending with a letter or digit, at most 96 characters,
#   no '--' or '..' (Hugging Face's own repo-name rules);
# - or an absolute path inside the serving container (weights on a mounted volume): '/'-
#   separated parts of letters, digits, '-', '_', '.', no part '.' or '..', no empty part.
# Nothing else: no whitespace or control character (CR/LF once reached the rendered DGD), no
# scheme, no relative path.
_HF_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_HF_REPO = re.compile(rf"^(?:{_HF_PART}/)?{_HF_PART}\Z")
_LOCAL_PATH = re.compile(r"^(?:/[A-Za-z0-9._-]+)+\Z")
MAX_MODEL_LENGTH = 512
MODEL_RULE = (
    "a Hugging Face repo id such as meta-llama/Llama-3.3-70B-Instruct (letters, digits, '-', '_',"
    " '.'; no '--' or '..'), or an absolute path in the serving container such as"
    " /models/llama-70b (no '.' or '..' part)"
)


def normalize(serving: Serving, *, field: str = "serving") -> Serving:
    """Validate and resolve defaults; raise InvalidArgument naming the first bad field."""
    _check_choice(serving.engine, ENGINES, f"{field}.engine")
    _check_pattern(
        serving.engine_version,
        _VERSION,
        f"{field}.engine_version",
        "e.g. 0.11.0; it becomes a Kubernetes label value: letters, digits, ._-, <= 63",
    )
    model(serving.model, f"{field}.model")
    mode = serving.mode or "aggregated"
    _check_choice(mode, SERVING_MODES, f"{field}.mode")
    _check_choice(serving.router_mode, ROUTER_MODES, f"{field}.router_mode", allow_empty=True)
    tp = _parallel(serving.tensor_parallel, f"{field}.tensor_parallel")
    pp = _parallel(serving.pipeline_parallel, f"{field}.pipeline_parallel")
    ep = _parallel(serving.expert_parallel, f"{field}.expert_parallel")
    if tp % ep:
        raise errors.InvalidArgument(
            f"{field}.expert_parallel",
            f"must divide tensor_parallel ({tp}); experts are spread over a worker's devices",
        )
    if serving.context_length < 0:
        raise errors.InvalidArgument(f"{field}.context_length", "must be >= 0 (0: model default)")
    if serving.quantization:
        _check_pattern(serving.quantization, _QUANTIZATION, f"{field}.quantization", "e.g. fp8")
    if serving.image:
        _check_pattern(serving.image, _IMAGE, f"{field}.image", "a container image reference")
    _check_runtime_version(serving, field)
    kv = _normalize_kv(serving.kv_cache, f"{field}.kv_cache")
    args = _normalize_args(serving.engine_args, f"{field}.engine_args")
    prefill, decode = 1, 1
    if mode == "disaggregated":
        prefill = _workers(serving.prefill_workers, f"{field}.disaggregation.prefill_workers")
        decode = _workers(serving.decode_workers, f"{field}.disaggregation.decode_workers")
    return dataclasses.replace(
        serving,
        mode=mode,
        tensor_parallel=tp,
        pipeline_parallel=pp,
        expert_parallel=ep,
        kv_cache=kv,
        engine_args=args,
        prefill_workers=prefill,
        decode_workers=decode,
    )


def model(value: str, field: str) -> str:
    """InvalidArgument unless `value` is a model reference the serving engines accept."""
    if not value:
        raise errors.InvalidArgument(field, f"required: {MODEL_RULE}")
    if len(value) > MAX_MODEL_LENGTH:
        raise errors.InvalidArgument(field, f"at most {MAX_MODEL_LENGTH} characters")
    if value.startswith("/"):
        parts = value.split("/")[1:]
        if _LOCAL_PATH.match(value) and not {".", ".."} & set(parts):
            return value
    elif _HF_REPO.match(value) and "--" not in value and ".." not in value:
        return value
    raise errors.InvalidArgument(field, f"invalid model reference {value!r}: {MODEL_RULE}")


# The serving fields (per dataclass) the digest has covered since its first schema. Never edit
# these sets: a field listed here enters every digest even at its default, and removing or
# adding one moves every stored digest, so the fleet would roll on upgrade. A new field needs
# no entry: at its default it stays out of the digest (tests/unit/hub/test_serving_digest.py).
PINNED_FIELDS: dict[type, frozenset[str]] = {
    Serving: frozenset(
        {
            "engine",
            "engine_version",
            "model",
            "tensor_parallel",
            "pipeline_parallel",
            "expert_parallel",
            "context_length",
            "quantization",
            "kv_cache",
            "engine_args",
            "mode",
            "prefill_workers",
            "decode_workers",
            "router_mode",
            "image",
        }
    ),
    KvCache: frozenset({"dtype", "gpu_memory_utilization", "block_size", "disable_prefix_caching"}),
}


@functools.lru_cache(maxsize=4096)
def digest(serving: Serving) -> str:
    """The serving digest of a normalized config (pinned fields, and others off their default)."""
    canonical = json.dumps(digest_document(serving), sort_keys=True, separators=(",", ":"))
    return "svg_" + hashlib.sha256(canonical.encode()).hexdigest()[:16]


def digest_document(value: Any) -> Any:
    """The digest's input: a dataclass as a dict of its pinned fields and of every other field
    not at its default (recursively); a tuple as a list; anything else as it is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        pinned = _pinned_for(type(value))
        document: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            current = getattr(value, f.name)
            if f.name in pinned or current != _default_of(f):
                document[f.name] = digest_document(current)
        return document
    if isinstance(value, tuple):
        return [digest_document(item) for item in value]
    return value


def _pinned_for(cls: type) -> frozenset[str]:
    # By class hierarchy, so a config type that extends Serving or KvCache keeps their pins.
    return next((PINNED_FIELDS[c] for c in cls.__mro__ if c in PINNED_FIELDS), frozenset())


def _default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING  # a required field has no default: it always enters


# A fleet shares a handful of configs while every deployment row carries one: the stored text
# and the parsed value are cached (a fleet-wide change touches 10,000 rows of the same config;
# dataclasses.asdict and json were a third of that update's cost). Values are frozen.
@functools.lru_cache(maxsize=4096)
def encode(serving: Serving) -> str:
    """The canonical JSON text of a config: its stored form (every field)."""
    return json.dumps(to_document(serving), sort_keys=True, separators=(",", ":"))


@functools.lru_cache(maxsize=4096)
def decode(text: str) -> Serving:
    """The config stored as `encode` wrote it."""
    return from_document(json.loads(text))


def to_document(serving: Serving) -> dict[str, Any]:
    """The config as a JSON-able dict (the stored form). A field added after the first schema
    is left out at its default, so a stored config's text stays what it was (from_document
    gives the default back)."""
    document = dataclasses.asdict(serving)
    document["engine_args"] = list(serving.engine_args)
    for f in dataclasses.fields(serving):
        if f.name not in PINNED_FIELDS[Serving] and getattr(serving, f.name) == _default_of(f):
            del document[f.name]
    return document


def from_document(document: dict[str, Any]) -> Serving:
    kv = KvCache(**document.pop("kv_cache", {}))
    args = tuple(document.pop("engine_args", ()))
    return Serving(kv_cache=kv, engine_args=args, **document)


def image_versioned(image: str) -> bool:
    """Whether Dynamo can read the runtime version off the image's tag."""
    last = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return ":" in last and bool(_SEMVER_TAG.match(last.rsplit(":", 1)[1]))


def _check_runtime_version(serving: Serving, field: str) -> None:
    """A workload's own image whose tag Dynamo cannot read must say its runtime version: the
    hub refuses it here rather than the cluster's webhook later (docs/rendering.md)."""
    if serving.runtime_version:
        _check_pattern(
            serving.runtime_version,
            _RUNTIME_VERSION,
            f"{field}.runtime_version",
            "MAJOR.MINOR.PATCH, e.g. 1.5.0 (Dynamo's runtimeVersionOverride form)",
        )
        return
    if serving.image and not image_versioned(serving.image):
        raise errors.InvalidArgument(
            f"{field}.runtime_version",
            f"required: the tag of image {serving.image!r} is not a semantic version Dynamo"
            " can read (e.g. 1.5.0 or v1.5.0-rc.1), so say which Dynamo runtime version the"
            " image holds, e.g. 1.5.0; or tag the image with its version",
        )


def _parallel(value: int, field: str) -> int:
    if value == 0:
        return 1
    if not 1 <= value <= MAX_PARALLEL:
        raise errors.InvalidArgument(field, f"must be between 1 and {MAX_PARALLEL} (0 means 1)")
    return value


def _workers(value: int, field: str) -> int:
    if value == 0:
        return 1
    if not 1 <= value <= MAX_WORKERS:
        raise errors.InvalidArgument(field, f"must be between 1 and {MAX_WORKERS} (0 means 1)")
    return value


def _normalize_kv(kv: KvCache, field: str) -> KvCache:
    if kv.dtype:
        _check_pattern(kv.dtype, _KV_DTYPE, f"{field}.dtype", "e.g. fp8 or auto")
    if not 0.0 <= kv.gpu_memory_utilization <= 1.0:
        raise errors.InvalidArgument(
            f"{field}.gpu_memory_utilization", "must be in (0, 1]; 0 means the engine default"
        )
    if kv.block_size < 0 or kv.block_size > MAX_BLOCK_SIZE:
        raise errors.InvalidArgument(
            f"{field}.block_size", f"must be between 0 and {MAX_BLOCK_SIZE} tokens"
        )
    return kv


def _normalize_args(args: tuple[str, ...], field: str) -> tuple[str, ...]:
    if len(args) > MAX_ENGINE_ARGS:
        raise errors.InvalidArgument(field, f"at most {MAX_ENGINE_ARGS} arguments")
    for index, arg in enumerate(args):
        if not arg or len(arg) > MAX_ENGINE_ARG_LENGTH or "\x00" in arg:
            raise errors.InvalidArgument(
                f"{field}[{index}]",
                f"each argument must be 1 to {MAX_ENGINE_ARG_LENGTH} characters, no NUL",
            )
    return tuple(args)


def _check_choice(
    value: str, choices: tuple[str, ...], field: str, *, allow_empty: bool = False
) -> None:
    if value in choices or (allow_empty and not value):
        return
    shown = ", ".join(c for c in choices if c)
    problem = "required" if not value else f"unknown value {value!r}"
    raise errors.InvalidArgument(field, f"{problem}; expected one of: {shown}")


def _check_pattern(value: str, pattern: re.Pattern[str], field: str, example: str) -> None:
    if not pattern.match(value):
        problem = "required" if not value else f"invalid value {value!r}"
        raise errors.InvalidArgument(field, f"{problem} ({example})")
