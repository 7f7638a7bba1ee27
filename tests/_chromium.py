# SPDX-License-Identifier: GPL-3.0-or-later
"""Headless Chromium driven over the DevTools protocol through a pipe (stdlib only).

``--remote-debugging-pipe`` makes Chromium read protocol messages on file descriptor 3 and
write them on 4, each one JSON text ended by a NUL byte: no websocket client, no port, no
download. The browser is Debian's ``chromium`` package, started and stopped by the test.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",  # tests run as root in containers
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
)
TIMEOUT_S = 30.0


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageCheck:
    """What a page did while it loaded."""

    errors: list[str] = field(default_factory=list)  # console errors, exceptions, failed loads
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    images: list[dict[str, Any]] = field(default_factory=list)  # each <img>: decoded size
    screenshot: bytes = b""  # PNG of the whole page


class BrowserError(RuntimeError):
    pass


class Chromium:
    """One headless browser; use as a context manager."""

    def __init__(self, executable: str, width: int = 1280, height: int = 900) -> None:
        self.executable = executable
        self.width = width
        self.height = height
        self._next_id = 0
        self._messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._events: list[dict[str, Any]] = []

    def __enter__(self) -> Chromium:
        self._profile = tempfile.TemporaryDirectory(prefix="hyperscan-chromium-")
        self._log = open(Path(self._profile.name) / "stderr.log", "w+b")  # noqa: SIM115
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire_pipes() -> None:  # in the child, before exec: fds 3 and 4 are the protocol
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self._process = subprocess.Popen(
            [
                self.executable,
                *FLAGS,
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile.name}",
                f"--window-size={self.width},{self.height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            preexec_fn=wire_pipes,  # single-threaded test process
            close_fds=False,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            if self._process.poll() is None:
                with contextlib.suppress(BrowserError):
                    self.call("Browser.close", timeout=5)
                try:
                    self._process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait(timeout=5)
        finally:
            os.close(self._to_child)
            self._log.close()
            self._profile.cleanup()

    def stderr_tail(self) -> str:
        self._log.flush()
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-3000:]

    # ---- protocol

    def _read(self) -> None:
        buffer = b""
        with os.fdopen(self._from_child, "rb", buffering=0) as stream:
            while True:
                chunk = stream.read(1 << 16)
                if not chunk:
                    self._messages.put(None)
                    return
                buffer += chunk
                while b"\0" in buffer:
                    message, buffer = buffer.split(b"\0", 1)
                    self._messages.put(json.loads(message))

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = TIMEOUT_S,
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        reply = self._wait(lambda m: m.get("id") == message["id"], timeout, method)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def _wait(self, match, timeout: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"no answer to {what} in {timeout} s:\n{self.stderr_tail()}")
            try:
                message = self._messages.get(timeout=left)
            except queue.Empty:
                continue
            if message is None:
                raise BrowserError(f"Chromium exited during {what}:\n{self.stderr_tail()}")
            if match(message):
                return message
            if "method" in message:
                self._events.append(message)

    # ---- a page

    def check(self, url: str) -> PageCheck:
        """Load ``url`` in a fresh tab; console errors, requests, images and a screenshot."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        self._events.clear()
        self.call("Page.navigate", {"url": url}, session=session)
        self._wait(
            lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == session,
            TIMEOUT_S,
            f"loading {url}",
        )
        time.sleep(0.2)  # let late console messages arrive
        images = self.call(
            "Runtime.evaluate",
            {
                "expression": "JSON.stringify(Array.from(document.images).map(i => ({"
                "complete: i.complete, width: i.naturalWidth, height: i.naturalHeight, "
                "src: i.currentSrc.slice(0, 40), alt: i.alt})))",
                "returnByValue": True,
            },
            session=session,
        )["result"]["value"]
        size = self.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
        shot = self.call(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {
                    "x": 0,
                    "y": 0,
                    "width": min(size["width"], 4000),
                    "height": min(size["height"], 16000),
                    "scale": 1,
                },
            },
            session=session,
        )["data"]
        result = PageCheck(images=json.loads(images), screenshot=base64.b64decode(shot))
        for event in self._events:
            if event.get("sessionId") != session:
                continue
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                texts = [str(a.get("value", a.get("description", ""))) for a in params["args"]]
                result.errors.append("console.error: " + " ".join(texts))
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                text = details.get("exception", {}).get("description") or details.get("text")
                result.errors.append(f"exception: {text}")
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                result.errors.append(f"log: {params['entry'].get('text')}")
            elif method == "Network.loadingFailed":
                result.errors.append(f"load failed: {params.get('errorText')}")
            elif method == "Network.requestWillBeSent":
                result.requests.append(params["request"]["url"])
        self.call("Target.closeTarget", {"targetId": target})
        return result
