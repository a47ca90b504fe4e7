"""A small REST client for the hub's control API (stdlib urllib only).

`HubClient(base_url, token)` sends the admin token on every call and returns parsed JSON
objects; any error answer becomes `ApiError(status, code, message)` read from the hub's
`{"error": {"code", "status", "message"}}` body (docs/rest.md), and no answer at all becomes
`HubUnreachable`. It knows paths and JSON, never resource semantics: `cli.commands` does.

Behind a load balancer, a hub may stop or restart under a call: idempotent calls (GET; PATCH,
which sets fields to given values) are retried on no answer or on 503 UNAVAILABLE, a few times
over about ten seconds; POST and DELETE only when the connection was refused (it reached no
hub, so nothing was applied; a repeated create or delete would answer ALREADY_EXISTS or
NOT_FOUND for what the first did).

Proxies from the environment are honoured, except for loopback hubs: a proxy cannot reach our
127.0.0.1, and a stray $http_proxy must not break the laptop quick start.
"""

from __future__ import annotations

import json
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from cli.errors import ApiError, CliError, HubUnreachable

JsonObject = dict[str, Any]

DEFAULT_TIMEOUT_S = 30.0
# The hub caps page_size at 1000; big pages keep round trips few on large fleets.
DEFAULT_PAGE_SIZE = 500
# The longest error body (non-JSON, e.g. from a proxy) quoted back to the user.
_MAX_QUOTED = 300
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}

__all__ = ["ApiError", "HubClient", "HubUnreachable", "JsonObject", "error_from_body"]


# Methods whose repetition changes nothing more than one call did.
IDEMPOTENT = frozenset({"GET", "PATCH", "PUT"})
# The longest pause before each retry (seconds): about ten seconds in all, what a hub's restart
# behind a balancer takes to be noticed and routed around.
RETRY_PAUSES_S = (0.2, 0.5, 1.0, 2.0, 3.0, 4.0)


def jittered(longest: float) -> float:
    """A pause in [longest/2, longest]: the agent's backoff rule (agent/backoff.py), which the
    CLI may not import. Half certain, so a restarting hub is not asked again at once; half
    random, so the clients it failed together do not come back in step."""
    return random.uniform(longest / 2, longest)


class HubClient:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry_pauses_s: tuple[float, ...] = RETRY_PAUSES_S,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._timeout_s = timeout_s
        self._retry_pauses_s = retry_pauses_s
        # Calls that needed a retry (a hub went away under them), for tests and tools.
        self.retried = 0
        host = urllib.parse.urlsplit(self.base_url).hostname or ""
        handlers = [urllib.request.ProxyHandler({})] if host in _LOOPBACK else []
        self._opener = urllib.request.build_opener(*handlers)

    def get(self, path: str, params: Mapping[str, str] | None = None) -> JsonObject:
        return self._request("GET", path, params=params)

    def post(
        self, path: str, body: JsonObject, params: Mapping[str, str] | None = None
    ) -> JsonObject:
        return self._request("POST", path, body=body, params=params)

    def patch(
        self, path: str, body: JsonObject, params: Mapping[str, str] | None = None
    ) -> JsonObject:
        return self._request("PATCH", path, body=body, params=params)

    def delete(self, path: str, params: Mapping[str, str] | None = None) -> JsonObject:
        return self._request("DELETE", path, params=params)

    def list_all(
        self,
        path: str,
        key: str,
        params: Mapping[str, str] | None = None,
        *,
        page_size: int | None = None,
    ) -> list[JsonObject]:
        """Every item of a List call: follows next_page_token until it is empty."""
        items: list[JsonObject] = []
        # DEFAULT_PAGE_SIZE read here, not bound at definition: tests shrink it to see paging.
        query = {**(params or {}), "page_size": str(page_size or DEFAULT_PAGE_SIZE)}
        while True:
            page = self.get(path, query)
            items.extend(page.get(key) or [])
            token = page.get("next_page_token") or ""
            if not token:
                return items
            query["page_token"] = token

    def events(
        self, path: str, params: Mapping[str, str] | None = None, *, read_timeout_s: float
    ) -> Iterator[JsonObject]:
        """A streaming GET (Server-Sent Events, docs/rest.md "Watch"): each event's data. An
        `error` event, or an error answer, raises ApiError; a stream that goes quiet for
        `read_timeout_s` (the hub sends bookmarks as heartbeats) raises HubUnreachable, as a
        lost connection does. Never retried here: the caller resumes from a revision."""
        url = self.base_url + path
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        headers = {"accept": "text/event-stream"}
        if self._token:
            headers["authorization"] = f"Bearer {self._token}"
        request = urllib.request.Request(url, headers=headers, method="GET")
        try:
            with self._opener.open(request, timeout=read_timeout_s) as response:
                yield from _sse_events(response)
        except urllib.error.HTTPError as e:
            with e:
                raise error_from_body(e.code, e.read(), reason=str(e.reason)) from e
        except urllib.error.URLError as e:
            raise HubUnreachable(self.base_url, _describe(e.reason)) from e
        except TimeoutError as e:
            raise HubUnreachable(
                self.base_url, f"the stream was quiet for {read_timeout_s:g}s"
            ) from e
        except OSError as e:
            raise HubUnreachable(self.base_url, _describe(e)) from e

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: JsonObject | None = None,
    ) -> JsonObject:
        url = self.base_url + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        headers = {"accept": "application/json"}
        if self._token:  # none for `explain`: the API document is served to anyone
            headers["authorization"] = f"Bearer {self._token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        for pause in (*self._retry_pauses_s, None):
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                status, raw = self._send(request)
                return _parse_success(status, raw)
            except (HubUnreachable, ApiError) as e:
                if pause is None or not _retryable(method, e):
                    raise
                self.retried += 1
                time.sleep(jittered(pause))
        raise AssertionError("unreachable")  # the last pause is None: the loop raised

    def _send(self, request: urllib.request.Request) -> tuple[int, bytes]:
        try:
            with self._opener.open(request, timeout=self._timeout_s) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as e:
            with e:
                raise error_from_body(e.code, e.read(), reason=str(e.reason)) from e
        except urllib.error.URLError as e:
            raise HubUnreachable(self.base_url, _describe(e.reason)) from e
        except TimeoutError as e:
            raise HubUnreachable(self.base_url, f"no answer within {self._timeout_s:g}s") from e
        except OSError as e:
            # Resets and early disconnects surface here, after the connection was made.
            raise HubUnreachable(self.base_url, _describe(e)) from e


def _sse_events(lines: Iterable[bytes]) -> Iterator[JsonObject]:
    event, data = "", []
    for raw in lines:
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if line.startswith(":"):
            continue  # a comment
        if line:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
            continue
        if data:
            text = "\n".join(data)
            if event == "error":
                raise error_from_body(_status_of(text), text.encode())
            try:
                parsed = json.loads(text)
            except ValueError as e:
                raise ApiError(200, "INVALID_RESPONSE", f"an event is not JSON: {e}") from e
            if isinstance(parsed, dict):
                yield parsed
        event, data = "", []


def _status_of(text: str) -> int:
    """The HTTP status an `error` event's body names (its stream began with 200)."""
    try:
        return int(json.loads(text)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return 0


def _retryable(method: str, error: CliError) -> bool:
    """Whether `error` says the call may succeed on another try, without doing twice what a
    first try did."""
    if isinstance(error, ApiError):
        return method in IDEMPOTENT and (error.status == 503 or error.code == "UNAVAILABLE")
    if isinstance(error, HubUnreachable):
        return method in IDEMPOTENT or error.reason == "connection refused"
    return False


def error_from_body(status: int, raw: bytes, *, reason: str = "") -> ApiError:
    """The ApiError for an HTTP error answer: the hub's JSON error, or whatever came back."""
    try:
        error = json.loads(raw)["error"]
        return ApiError(status, str(error["status"]), str(error["message"]))
    except (ValueError, KeyError, TypeError):
        # Not the hub's shape: a proxy, aiohttp's own 413, a wrong --hub-url.
        text = raw.decode("utf-8", errors="replace").strip()[:_MAX_QUOTED]
        return ApiError(status, reason.upper().replace(" ", "_") or "HTTP_ERROR", text or reason)


def _parse_success(status: int, raw: bytes) -> JsonObject:
    try:
        parsed = json.loads(raw) if raw else {}
    except ValueError as e:
        raise ApiError(status, "INVALID_RESPONSE", f"the answer is not JSON: {e}") from e
    if not isinstance(parsed, dict):
        raise ApiError(status, "INVALID_RESPONSE", "the answer is not a JSON object")
    return parsed


def _describe(reason: object) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, TimeoutError):
        return "timed out"
    if isinstance(reason, socket.gaierror):
        return f"cannot resolve the host name: {reason.strerror}"
    return str(reason)
