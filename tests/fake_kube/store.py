"""The emulator's objects: one resourceVersion counter, an event history, field ownership.

Every change bumps the cluster-wide resourceVersion and appends an event (with the object
before and after, so a watch with a label selector can turn "stopped matching" into DELETED,
as the API server does). `compact()` forgets history: a watch from an older version gets
410 Gone. All methods take the condition's lock; watches wait on it for new events.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tests.fake_kube import ssa

ObjectKey = tuple[str, str, str]  # (plural, namespace, name)


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return self.version if not self.group else f"{self.group}/{self.version}"


PODS = Kind("", "v1", "pods", "Pod", namespaced=True)
NODES = Kind("", "v1", "nodes", "Node", namespaced=False)
DGDS = Kind("nvidia.com", "v1alpha1", "dynamographdeployments", "DynamoGraphDeployment", True)
DGDS_V1BETA1 = Kind(
    "nvidia.com", "v1beta1", "dynamographdeployments", "DynamoGraphDeployment", True
)
DGDSAS = Kind(
    "nvidia.com",
    "v1alpha1",
    "dynamographdeploymentscalingadapters",
    "DynamoGraphDeploymentScalingAdapter",
    True,
)
DGDSAS_V1BETA1 = Kind(
    "nvidia.com",
    "v1beta1",
    "dynamographdeploymentscalingadapters",
    "DynamoGraphDeploymentScalingAdapter",
    True,
)
LEASES = Kind("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
KINDS = {
    (k.group, k.version, k.plural): k
    for k in (PODS, NODES, DGDS, DGDS_V1BETA1, DGDSAS, DGDSAS_V1BETA1, LEASES)
}
# Admission of a write before it is stored: (live or None, the object as it would be stored);
# raises to refuse it, returns the object to store instead (a mutating webhook, schema
# defaults: fields nobody owns) or None to store it as it is.
Validator = Callable[[dict[str, Any] | None, dict[str, Any]], dict[str, Any] | None]


class AlreadyExists(Exception):
    pass


class VersionConflict(Exception):
    """An update carried a resourceVersion other than the object's: someone wrote first."""


@dataclass(frozen=True)
class Event:
    rv: int
    kind: Kind
    type: str  # ADDED | MODIFIED | DELETED
    old: dict[str, Any] | None
    new: dict[str, Any]


class Store:
    def __init__(self) -> None:
        self.cond = threading.Condition(threading.RLock())  # edit() calls update()
        self.rv = 1
        self.floor = 0  # watches from a version below this are answered 410 Gone
        self._objects: dict[ObjectKey, dict[str, Any]] = {}
        self._owners: dict[ObjectKey, dict[str, ssa.Manager]] = {}
        self._history: list[Event] = []
        self._recording = True
        # kind plural -> the storage version's schema, where a real CRD's rules are served:
        # server-side apply merges its lists by their declared list types (ssa.py).
        self.schemas: dict[str, Mapping[str, Any]] = {}

    # -- reads ------------------------------------------------------------------------------

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        with self.cond:
            obj = self._objects.get((kind.plural, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def list(
        self, kind: Kind, namespace: str, match: Callable[[Mapping[str, str]], bool]
    ) -> tuple[list[dict[str, Any]], int]:
        with self.cond:
            items = [
                copy.deepcopy(obj)
                for (plural, ns, _), obj in sorted(self._objects.items())
                if plural == kind.plural
                and (not namespace or ns == namespace)
                and match(_labels(obj))
            ]
            return items, self.rv

    def events_after(
        self, rv: int, kind: Kind, namespace: str, match: Callable[[Mapping[str, str]], bool]
    ) -> tuple[list[tuple[str, dict[str, Any]]], int]:
        """Events of `kind` after `rv` as a watch with these filters sees them; the new rv."""
        with self.cond:
            out = []
            for event in self._history:
                if event.rv <= rv or event.kind != kind:
                    continue
                if namespace and event.new["metadata"].get("namespace") != namespace:
                    continue
                seen = _as_seen(event, match)
                if seen is not None:
                    out.append(seen)
            return out, self.rv

    # -- writes -----------------------------------------------------------------------------

    def apply(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: Mapping[str, Any],
        *,
        manager: str,
        force: bool,
        validate: Validator | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Server-side apply; (object, created). Raises ssa.Conflict, VersionConflict when
        the applied configuration names a resourceVersion the object is not at (the API
        server treats it as a precondition, as for an update), or what `validate` raises
        (nothing is stored then)."""
        key = (kind.plural, namespace, name)
        applied = {k: v for k, v in body.items() if k != "status"}  # status is a subresource
        schema = self.schemas.get(kind.plural)
        with self.cond:
            live = self._objects.get(key)
            sent = (applied.get("metadata") or {}).get("resourceVersion")
            if sent and (live is None or sent != live["metadata"]["resourceVersion"]):
                raise VersionConflict(name)
            owners = copy.deepcopy(self._owners.get(key, {}))
            merged = ssa.apply(
                _bare(live), applied, owners, manager=manager, force=force, schema=schema
            )
            if validate is not None:
                merged = validate(copy.deepcopy(live) if live else None, merged) or merged
            return self._store(kind, key, live, merged, owners), live is None

    def update(
        self,
        kind: Kind,
        obj: Mapping[str, Any],
        *,
        manager: str,
        validate: Validator | None = None,
        subresource: str = "",
    ) -> dict[str, Any]:
        """Create or replace `obj` as another actor would (kubectl edit, a controller, the
        kubelet writing status): `manager` owns what it changed (through `subresource`,
        "scale" for the /scale subresource, as managedFields records it)."""
        meta = obj.get("metadata", {})
        key = (kind.plural, meta.get("namespace", "") if kind.namespaced else "", meta["name"])
        schema = self.schemas.get(kind.plural)
        with self.cond:
            live = self._objects.get(key)
            owners = copy.deepcopy(self._owners.get(key, {}))
            new = ssa.update(
                _bare(live),
                _bare(dict(obj)),
                owners,
                manager=manager,
                subresource=subresource,
                schema=schema,
            )
            if validate is not None:
                new = validate(copy.deepcopy(live) if live else None, new) or new
            created = meta.get("creationTimestamp")
            return self._store(kind, key, live, new, owners, created=created)

    def edit(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        change: Callable[[dict[str, Any]], None],
        *,
        manager: str,
    ) -> dict[str, Any]:
        """Read, change in place, write back as `manager` (KeyError if there is no object)."""
        with self.cond:
            live = self._objects.get((kind.plural, namespace, name))
            if live is None:
                raise KeyError(f"no {kind.plural} {namespace}/{name}")
            obj = copy.deepcopy(live)
            change(obj)
            return self.update(kind, obj, manager=manager)

    def create(
        self,
        kind: Kind,
        namespace: str,
        obj: Mapping[str, Any],
        *,
        manager: str,
        validate: Validator | None = None,
    ) -> dict[str, Any]:
        """POST: a new object; AlreadyExists if one has its name."""
        name = obj.get("metadata", {}).get("name", "")
        with self.cond:
            if (kind.plural, namespace, name) in self._objects:
                raise AlreadyExists(name)
            body = copy.deepcopy(dict(obj))
            body.setdefault("metadata", {})["namespace"] = namespace
            return self.update(kind, body, manager=manager, validate=validate)

    def replace(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        obj: Mapping[str, Any],
        *,
        manager: str,
        validate: Validator | None = None,
    ) -> dict[str, Any]:
        """PUT: optimistic concurrency on metadata.resourceVersion, as the API server does."""
        with self.cond:
            live = self._objects.get((kind.plural, namespace, name))
            if live is None:
                raise KeyError(name)
            sent = obj.get("metadata", {}).get("resourceVersion")
            if sent and sent != live["metadata"]["resourceVersion"]:
                raise VersionConflict(name)
            body = copy.deepcopy(dict(obj))
            body.setdefault("metadata", {})["namespace"] = namespace
            return self.update(kind, body, manager=manager, validate=validate)

    def delete(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        key = (kind.plural, namespace, name)
        with self.cond:
            live = self._objects.pop(key, None)
            if live is None:
                return None
            self._owners.pop(key, None)
            self.rv += 1
            gone = copy.deepcopy(live)
            gone["metadata"]["resourceVersion"] = str(self.rv)
            self._record(Event(self.rv, kind, "DELETED", live, gone))
            return copy.deepcopy(gone)

    def migrate(self, old: Kind, new: Kind, obj: Mapping[str, Any]) -> None:
        """Rewrite a stored object as another kind (a CRD's new storage version), its field
        owners kept. History is not rewritten: compact after migrating."""
        meta = obj["metadata"]
        key = (old.plural, meta.get("namespace", ""), meta["name"])
        with self.cond:
            stored = copy.deepcopy(dict(obj))
            stored["apiVersion"] = new.api_version
            self._objects[key] = stored

    def compact(self) -> int:
        """Forget all history up to now; returns the floor (the oldest watchable version)."""
        with self.cond:
            self.floor = self.rv
            self._history.clear()
            return self.floor

    # -- internals --------------------------------------------------------------------------

    def _store(
        self,
        kind: Kind,
        key: ObjectKey,
        live: dict[str, Any] | None,
        content: dict[str, Any],
        owners: dict[str, ssa.Manager],
        *,
        created: str | None = None,
    ) -> dict[str, Any]:
        if (
            live is not None
            and _bare(live) == _bare(content)
            and owners == self._owners.get(key, {})
        ):
            return copy.deepcopy(live)  # a no-op write changes nothing, not even the version
        self.rv += 1
        obj = _with_server_fields(kind, key, live, content, owners, rv=self.rv, created=created)
        self._objects[key] = obj
        self._owners[key] = owners
        self._record(Event(self.rv, kind, "ADDED" if live is None else "MODIFIED", live, obj))
        return copy.deepcopy(obj)

    @contextlib.contextmanager
    def unrecorded(self) -> Iterator[None]:
        """Changes made inside leave no history, as if compacted away before any watch saw
        them: only a fresh list shows them. Holds the lock throughout."""
        with self.cond:
            self._recording = False
            try:
                yield
            finally:
                self._recording = True
                self.floor = self.rv

    def _record(self, event: Event) -> None:
        if self._recording:
            self._history.append(event)
        self.cond.notify_all()


def _with_server_fields(
    kind: Kind,
    key: ObjectKey,
    live: dict[str, Any] | None,
    content: dict[str, Any],
    owners: Mapping[str, ssa.Manager],
    *,
    rv: int,
    created: str | None,
) -> dict[str, Any]:
    obj = copy.deepcopy(content)
    obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
    meta = obj.setdefault("metadata", {})
    old_meta = (live or {}).get("metadata", {})
    meta["name"] = key[2]
    if kind.namespaced:
        meta["namespace"] = key[1]
    meta["uid"] = old_meta.get("uid") or str(uuid.uuid4())
    meta["creationTimestamp"] = (
        old_meta.get("creationTimestamp")
        or created
        or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    )
    generation = int(old_meta.get("generation", 0))
    if live is None or (live.get("spec") != obj.get("spec")):
        generation += 1
    meta["generation"] = generation
    meta["resourceVersion"] = str(rv)
    meta["managedFields"] = ssa.managed_fields(owners, api_version=kind.api_version)
    return obj


def _bare(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    """The object without the fields the server sets."""
    if obj is None:
        return None
    out = copy.deepcopy(obj)
    out.pop("apiVersion", None)
    out.pop("kind", None)
    meta = out.get("metadata", {})
    for server_field in (
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
    ):
        meta.pop(server_field, None)
    return out


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels = obj.get("metadata", {}).get("labels") or {}
    return labels if isinstance(labels, Mapping) else {}


def _as_seen(
    event: Event, match: Callable[[Mapping[str, str]], bool]
) -> tuple[str, dict[str, Any]] | None:
    was = event.old is not None and match(_labels(event.old))
    if event.type == "DELETED":
        return ("DELETED", copy.deepcopy(event.new)) if was else None
    now = match(_labels(event.new))
    if now:
        return ("MODIFIED" if was else "ADDED", copy.deepcopy(event.new))
    return ("DELETED", copy.deepcopy(event.new)) if was else None
