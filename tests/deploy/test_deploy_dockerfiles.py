# SPDX-License-Identifier: GPL-3.0-or-later
"""The images' Dockerfiles and .dockerignore, checked without building (no Docker engine)."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib

import pytest

BASES = {"cpu": "python:3.11-slim", "gpu": "tensorflow/tensorflow:2.21.0-gpu"}
SECRET = re.compile(r"(?i)password|secret|token|HYPERSCAN_STORAGE|PGPASS")


def _copy_sources(arguments: str) -> list[str]:
    words = arguments.split()
    if words[0].startswith("["):
        words = json.loads(arguments)
    words = [word for word in words if not word.startswith("--")]
    return words[:-1]


def _git_files(deploy, skip_or_fail_on_ci) -> list[str]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=deploy.repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        skip_or_fail_on_ci(  # CI runs on a clone: git must answer there
            "not a git checkout", on_ci="git ls-files failed: not a git checkout, or no git"
        )
    return [path for path in listed if (deploy.repo / path).is_file()]


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_dockerfile_copies_files_that_exist_and_the_context_lets_in(deploy, kind):
    instructions = deploy.dockerfile_instructions(deploy.dockerfiles[kind])
    # COPY --from copies from the Dockerfile's own `requirements` stage, not the context.
    copies = [
        i
        for i in instructions
        if i.keyword in ("COPY", "ADD") and "--from=requirements" not in i.arguments
    ]
    assert copies
    for instruction in copies:
        assert "--from" not in instruction.arguments
        for source in _copy_sources(instruction.arguments):
            path = deploy.repo / source
            assert path.exists(), f"{kind}: COPY {source}: no such file in the build context"
            assert deploy.in_build_context(source), f"{kind}: .dockerignore excludes {source}"
            for file in path.rglob("*.py") if path.is_dir() else []:
                if "__pycache__" not in file.parts:
                    relative = file.relative_to(deploy.repo).as_posix()
                    assert deploy.in_build_context(relative), f"{kind}: {relative} left out"
    # pip install . needs what pyproject names
    pyproject = tomllib.loads((deploy.repo / "pyproject.toml").read_text())
    copied = {s for i in copies for s in _copy_sources(i.arguments)}
    assert pyproject["project"]["readme"] in copied
    assert {"pyproject.toml", "hyperscan"} <= copied


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_dockerfile_installs_hyperscan_runs_it_as_a_user_and_bakes_in_no_secret(deploy, kind):
    instructions = deploy.dockerfile_instructions(deploy.dockerfiles[kind])
    keywords = [i.keyword for i in instructions]
    args = {
        name: default
        for i in instructions
        if i.keyword == "ARG"
        for name, _, default in [i.arguments.partition("=")]
    }
    # Both stages (the dependency list, the image) start from the base image.
    bases = [i.arguments.split()[0] for i in instructions if i.keyword == "FROM"]
    bases = {re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base) for base in bases}
    assert bases == {BASES[kind]}

    # Two install layers: pyproject's dependencies (listed by the first stage) before the code
    # is copied (a code change keeps that layer cached), then hyperscan itself without them.
    def first(text: str, keyword: str = "RUN") -> int:
        (found, *_) = [
            n for n, i in enumerate(instructions) if i.keyword == keyword and text in i.arguments
        ]
        return found

    listed = first("['project']['dependencies']")
    image = max(n for n, i in enumerate(instructions) if i.keyword == "FROM")
    received = first("--from=requirements /tmp/requirements.txt", "COPY")
    deps = first("pip install -r /tmp/requirements.txt")
    code = first("hyperscan", "COPY")
    package = first("pip install --no-deps .")
    assert listed < image < received < deps < code < package
    assert json.loads(next(i.arguments for i in instructions if i.keyword == "ENTRYPOINT")) == [
        "hyperscan"
    ]
    users = [i.arguments for i in instructions if i.keyword == "USER"]
    assert users and users[-1] not in ("root", "0", "0:0")
    # nothing after the switch to the user needs root
    assert "RUN" not in keywords[keywords.index("USER") :]
    for instruction in instructions:
        if instruction.keyword in ("ENV", "ARG", "LABEL"):
            assert not SECRET.search(instruction.arguments), instruction
        if instruction.keyword in ("COPY", "ADD"):
            assert ".env" not in _copy_sources(instruction.arguments)
    assert deploy.dockerfile_workdir(kind) == "/home/hyperscan"


def test_the_gpu_base_is_the_tensorflow_that_pyproject_asks_for(deploy):
    pyproject = tomllib.loads((deploy.repo / "pyproject.toml").read_text())
    (pin,) = [d for d in pyproject["project"]["dependencies"] if d.startswith("tensorflow")]
    low = re.search(r">=\s*([\d.]+)", pin).group(1)
    tag = BASES["gpu"].split(":")[1]
    assert tag.startswith(low + "."), (pin, tag)


def test_dockerignore_keeps_credentials_storage_and_the_venv_out(deploy):
    for path in (".env", "hyperscan.journal", ".venv/bin/python", ".git/config", "tests/x.py"):
        assert not deploy.in_build_context(path), path
    for path in ("hyperscan/cli/_main.py", "studies/quickstart-scan.yml", "pyproject.toml"):
        assert deploy.in_build_context(path), path
    assert not deploy.in_build_context("hyperscan/__pycache__/x.cpython-311.pyc")


def test_every_tracked_file_a_dockerfile_copies_is_in_the_context(deploy, skip_or_fail_on_ci):
    sources = set()
    for path in deploy.dockerfiles.values():
        for i in deploy.dockerfile_instructions(path):
            if i.keyword in ("COPY", "ADD"):
                sources.update(_copy_sources(i.arguments))
    copied = [
        file
        for file in _git_files(deploy, skip_or_fail_on_ci)
        if any(file == s or file.startswith(s.rstrip("/") + "/") for s in sources)
    ]
    assert "pyproject.toml" in copied and "hyperscan/cli/_main.py" in copied, copied[:10]
    for file in copied:
        assert deploy.in_build_context(file), file
