# SPDX-License-Identifier: GPL-3.0-or-later
"""What a user gets from `pip install` of the wheel or the sdist, with no checkout around.

Both are built as pip builds them: pyproject's build backend, at the lowest version that
pyproject allows (installed from the package index, as pip's isolated build would), in a
process that sees nothing else; the wheel is built once from the source tree and once from
the sdist, as `pip install hyperscan-*.tar.gz` does.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
#: What the sdist brings besides the package: the files the README sends a user to.
SDIST_EXTRAS = ("studies", "docs")


def _lowest_backend() -> str:
    (requirement,) = PYPROJECT["build-system"]["requires"]
    found = re.fullmatch(r"setuptools>=([0-9.]+)", requirement)
    assert found, f"build-system.requires: {requirement!r} is not setuptools>=VERSION"
    return f"setuptools=={found[1]}"


def _package_files() -> set[str]:
    files = (REPO / "hyperscan").rglob("*")
    return {
        path.relative_to(REPO).as_posix()
        for path in files
        if path.is_file() and "__pycache__" not in path.parts
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """The sdist, the wheel from the tree and the wheel from the sdist."""
    root = tmp_path_factory.mktemp("packaging")
    backend = root / "backend"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(backend)]
        + [_lowest_backend()],
        check=True,
        capture_output=True,
        timeout=300,
    )
    source = _mkdir(root / "source")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, source / name)
    for folder in ("hyperscan", "tests", *SDIST_EXTRAS):
        shutil.copytree(REPO / folder, source / folder, ignore=ignore)

    def hook(name: str, tree: Path, out: Path) -> Path:
        code = f"from setuptools import build_meta; print(build_meta.{name}({str(out)!r}))"
        done = subprocess.run(
            [sys.executable, "-S", "-c", code],  # -S: no site-packages but the backend's
            cwd=tree,
            env={"PYTHONPATH": str(backend), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return out / done.stdout.strip().splitlines()[-1]

    sdist = hook("build_sdist", source, _mkdir(root / "sdist"))
    with tarfile.open(sdist) as archive:
        archive.extractall(root / "unpacked", filter="data")
    unpacked = root / "unpacked" / sdist.name.removesuffix(".tar.gz")
    return {
        "sdist": sdist,
        "wheel": hook("build_wheel", source, _mkdir(root / "wheel")),
        "wheel_from_sdist": hook("build_wheel", unpacked, _mkdir(root / "wheel-from-sdist")),
    }


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_the_wheel_holds_every_file_of_the_package_and_nothing_else(built):
    names = _wheel_names(built["wheel"])
    assert {n for n in names if not n.startswith("hyperscan-")} == _package_files()
    assert any(n.startswith("hyperscan/data/dis/") and n.endswith(".npz") for n in names)
    assert "hyperscan/data/dis/NOTICE.md" in names
    assert "hyperscan/data/hadronic/NOTICE.md" in names
    assert "hyperscan/data/hadronic/grids/DYE866P.pineappl.lz4" in names
    assert "hyperscan/data/hadronic/DYE866_Z0_800GEV_PXSEC.npz" in names


def test_the_wheel_carries_the_licence(built):
    names = _wheel_names(built["wheel"])
    (info,) = {n.split("/")[0] for n in names if n.startswith("hyperscan-")}
    assert f"{info}/licenses/LICENSE" in names
    with zipfile.ZipFile(built["wheel"]) as archive:
        metadata = archive.read(f"{info}/METADATA").decode()
        assert archive.read(f"{info}/licenses/LICENSE") == (REPO / "LICENSE").read_bytes()
    assert f"License-Expression: {PYPROJECT['project']['license']}" in metadata.splitlines()


def test_the_sdist_has_the_readmes_examples_and_no_tests(built):
    with tarfile.open(built["sdist"]) as archive:
        top, *_ = archive.getnames()
        names = {name.removeprefix(f"{top}/") for name in archive.getnames()}
    for folder in SDIST_EXTRAS:
        expected = {p.relative_to(REPO).as_posix() for p in (REPO / folder).iterdir()}
        assert expected <= names, f"{folder}/ is not all in the sdist"
    assert {"README.md", "LICENSE", "pyproject.toml"} <= names
    assert _package_files() <= names
    assert not [n for n in names if n.split("/")[0] == "tests"]  # the suite needs the repository


def test_a_wheel_built_from_the_sdist_is_the_same_as_from_the_tree(built):
    assert _wheel_names(built["wheel_from_sdist"]) == _wheel_names(built["wheel"])
