# SPDX-License-Identifier: GPL-3.0-or-later
"""Passwords out of URLs and messages: a storage URL is shown in every message, its password
never."""

from __future__ import annotations

import re
from urllib.parse import unquote

# A scheme and its slashes, any number of them: a URL mistyped with one slash ("postgresql:/")
# is quoted in the message that refuses it, and must not show its password either.
_SCHEME_PREFIX = re.compile(r"[A-Za-z][\w+.-]*:/*")
_QUERY_PASSWORD = re.compile(r"(?i)([?&]password=)[^&]*")
_SCRUB_ANYWHERE = 6  # characters: a longer password hardly occurs in a message by chance


def _split_userinfo(url: str) -> tuple[str, str, str, str | None]:
    """``(scheme://, user, rest after '@', password)``; password None when the URL has none.

    The userinfo ends at the *last* '@' before the query, so that a password with an
    unescaped '@' or '/' is still hidden completely.
    """
    match = _SCHEME_PREFIX.match(url)
    if match is None:
        return "", "", url, None
    prefix, rest = match.group(0), url[match.end() :]
    query_at = rest.find("?")
    at = rest.rfind("@", 0, query_at if query_at >= 0 else len(rest))
    if at < 0:
        return prefix, "", rest, None
    user, colon, password = rest[:at].partition(":")
    return prefix, user, rest[at + 1 :], password if colon else None


def redact(url: str) -> str:
    """The URL with any password (in the userinfo or a ``password=`` parameter) as '***'."""
    prefix, user, rest, password = _split_userinfo(url)
    if password is not None:
        url = f"{prefix}{user}:***@{rest}"
    return _QUERY_PASSWORD.sub(r"\1***", url)


def _passwords(url: str | None) -> list[str]:
    if not url:
        return []
    found = [m.group(1) for m in re.finditer(r"(?i)[?&]password=([^&]*)", url)]
    password = _split_userinfo(url)[3]
    if password:
        found.append(password)
    found += [unquote(p) for p in found]
    return [p for p in found if p]


def scrub(text: str, url: str | None) -> str:
    """Belt and braces: no password reaches a message even if a driver echoed it. A short
    one only where a URL or DSN holds it: replaced everywhere, it would garble the message
    ("conn***ction r***fus***d") and, by the gaps, tell the password."""
    for password in sorted(_passwords(url), key=len, reverse=True):
        escaped = re.escape(password)
        if len(password) >= _SCRUB_ANYWHERE:
            text = text.replace(password, "***")
        text = re.sub(rf":{escaped}@", ":***@", text)
        text = re.sub(rf"(?i)(password\s*=\s*['\"]?){escaped}", r"\1***", text)
    return text
