# SPDX-License-Identifier: GPL-3.0-or-later
"""docs/runcard.md and docs/runcard.schema.json: generated from the schema, and current."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperscan.runcard import scan_runcard_from_dict
from hyperscan.runcard.reference import COMMAND, SCHEMA_FILE, documents, json_schema

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_reference_is_current() -> None:
    for name, text in documents().items():
        path = ROOT / "docs" / name
        current = path.read_text(encoding="utf-8") if path.exists() else None
        assert current == text, f"docs/{name} is not current: run `{COMMAND}` in the repository"


def test_the_command_writes_both_files(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "hyperscan.runcard.reference", str(tmp_path)], check=True)
    assert {p.name: p.read_text(encoding="utf-8") for p in tmp_path.iterdir()} == documents()


def _sections(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("runcard", schema)] + list(schema["$defs"].items())


def test_every_key_is_described() -> None:
    undescribed = [
        f"{section}.{key}"
        for section, node in _sections(json_schema())
        for key, field in node.get("properties", {}).items()
        if not field.get("description")
    ]
    assert undescribed == []
    markdown = documents()["runcard.md"]
    assert "| `training.threads` |" in markdown and "| `scan.space.parameters` |" in markdown
    assert f"$schema=../docs/{SCHEMA_FILE}" in markdown  # how to point an editor at it


def _node(schema: dict[str, Any], defs: dict[str, Any], value: Any) -> dict[str, Any] | None:
    """The object schema that describes ``value``: references followed, and of alternatives
    the one whose keys it has."""
    if "$ref" in schema:
        return _node(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, value)
    if "anyOf" in schema:
        for option in schema["anyOf"]:
            node = _node(option, defs, value)
            if node is not None and set(value) <= set(node.get("properties", value)):
                return node
        return None
    return schema if schema.get("type") == "object" else None


def _unknown_keys(value: Any, schema: dict[str, Any], defs: dict[str, Any], path: str) -> list:
    if not isinstance(value, dict):
        return []
    node = _node(schema, defs, value)
    if node is None:
        return [path or "<top>"]
    found = []
    for key, item in value.items():
        where = f"{path}.{key}" if path else str(key)
        if "properties" in node:
            if key not in node["properties"]:
                found.append(where)
            else:
                found += _unknown_keys(item, node["properties"][key], defs, where)
        else:
            found += _unknown_keys(item, node.get("additionalProperties", {}), defs, where)
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "studies").glob("*.yml")), ids=lambda p: p.name)
def test_the_schema_knows_every_key_of_the_shipped_runcards(path: Path) -> None:
    schema = json.loads((ROOT / "docs" / SCHEMA_FILE).read_text(encoding="utf-8"))
    assert schema["additionalProperties"] is False
    assert _unknown_keys(yaml.safe_load(path.read_text()), schema, schema["$defs"], "") == []
    assert _unknown_keys({"epoch": 1}, schema, schema["$defs"], "") == ["epoch"]


#: For each key the reference lists for an objective of a multi-objective scan, an entry that
#: gives it a value other than its default (and what that value needs beside it).
_ENTRY_EXAMPLES: dict[str, dict[str, Any]] = {
    "loss": {"loss": "logp"},
    "phi_squared": {"loss": "phi2", "phi_squared": True},
    "chi2": {"chi2": "held_out"},
    "statistic": {"statistic": "median"},
    "std_weight": {"statistic": "mean_plus_std", "std_weight": 2},
    "replica_statistic": {"loss": "chi2", "replica_statistic": "best_worst"},
    "fold_statistic": {"fold_statistic": "max"},
    "penalties": {"loss": "chi2", "penalties": ["saturation"]},
    "penalties_in_loss": {"loss": "chi2", "penalties": ["patience"], "penalties_in_loss": True},
    "name": {"name": "mine"},
    "direction": {"direction": "maximize"},
}


def _listed(prefix: str) -> set[str]:
    """The keys docs/runcard.md lists right below ``prefix``."""
    rows = re.findall(rf"^\| `{re.escape(prefix)}\.(\w+)` \|", documents()["runcard.md"], re.M)
    return set(rows)


def test_every_key_listed_for_an_objective_entry_is_taken() -> None:
    """The reference lists for `objectives[]` only what an entry takes: not the trial's
    shared keys (`best_fraction`, `threshold`) that it inherits but refuses."""
    listed = _listed("scan.objective.objectives[]")
    assert listed == set(_ENTRY_EXAMPLES)
    entries = json_schema()["$defs"]["ObjectiveEntry"]["properties"]
    assert set(entries) == listed
    for key in sorted(listed):
        card = {
            "data": {"closure": {"size": "tiny", "level": 1}},
            "scan": {
                "folds": [["A"], ["B"]],
                "pruner": {"name": "none"},
                "space": {"parameters": {"epochs": {"low": 100, "high": 200}}},
                "objective": {
                    "objectives": [{"name": "other", "loss": "phi2"}, _ENTRY_EXAMPLES[key]]
                },
            },
        }
        entry = scan_runcard_from_dict(card).scan.objective.objectives[1]
        assert key in entry.model_fields_set, key
