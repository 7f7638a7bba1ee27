# SPDX-License-Identifier: GPL-3.0-or-later
"""optuna-dashboard behind a guard: read-only, for this machine's names only, token optional.

optuna-dashboard has no authentication: anyone who reaches it can create, rename and delete
studies, write notes and tell a RUNNING trial COMPLETE with any value, which then counts as
the study's best. It also answers any Host header, so a web page whose name an
attacker points at 127.0.0.1 (DNS rebinding) can read and write it from the user's browser,
ssh tunnel or not. The guard, a WSGI layer in front of it, refuses:

- a Host header that names neither the bound address nor this machine (``localhost``,
  ``127.0.0.1``, ``::1``) nor one of ``allowed_hosts``;
- without the token (when one is set) every request: the token comes as ``Authorization:
  Bearer TOKEN``, or as ``?token=TOKEN``, which on opening a page sets a cookie for the page's
  own requests and redirects to the address without it;
- unless ``allow_writes``, every request but GET and HEAD (the dashboard writes with POST, PUT
  and DELETE); with writes allowed, a write whose Origin is another site.
"""

from __future__ import annotations

import hmac
import re
import socket
from collections.abc import Callable, Iterable
from http.cookies import SimpleCookie
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, unquote_plus, urlencode, urlsplit
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from optuna.storages import BaseStorage

TOKEN_ENV = "HYPERSCAN_DASHBOARD_TOKEN"
COOKIE = "hyperscan_dashboard_token"
LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
READS = frozenset({"GET", "HEAD"})
# A query parameter as a request line shows it: its name (maybe %-escaped) and value.
_PARAMETER = re.compile(r"([?&])([^=&\s\"']*)=([^&\s\"'#]*)")

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def host_name(header: str) -> str:
    """The name in a Host (or Origin netloc) header, without port and IPv6 brackets."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class DashboardGuard:
    """The WSGI layer in front of optuna-dashboard (see the module's docstring)."""

    def __init__(
        self,
        app: WSGIApp,
        *,
        bind: str,
        allowed_hosts: Iterable[str] = (),
        allow_writes: bool = False,
        token: str | None = None,
    ) -> None:
        self.app = app
        self.hosts = LOCAL_NAMES | {host_name(bind)} | {host_name(h) for h in allowed_hosts}
        self.allow_writes = allow_writes
        self.token = token or None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]):
        host = environ.get("HTTP_HOST", "")
        if host_name(host) not in self.hosts:
            return _refuse(
                start_response,
                "403 Forbidden",
                f"Host {host!r} is not a name of this dashboard: serve it under that name with "
                f"`hyperscan dashboard --allowed-host {host_name(host) or 'NAME'}`",
            )
        if self.token is not None:
            query = dict(parse_qsl(environ.get("QUERY_STRING", "")))
            by_query = self._matches(query.get("token"))
            if by_query and _page_view(environ):
                return self._set_cookie(environ, query, start_response)
            if not (by_query or self._matches(_bearer(environ)) or self._matches(_cookie(environ))):
                return _refuse(
                    start_response,
                    "401 Unauthorized",
                    "this dashboard needs its token: open it as http://HOST:PORT/?token=TOKEN, "
                    "or send 'Authorization: Bearer TOKEN'",
                )
        method = environ.get("REQUEST_METHOD", "GET").upper()
        if method not in READS:
            if not self.allow_writes:
                return _refuse(
                    start_response,
                    "403 Forbidden",
                    "this dashboard is read-only: start it with `hyperscan dashboard "
                    "--allow-writes` to create, rename or delete studies, or tell trials",
                )
            origin = environ.get("HTTP_ORIGIN")
            if origin and host_name(urlsplit(origin).netloc) not in self.hosts:
                return _refuse(
                    start_response, "403 Forbidden", f"a write from another site ({origin})"
                )
        return self.app(environ, start_response)

    def _matches(self, offered: str | None) -> bool:
        return offered is not None and hmac.compare_digest(offered.encode(), self.token.encode())

    def _set_cookie(
        self, environ: dict[str, Any], query: dict[str, str], start_response: Callable[..., Any]
    ) -> list[bytes]:
        """Remember the token in a cookie, and drop it from the address bar and history."""
        rest = urlencode({k: v for k, v in query.items() if k != "token"})
        location = quote(environ.get("PATH_INFO", "/")) + (f"?{rest}" if rest else "")
        cookie = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
        start_response(
            "303 See Other",
            [("Location", location), ("Set-Cookie", cookie), ("Content-Length", "0")],
        )
        return [b""]


def _page_view(environ: dict[str, Any]) -> bool:
    """A browser opening a page (redirected to drop the token), not a script calling the API."""
    path = environ.get("PATH_INFO", "/")
    return environ.get("REQUEST_METHOD", "GET").upper() == "GET" and not path.startswith("/api/")


def _bearer(environ: dict[str, Any]) -> str | None:
    scheme, _, value = environ.get("HTTP_AUTHORIZATION", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


def _cookie(environ: dict[str, Any]) -> str | None:
    morsel = SimpleCookie(environ.get("HTTP_COOKIE", "")).get(COOKIE)
    return morsel.value if morsel is not None else None


def _refuse(start_response: Callable[..., Any], status: str, message: str) -> list[bytes]:
    body = f"hyperscan dashboard: {message}\n".encode()
    start_response(
        status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
    )
    return [body]


def dashboard_app(
    storage: BaseStorage,
    *,
    bind: str,
    allowed_hosts: Iterable[str] = (),
    allow_writes: bool = False,
    token: str | None = None,
) -> DashboardGuard:
    """optuna-dashboard for ``storage`` behind :class:`DashboardGuard` (a WSGI application)."""
    from optuna_dashboard import wsgi

    return DashboardGuard(
        wsgi(storage),
        bind=bind,
        allowed_hosts=allowed_hosts,
        allow_writes=allow_writes,
        token=token,
    )


class _ThreadedServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # Ctrl-C ends the server, whatever the browser keeps open


class _IPv6Server(_ThreadedServer):
    address_family = socket.AF_INET6


def hide_token(line: str, token: str | None) -> str:
    """``line`` with every ``token`` parameter's value as '***', and ``token`` itself, however
    %-escaped: a refused request is logged with its address, and the log is no place for a
    secret (as storage URLs are shown without their password)."""
    line = _PARAMETER.sub(
        lambda m: f"{m[1]}{m[2]}=***" if unquote_plus(m[2]) == "token" else m[0], line
    )
    if token and token in unquote(line):
        line = unquote(line).replace(token, "***")
    return line


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """One line per refusal, none per page and API call (the page polls every few s)."""
        if str(code).startswith("4"):
            super().log_request(code, size)

    def log_message(self, format: str, *args: Any) -> None:
        """Every line the server logs (requests, malformed ones), without the token."""
        super().log_message("%s", hide_token(format % args, self.server.get_app().token))


def serve_dashboard(app: DashboardGuard, host: str, port: int) -> None:
    """Serve ``app`` on ``host``:``port`` (v4 or v6), one thread per request, until killed."""
    server_class = _IPv6Server if ":" in host else _ThreadedServer
    with make_server(host, port, app, server_class=server_class, handler_class=_QuietHandler) as s:
        s.serve_forever()
