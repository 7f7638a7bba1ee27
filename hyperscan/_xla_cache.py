"""Keeping XLA's persistent cache loadable: TensorFlow 2.21 fails the op, and so the fit, on
an entry it cannot parse, every time, and never replaces the entry itself.

TensorFlow writes each entry beside its place (``<entry>.pb<host>-…-<pid>-….tmp``) and renames
it into place, so concurrent writers never tear one; but an entry can still be cut short (a
node that crashed before the data reached the disk, a copy or sync of the folder), and a
writer killed mid-write leaves its temporary file behind.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from pathlib import Path

_logger = logging.getLogger(__name__)

#: A writer's temporary file older than this is an orphan: writing an entry takes seconds.
STALE_AFTER_S = 3600.0
#: Entries are checked until they have been on disk this long before a check: long enough for
#: the data of an entry renamed just before a crash to have been written, or found missing.
SETTLE_S = 600.0
#: Touched after each check of the folder; its time says which entries are new since.
CHECKED = ".checked"
#: XlaSerializedCacheEntry's key (1) and executable (3); its HLO module (2) is optional here.
_KEY, _EXECUTABLE = 1, 3
#: An entry has three fields (a later TensorFlow may add some): a file of many tiny ones is not
#: an entry, and is not read a few bytes at a time to the end.
_MOST_FIELDS = 64


def tidy(directory: Path) -> None:
    """Remove the entries TensorFlow could not load, each with one line in the log, so that
    the fit compiles its program anew and TensorFlow saves it again; and remove the
    temporary files of writers long gone.

    Only entries new since the last check (by their ctime, which a rename or a copy sets) are
    opened, and only a few bytes of each: a start costs a stat per entry, not a read.

    The check ends by writing its stamp as TensorFlow writes an entry, a new file renamed into
    place; OSError if that fails: TensorFlow would fail the fit that tried, so this folder
    cannot be the cache."""
    stamp = directory / CHECKED
    try:
        since = stamp.stat().st_mtime_ns - int(SETTLE_S * 1e9)
    except OSError:
        since = 0
    now = time.time()
    with os.scandir(directory) as listing:
        for item in listing:
            name = item.name
            try:
                if name.endswith(".pb") and item.stat().st_ctime_ns >= since:
                    _remove_if_unreadable(Path(item.path))
                elif name.endswith(".tmp") and ".pb" in name and _older(item, now):
                    os.unlink(item.path)
            except OSError:
                pass  # gone since the listing
    fd, written = tempfile.mkstemp(prefix=CHECKED, dir=directory)
    os.close(fd)
    os.replace(written, stamp)


def _older(item: os.DirEntry, now: float) -> bool:
    return now - item.stat().st_mtime > STALE_AFTER_S


def _remove_if_unreadable(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # gone since the listing, or not ours to read
    try:
        inode = os.fstat(fd).st_ino
        reason = why_unreadable(fd, path.name)
    except OSError:
        return
    finally:
        os.close(fd)
    if reason is None:
        return
    try:
        # Not an entry another process has put in its place since (renamed in: a new inode).
        if os.stat(path).st_ino == inode:
            os.unlink(path)
            _logger.warning("XLA cache: removed %s (%s); it is compiled anew", path, reason)
    except OSError:
        pass


def why_unreadable(fd: int, name: str) -> str | None:
    """Why TensorFlow could not load this cache entry (a binary XlaSerializedCacheEntry), or
    None: its fields must fill the file exactly, hold a key and an executable, and the key
    must be the one the file is named after (prefix__signature__cluster__device). Reads a
    few bytes per field (three), never the HLO module or the executable."""
    size = os.fstat(fd).st_size
    if size == 0:
        return "empty"
    fields: dict[int, tuple[int, int]] = {}
    position = count = 0
    while position < size:
        count += 1
        if count > _MOST_FIELDS:
            return "not a cache entry"
        head = os.pread(fd, 20, position)  # a tag and a length: 20 bytes at most
        try:
            tag, at = _varint(head, 0)
            number, kind = tag >> 3, tag & 7
            if number == 0 or kind not in (0, 1, 2, 5):
                return "not a cache entry"
            length = {0: 0, 1: 8, 5: 4}.get(kind, 0)
            if kind == 0:
                _, at = _varint(head, at)
            elif kind == 2:
                length, at = _varint(head, at)
        except IndexError:
            return f"cut short at {size} bytes"
        fields[number] = (position + at, length)
        position += at + length
    if position != size:
        return f"cut short at {size} of {position} bytes"
    if _KEY not in fields or _EXECUTABLE not in fields:
        return "no key" if _KEY not in fields else "no executable"
    start, length = fields[_KEY]
    key = _key(os.pread(fd, length, start))
    if key is None or f"{key[0]}__{key[1]}__" not in name:
        return "its key is not its name's"
    return None


def _key(data: bytes) -> tuple[int, int] | None:
    """An XlaSerializedCacheKey's signature and cluster fingerprints (fields 1 and 2)."""
    values: dict[int, int] = {}
    position = 0
    try:
        while position < len(data):
            tag, position = _varint(data, position)
            if tag & 7 == 0:
                values[tag >> 3], position = _varint(data, position)
            elif tag & 7 == 2:
                length, position = _varint(data, position)
                position += length
            else:
                return None
    except IndexError:
        return None
    if position != len(data) or 1 not in values or 2 not in values:
        return None
    return values[1], values[2]


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """A protobuf varint at `position`, and the position after it; IndexError past the end."""
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
        if shift > 63:
            raise IndexError("varint too long")
