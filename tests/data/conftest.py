# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest

from hyperscan.data import Problem, closure_problem

# the repo's sibling folder shared/ (read-only real-data kit, present in CI)
SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.fixture(scope="session")
def closure() -> Callable[..., Problem]:
    """closure(size, level=0, seed=0): closure problems are immutable, so tests share them."""
    cache: dict[tuple[str, int, int], Problem] = {}

    def get(size: str, level: int = 0, seed: int = 0) -> Problem:
        key = (size, level, seed)
        if key not in cache:
            cache[key] = closure_problem(size, level=level, seed=seed)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def real_data_files(skip_or_fail_on_ci: Callable[..., NoReturn]) -> list[Path]:
    """The real npz files; missing data fail under CI=true and skip elsewhere."""
    files = sorted(SHARED_DATA.glob("*.npz"))
    if not files:
        skip_or_fail_on_ci(f"real-data kit not found at {SHARED_DATA}")
    return files
