"""Read-only mode's second lock: an ApiClient that cannot send anything but GET.

The first lock is `KubernetesCluster.apply_dgd`/`delete_dgd`, which refuse before building a
request. This one sits under every generated API method: `ReadOnlyApiClient` refuses any
method but GET (get, list and watch are all GETs) in `call_api`, and its REST client refuses
again right above urllib3, so a request that some future code path builds still never
leaves the process. Both raise the port's ReadOnlyViolation.

It is a view of a shared ApiClient: same configuration (auth, token refresh, CA), same
connection pool, but the shared client itself stays writable, for a managed agent's Lease
elector (a read-only agent runs none: agent/kubernetes.py). Closing the view does not close
the shared pool. Used by agent/cluster/kube/cluster.py.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from kubernetes.client import ApiClient

from agent.cluster.port import ReadOnlyViolation

READ_METHODS = frozenset({"GET"})


def refuse_unless_read(method: str, url: str) -> None:
    if str(method).upper() not in READ_METHODS:
        raise ReadOnlyViolation(f"{str(method).upper()} {urlsplit(str(url)).path}")


class ReadOnlyApiClient(ApiClient):
    def __init__(self, shared: ApiClient) -> None:
        super().__init__(configuration=shared.configuration)
        own = self.rest_client
        # A stand-in for RESTClientObject: same request() signature, delegating after the check.
        self.rest_client = _ReadOnlyRest(shared.rest_client)  # type: ignore[assignment]
        own.close()  # the pool the base class made for us, never used
        # The same dict, so headers set on the shared client (user agent) apply here too.
        self.default_headers = shared.default_headers
        self.cookie = shared.cookie
        self.shared = shared

    def call_api(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        refuse_unless_read(method, url)
        return super().call_api(method, url, *args, **kwargs)


class _ReadOnlyRest:
    """The shared REST client, refusing every method but GET before urllib3 sees it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        refuse_unless_read(method, url)
        return self._inner.request(method, url, *args, **kwargs)

    def close(self) -> None:
        """The shared client owns the pool."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
