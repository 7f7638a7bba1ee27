# SPDX-License-Identifier: GPL-3.0-or-later
"""Reading the deployment files as Docker Compose and Docker would, without a Docker engine.

The helpers are fixtures (the test folders have no __init__.py, so helper modules would
collide by name): `deploy` gives an object with the parsers and checks.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
GPU_OVERRIDE = REPO / "docker" / "compose.gpu.yml"
PGBOUNCER_OVERRIDE = REPO / "docker" / "compose.pgbouncer.yml"
ENV_EXAMPLE = REPO / ".env.example"
SLURM_SCRIPT = REPO / "docker" / "slurm-workers.sbatch"
DOCKERFILES = {"cpu": REPO / "docker" / "Dockerfile.cpu", "gpu": REPO / "docker" / "Dockerfile.gpu"}
DOCKERIGNORE = REPO / ".dockerignore"

# Compose interpolation: $$, ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?err}, ${VAR?err}, $VAR
_VARIABLE = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}"
    r"|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))"
)


class InterpolationError(ValueError):
    pass


def interpolate(text: str, env: Mapping[str, str]) -> str:
    def replace(match: re.Match) -> str:
        if match["escaped"]:
            return "$"
        name = match["braced"] or match["plain"]
        value = env.get(name)
        op, arg = match["op"], match["arg"] or ""
        unset = value is None or (op is not None and op.startswith(":") and value == "")
        if op in ("-", ":-"):
            return arg if unset else value
        if op in ("?", ":?"):
            if unset:
                raise InterpolationError(f"{name}: {arg}")
            return value
        return value or ""

    return _VARIABLE.sub(replace, text)


def interpolate_tree(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [interpolate_tree(item, env) for item in node]
    if isinstance(node, dict):
        return {key: interpolate_tree(value, env) for key, value in node.items()}
    return node


def read_dotenv(path: Path) -> dict[str, str]:
    """KEY=VALUE lines; '#' lines are comments (the form .env.example keeps to)."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: not KEY=VALUE: {line!r}"
        values[key.strip()] = value.strip()
    return values


def merge(base: Any, override: Any) -> Any:
    """Compose's merge of several -f files: mappings merge, everything else is replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = merge(base[key], value) if key in base else copy.deepcopy(value)
        return merged
    return copy.deepcopy(override)


def as_list(command: Any) -> list[str]:
    """A service command as argv: a list stays, a string is split as a shell would."""
    if isinstance(command, str):
        return shlex.split(command)
    return [str(item) for item in command]


def environment(service: Mapping[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {str(key): str(value) for key, value in env.items()}


@dataclass
class Mount:
    source: str  # a host path (./x) or a named volume
    target: str
    read_only: bool

    @property
    def is_bind(self) -> bool:
        return self.source.startswith((".", "/", "~"))


def mounts(service: Mapping[str, Any]) -> list[Mount]:
    out = []
    for item in service.get("volumes") or []:
        assert isinstance(item, str), "volumes in short form (source:target[:ro])"
        parts = item.split(":")
        out.append(Mount(parts[0], parts[1], len(parts) > 2 and "ro" in parts[2].split(",")))
    return out


# --------------------------------------------------------------------------- Dockerfiles


@dataclass
class Instruction:
    keyword: str
    arguments: str


def dockerfile_instructions(path: Path) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped."""
    instructions: list[Instruction] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not pending):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, arguments = line.partition(" ")
        instructions.append(Instruction(keyword.upper(), arguments.strip()))
    assert not pending, f"{path.name}: a continuation line ends the file"
    return instructions


def dockerignore_patterns() -> list[tuple[bool, re.Pattern]]:
    """(negated, regex) per pattern, matching as Docker does: a path or any of its parents."""
    patterns = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex += "(?:.*/)?"
                i += 3
            elif pattern.startswith("**", i):
                regex += ".*"
                i += 2
            elif pattern[i] == "*":
                regex += "[^/]*"
                i += 1
            elif pattern[i] == "?":
                regex += "[^/]"
                i += 1
            else:
                regex += re.escape(pattern[i])
                i += 1
        patterns.append((negated, re.compile(regex + r"\Z")))
    return patterns


def in_build_context(relative: str) -> bool:
    """Whether .dockerignore lets `relative` (a path from the repository root) in."""
    parts = Path(relative).parts
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    included = True
    for negated, regex in dockerignore_patterns():
        if any(regex.match(candidate) for candidate in candidates):
            included = negated
    return included


# --------------------------------------------------------------------------- the CLI


def _rest(ctx: click.Context) -> list[str]:
    protected = getattr(ctx, "_protected_args", None) or []
    return [*protected, *ctx.args]


def parse_invocation(args: list[str], env: Mapping[str, str]) -> list[click.Context]:
    """Parse `hyperscan ARGS` down to its command as Click would run it, without running it:
    every option, type, range and required value is checked. Returns the context chain."""
    from hyperscan.cli import main

    saved = dict(os.environ)
    os.environ.update(env)
    try:
        contexts = [main.make_context("hyperscan", list(args))]
        command: click.Command = main
        while isinstance(command, click.Group):
            name, sub, rest = command.resolve_command(contexts[-1], _rest(contexts[-1]))
            assert sub is not None, f"no command in {args}"
            contexts.append(sub.make_context(name, rest, parent=contexts[-1]))
            command = sub
        assert not _rest(contexts[-1]), f"unused arguments in {args}: {_rest(contexts[-1])}"
        return contexts
    finally:
        os.environ.clear()
        os.environ.update(saved)


def help_text(args: list[str]) -> str:
    """`hyperscan ARGS --help` through the CLI: the path exists and answers."""
    from hyperscan.cli import main

    result = CliRunner().invoke(main, [*args, "--help"], prog_name="hyperscan")
    assert result.exit_code == 0, result.output
    return result.output


class Deploy:
    repo = REPO
    compose_path = COMPOSE
    gpu_override_path = GPU_OVERRIDE
    pgbouncer_override_path = PGBOUNCER_OVERRIDE
    env_example_path = ENV_EXAMPLE
    slurm_script = SLURM_SCRIPT
    dockerfiles = DOCKERFILES

    interpolate = staticmethod(interpolate)
    read_dotenv = staticmethod(read_dotenv)
    merge = staticmethod(merge)
    as_list = staticmethod(as_list)
    environment = staticmethod(environment)
    mounts = staticmethod(mounts)
    dockerfile_instructions = staticmethod(dockerfile_instructions)
    in_build_context = staticmethod(in_build_context)
    parse_invocation = staticmethod(parse_invocation)
    help_text = staticmethod(help_text)
    InterpolationError = InterpolationError

    def env_example(self) -> dict[str, str]:
        return read_dotenv(ENV_EXAMPLE)

    def raw(self, path: Path = COMPOSE) -> dict[str, Any]:
        document = yaml.safe_load(path.read_text())
        assert isinstance(document, dict), f"{path.name} is not a mapping"
        return document

    def compose(
        self, env: Mapping[str, str] | None = None, gpu: bool = False, pgbouncer: bool = False
    ) -> dict[str, Any]:
        """The compose file(s) as `docker compose config` would resolve them (merge keys by
        YAML, then the overrides, then interpolation with .env.example's values and `env`)."""
        document = self.raw()
        if gpu:
            document = merge(document, self.raw(GPU_OVERRIDE))
        if pgbouncer:
            document = merge(document, self.raw(PGBOUNCER_OVERRIDE))
        values = {**self.env_example(), **(env or {})}
        return interpolate_tree(document, values)

    def hyperscan_services(self, document: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """The services whose image has `hyperscan` as entrypoint (built from docker/)."""
        return {
            name: service for name, service in document["services"].items() if "build" in service
        }

    def dockerfile_workdir(self, kind: str = "cpu") -> str:
        workdirs = [
            i.arguments
            for i in dockerfile_instructions(DOCKERFILES[kind])
            if i.keyword == "WORKDIR"
        ]
        return workdirs[-1]


@pytest.fixture(scope="session")
def deploy() -> Deploy:
    return Deploy()


# A scan small enough for a trial in seconds on a CPU (the tiny closure test, 2 replicas).
TINY_SCAN = """\
data: {closure: {size: tiny, level: 1}}
architecture: {nodes: [6], activations: [tanh]}
epochs: 200
training: {steps_per_call: 50}
scan:
  trials: 4
  replicas: 2
  sampler: {name: tpe, seed: 0}
  pruner: {name: none}
  space:
    parameters:
      optimizer.learning_rate: {low: 1.0e-3, high: 1.0e-2, log: true}
"""


@pytest.fixture
def tiny_runcard(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-scan.yml"
    path.write_text(TINY_SCAN)
    return path
