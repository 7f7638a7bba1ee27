# SPDX-License-Identifier: GPL-3.0-or-later
"""Names and settings every part of the storage package shares."""

from __future__ import annotations

DEFAULT_STORAGE = "hyperscan.journal"
"""The embedded storage file, in the current directory, used when no URL is given."""
STORAGE_ENV = "HYPERSCAN_STORAGE"
"""Environment variable with the storage URL, so that workers need no ``--storage``."""
CONNECT_TIMEOUT_S = 5
"""A wrong PostgreSQL host must fail in seconds, not after the OS's TCP timeout (minutes)."""

JOURNAL_PREFIX = "journal://"
PG_PREFIX = "postgresql+psycopg2://"
SQLITE_PREFIX = "sqlite:///"
SCHEMA_HINT = "run `hyperscan study create` first"
NO_SCHEMA = f"no hyperscan/Optuna schema in this database; {SCHEMA_HINT}"
