# SPDX-License-Identifier: GPL-3.0-or-later
"""The runcard reference, generated from the schema: ``docs/runcard.md`` (every key, its type,
default and description) and ``docs/runcard.schema.json`` (a JSON Schema for editors).

Run ``python -m hyperscan.runcard.reference`` in the repository after changing the schema; a
test fails while either file is not current.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import yaml
from pydantic import BaseModel, TypeAdapter
from pydantic.fields import FieldInfo

from ._base import _number
from ._distributions import Choices, Range
from ._fit import FitRuncard
from ._load import _Dumper, _is_model, _unwrap
from ._methodologies import MEMBER_KEYS, Methodology
from ._scan import ScanRuncard, ScanSection
from ._searchable import _fit_settings, _fixed_reason, _scalar_settings

__all__ = ["COMMAND", "documents", "json_schema", "markdown", "write"]

#: What regenerates the files (named by the test that checks them).
COMMAND = "python -m hyperscan.runcard.reference"
SCHEMA_FILE = "runcard.schema.json"
#: Placeholders for the keys of a mapping section, by the field's name.
_KEY_NAMES = {"preprocessing": "<flavour>", "optimizer": "<optimizer>", "parameters": "<setting>"}
#: A default longer than this is shown below the table instead of in it.
_WIDEST_DEFAULT = 48


def _text(description: str | None) -> str:
    return " ".join((description or "").split())


def _shown(value: Any) -> str:
    """A default as a runcard writes it, lists and mappings in YAML flow style."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, list | dict):
        return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    return _number(value)


# --------------------------------------------------------------------------------------------
# Types in words, from the JSON Schema of a field


def _bounds(schema: dict[str, Any]) -> str:
    words = [
        f"{symbol} {_number(schema[key])}"
        for key, symbol in (
            ("minimum", "≥"),
            ("exclusiveMinimum", ">"),
            ("maximum", "≤"),
            ("exclusiveMaximum", "<"),
        )
        if key in schema
    ]
    return f" {', '.join(words)}" if words else ""


def _type(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name in ("Range", "Choices"):
            return "RANGE" if name == "Range" else "choices"
        target = defs[name]
        return "section" if "properties" in target else _type(target, defs)
    for union in ("anyOf", "oneOf"):
        if union in schema:
            parts = list(dict.fromkeys(_type(part, defs) for part in schema[union]))
            return " or ".join(parts)
    if "enum" in schema:
        return "one of " + ", ".join(f"`{value}`" for value in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type")
    if kind in ("integer", "number"):
        return kind + _bounds(schema)
    if kind == "array":
        if "prefixItems" in schema:
            items = list(dict.fromkeys(_type(item, defs) for item in schema["prefixItems"]))
            if len(items) == 1:
                return f"[lo, hi] of {items[0]}"
            return "[" + ", ".join(items) + "]"
        text = f"list of {_type(schema.get('items', {}), defs)}"
        if schema.get("minItems"):
            text += f", at least {schema['minItems']}"
        if "maxItems" in schema:
            text += f", at most {schema['maxItems']}"
        return text
    if kind == "object" and "properties" in schema:
        return "section"
    if kind == "object":
        values = _type(schema.get("additionalProperties", {}), defs)
        keys = schema.get("propertyNames", {})
        return f"mapping of {_type(keys, defs) if keys else 'string'} to {values}"
    return {"boolean": "boolean", "string": "string", "null": "null"}.get(str(kind), "any")


def _field_type(field: FieldInfo) -> str:
    annotation = field.annotation
    if field.metadata:
        annotation = Annotated[(annotation, *field.metadata)]
    schema = TypeAdapter(annotation).json_schema()
    return _type(schema, schema.get("$defs", {}))


# --------------------------------------------------------------------------------------------
# The tables


def _default(field: FieldInfo, long: dict[str, Any], path: str, merged: bool) -> str:
    if field.is_required():
        return "below" if merged else "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return ""
    value = TypeAdapter(Any).dump_python(value, mode="json")
    shown = _shown(value)
    if len(shown) > _WIDEST_DEFAULT:
        long[path] = value
        return "below"
    return f"`{shown}`"


def _model_inside(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """The model a field holds, and how: directly (""), as the values of a ``mapping`` or as
    the entries of a ``list``. Ranges and choices are explained apart."""
    leaf, _ = _unwrap(annotation)
    if _is_model(leaf):
        return leaf, ""
    origin = get_origin(leaf)
    args = [_unwrap(arg)[0] for arg in get_args(leaf) if arg is not Ellipsis]
    if origin is dict and _is_model(args[1]) and args[1] not in (Range, Choices):
        return args[1], "mapping"
    if origin is tuple and len(args) == 1 and _is_model(args[0]):
        return args[0], "list"
    return None, ""


def _rows(
    model: type[BaseModel], prefix: str, long: dict[str, Any], merged: bool = False
) -> list[str]:
    """Table rows of ``model``'s keys under ``prefix``; ``merged``: the keys of an entry of a
    mapping whose default fills in what an entry leaves out (``preprocessing``)."""
    rows = []
    taken = model.model_json_schema()["properties"]  # without inherited keys a model refuses
    for name, field in model.model_fields.items():
        if name not in taken:
            continue
        path = f"{prefix}.{name}" if prefix else name
        rows.append(
            f"| `{path}` | {_field_type(field)} | {_default(field, long, path, merged)} "
            f"| {_text(field.description)} |"
        )
        inner, held = _model_inside(field.annotation)
        if inner is not None and model is not Methodology:  # its sections are listed above
            below = {"": path, "list": f"{path}[]"}.get(held) or f"{path}.{_KEY_NAMES[name]}"
            rows += _rows(inner, below, long, held == "mapping" and not field.is_required())
    return rows


_HEADER = "| key | type | default | description |\n|---|---|---|---|"


def markdown() -> str:
    """docs/runcard.md."""
    long: dict[str, Any] = {}
    fit = "\n".join(_rows(FitRuncard, "", long))
    scan = "\n".join(_rows(ScanSection, "scan", long))
    distributions = "\n".join(_rows(Range, "", long) + _rows(Choices, "", long))
    fixed: dict[str, list[str]] = {}  # reason: the paths it fixes, a section's once
    for path in _fit_settings():
        reason = _fixed_reason(path)
        if reason is not None and _fixed_reason(path.rpartition(".")[0]) != reason:
            fixed.setdefault(reason, []).append(f"`{path}`")
    cannot = "\n".join(f"- {', '.join(paths)}: {reason}" for reason, paths in fixed.items())
    searchable = ", ".join(f"`{path}`" for path in _scalar_settings())
    defaults = "\n\n".join(
        f"`{path}`:\n\n```yaml\n{yaml.dump(value, Dumper=_Dumper, sort_keys=False).strip()}\n```"
        for path, value in long.items()
    )
    return f"""# Runcard reference

<!-- Generated from the runcard schema (hyperscan/runcard) by `{COMMAND}`; do not edit. -->

Runcards are YAML. Every key is optional (in a scan runcard, except a non-empty `scan.space`)
and defaults to NNPDF4.0's choice. Unknown keys, wrong types and out-of-range values are
errors, all reported at once with their key paths. Numbers are read as YAML 1.2 reads them:
floats may be written `1e-6`, and integers are decimal (`010` is 10, not YAML 1.1's octal 8;
`1:30` is a string, not 90).

**In an editor:** [`{SCHEMA_FILE}`]({SCHEMA_FILE}) is a JSON Schema of fit and scan runcards,
with these descriptions: editors that speak the YAML language server (VS Code's YAML
extension, Neovim, Emacs, Helix) complete keys and flag mistakes as you type. Point a runcard at
it with a first line such as

```yaml
# yaml-language-server: $schema=../docs/{SCHEMA_FILE}
```

(a path relative to the runcard, or the file's URL), or for a whole folder in VS Code's
settings: `"yaml.schemas": {{"docs/{SCHEMA_FILE}": ["studies/*.yml"]}}`. The schema checks types,
ranges and keys; rules that span keys (say `positivity.max >= initial`) are checked by
hyperscan when it reads the runcard.

## Fit runcard

{_HEADER}
{fit}

### Per-replica methodologies

`methodologies` gives each replica its own methodology, all fitted in one batched model: one
entry per replica, in the order of `replicas`. An entry sets what its replica changes; each
section it names is merged key by key over the runcard's (an `optimizer` with only
`learning_rate` keeps the runcard's optimiser; `architecture: {{nodes: [30]}}` gets tanh, as at
the top level), and `trial` says which scan trial it came from (`hyperscan export --sample`
writes it; `results.json` repeats it per member).

```yaml
replicas: [1, 2, 3]
optimizer: {{name: adam, learning_rate: 1.0e-2}}
methodologies:
  - {{}}  # replica 1: the runcard as written
  - {{optimizer: {{learning_rate: 1.0e-3}}}}  # replica 2: adam at 1e-3
  - {{architecture: {{nodes: [30]}}, epochs: 900, trial: 12}}
```

An entry may set {", ".join(f"`{key}`" for key in MEMBER_KEYS)} and `trial`;
`data`, `training`, `divergence`, `folds` and `replicas` are the same for all replicas and
refused there. Each entry must make a valid runcard with the rest: a mistake is reported at
its path, say `methodologies[2].optimizer.learning_rate`, and a list whose length is not the
number of replicas is refused. A scan runcard has no `methodologies` (each trial draws its
own).

## Scan runcard: a fit runcard plus `scan:`

A scan runcard is a fit runcard, the base runcard of every trial, with a `scan:` section
beside its keys saying what each trial draws.

{_HEADER}
{scan}

### RANGE and choices

Each searched setting takes a RANGE, `{{low, high, log: false, step: null}}`, or a choice,
`{{choices: [...]}}`.

{_HEADER}
{distributions}

### What a scan cannot search

What a study fixes cannot be searched through `scan.space.parameters` (the error says where it
is set instead), and neither can `optimizer.*` when `scan.space.optimizer` is given:

{cannot}

Searchable through `scan.space.parameters`: {searchable}.

Each searched value's ends are checked on the base runcard when the runcard is read; a trial
whose drawn values break a rule together (a drawn `positivity.max` below a drawn `initial`) is
trashed with the rule, and `study create` and `scan` refuse a new study whose space breaks one
in all of 256 seeded joint draws.

## Long defaults

{defaults}
"""


# --------------------------------------------------------------------------------------------
# The JSON Schema


def _collapsed(node: Any) -> Any:
    """The schema with descriptions on one line, pydantic's titles dropped, and ``anyOf`` for
    its ``oneOf``: an integer is a JSON Schema number too, so ``oneOf`` would refuse it where
    a bound may be either."""
    if isinstance(node, dict):
        return {
            "anyOf" if key == "oneOf" else key: (
                " ".join(value.split()) if key == "description" else _collapsed(value)
            )
            for key, value in node.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(node, list):
        return [_collapsed(item) for item in node]
    return node


def json_schema() -> dict[str, Any]:
    """docs/runcard.schema.json: a fit runcard, or a scan runcard (a fit runcard with ``scan``)."""
    schema = ScanRuncard.model_json_schema()
    defs = schema["$defs"]
    fit = defs.pop("FitRuncard")
    properties = {**fit["properties"], "scan": schema["properties"]["scan"]}
    for node in [properties, *(section.get("properties", {}) for section in defs.values())]:
        for field in node.values():  # pydantic leaves out a description equal to the section's
            if "$ref" in field and "description" not in field:
                field["description"] = defs[field["$ref"].rsplit("/", 1)[-1]]["description"]
    for section in defs.values():  # the code's docstrings; the fields say it for users
        section.pop("description", None)
    return _collapsed(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "hyperscan runcard",
            "description": "A hyperscan fit runcard, or a scan runcard: a fit runcard (the "
            "base of every trial) with a 'scan' section. Reference: docs/runcard.md.",
            "type": "object",
            "additionalProperties": False,
            "properties": properties,
            "$defs": defs,
        }
    )


def documents() -> dict[str, str]:
    """The generated files, by name in docs/."""
    schema = json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
    return {"runcard.md": markdown(), SCHEMA_FILE: schema}


def write(folder: Path) -> None:
    """Write the generated files into ``folder`` (docs/)."""
    for name, text in documents().items():
        (folder / name).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs"))
