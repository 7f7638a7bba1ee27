# SPDX-License-Identifier: GPL-3.0-or-later
"""A loopback TCP proxy in front of PostgreSQL that a test cuts, freezes or closes at will.

``cut(seconds)`` closes every connection and refuses new ones (each is accepted and closed at
once, as a restarting server does) for that long; ``freeze(seconds)`` stops forwarding bytes
in both directions, connections left open, as a hung server or a black-holed route does.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import sqlalchemy


class Proxy:
    """Forwards 127.0.0.1:<port> to ``target`` (host, port), one thread per connection."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._refuse_until = 0.0
        self._frozen_until = 0.0
        self._closed = False
        self.accepted = 0  # connections forwarded, over the proxy's life
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, url: str) -> str:
        """``url`` (a PostgreSQL URL) through this proxy."""
        parsed = sqlalchemy.engine.make_url(url).set(host="127.0.0.1", port=self.port)
        return parsed.render_as_string(hide_password=False)

    def cut(self, seconds: float) -> None:
        """Close every connection now and refuse new ones for ``seconds``."""
        with self._lock:
            self._refuse_until = time.monotonic() + seconds
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            _close(sock)

    def reopen(self) -> None:
        """Accept connections again (ends a cut)."""
        self._refuse_until = 0.0

    def freeze(self, seconds: float) -> None:
        """Forward nothing for ``seconds``; connections stay open."""
        self._frozen_until = time.monotonic() + seconds

    def close(self) -> None:
        self._closed = True
        _close(self._listener)
        self.cut(0)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if time.monotonic() < self._refuse_until:
                _close(client)
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets |= {client, server}
                self.accepted += 1
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        peers = {client: server, server: client}
        try:
            while True:
                if time.monotonic() < self._frozen_until:
                    time.sleep(0.05)
                    continue
                ready, _, _ = select.select(list(peers), [], [], 0.1)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    peers[sock].sendall(data)
        except (OSError, ValueError):  # closed by cut()
            return
        finally:
            with self._lock:
                self._sockets -= {client, server}
            _close(client)
            _close(server)


def _close(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with suppress(OSError):
        sock.close()


@contextmanager
def proxy_to(url: str) -> Iterator[Proxy]:
    """A proxy in front of the PostgreSQL server of ``url``, closed at the end."""
    parsed = sqlalchemy.engine.make_url(url)
    proxy = Proxy((parsed.host or "127.0.0.1", parsed.port or 5432))
    try:
        yield proxy
    finally:
        proxy.close()
