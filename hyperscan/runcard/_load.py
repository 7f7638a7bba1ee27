# SPDX-License-Identifier: GPL-3.0-or-later
"""Loading, validating and dumping runcards, with errors written for the person who wrote them.

pydantic's errors are precise but speak pydantic (``Input should be a valid integer``, union
branch names, documentation URLs); :class:`RuncardError` restates each one as a key path in
the runcard and a sentence saying what was expected and what was found.
"""

from __future__ import annotations

import difflib
import os
import re
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, Tag, ValidationError

from ._base import RULE_ERROR, UNION_ERROR, Inlined, _number
from ._fit import FitRuncard

M = TypeVar("M", bound=BaseModel)


class RuncardError(Exception):
    """Everything wrong with one runcard, so a user fixes all mistakes in one go.

    ``problems`` is a list of ``(key_path, message)``; ``key_path`` is ``""`` for problems with
    the file as a whole. ``path`` is the file read, or None when the runcard came from a string
    or a dict; ``source`` is the name used in the message.
    """

    def __init__(
        self,
        problems: Iterable[tuple[str, str]],
        path: str | None = None,
        source: str | None = None,
    ) -> None:
        self.problems: list[tuple[str, str]] = list(problems)
        self.path = path
        self.source = source if source is not None else (path or "<runcard>")
        super().__init__(self.problems, path, source)

    def __str__(self) -> str:
        return "\n".join(
            f"{self.source}: {key}: {message}" if key else f"{self.source}: {message}"
            for key, message in self.problems
        )


# --------------------------------------------------------------------------------------------
# YAML

_FLOAT_TAG = "tag:yaml.org,2002:float"
_INT_TAG = "tag:yaml.org,2002:int"
_MERGE_TAG = "tag:yaml.org,2002:merge"

#: YAML 1.2 floats (``1e-6``, ``1.0e6``, ``.5``, ``-3E+2``, ``.inf``, ``.nan``), which YAML 1.1
#: would load as strings, with underscores between digits allowed as in Python.
_FLOAT_RE = re.compile(
    r"""^(?:
        [-+]?(?:[0-9][0-9_]*\.[0-9_]*|\.[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)?
      | [-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
      | [-+]?\.(?:inf|Inf|INF)
      | \.(?:nan|NaN|NAN)
    )$""",
    re.VERBOSE,
)
#: YAML 1.2 integers are decimal: YAML 1.1 reads ``010`` as 8 and ``1:30`` as 90, which no
#: runcard means. Hexadecimal, octal and sexagesimal forms stay strings (and fail as such).
_INT_RE = re.compile(r"^[-+]?[0-9][0-9_]*$")
#: Python refuses longer decimal strings (CVE-2020-10735); far beyond any runcard value.
_MAX_INT_DIGITS = 100


def _resolvers_with_yaml12_numbers() -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    """PyYAML's implicit resolvers with the int and float ones replaced (ints first)."""
    table = {
        first: [(tag, regexp) for tag, regexp in entries if tag not in (_INT_TAG, _FLOAT_TAG)]
        for first, entries in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    for first in "-+0123456789":
        table.setdefault(first, []).append((_INT_TAG, _INT_RE))
    for first in "-+0123456789.":
        table.setdefault(first, []).append((_FLOAT_TAG, _FLOAT_RE))
    return table


class _Loader(yaml.SafeLoader):
    """Safe loader that reads numbers as YAML 1.2 does."""

    yaml_implicit_resolvers = _resolvers_with_yaml12_numbers()

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        text = str(self.construct_scalar(node))
        digits = text.replace("_", "").lstrip("+-")
        if not _INT_RE.match(text):
            problem = f"{text!r} is not a decimal integer"
        elif len(digits) > _MAX_INT_DIGITS:
            problem = f"an integer of {len(digits)} digits"
        else:
            return int(text.replace("_", ""), 10)
        raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)


_Loader.add_constructor(_INT_TAG, _Loader.construct_yaml_int)


class _Dumper(yaml.SafeDumper):
    """Safe dumper that quotes any string :class:`_Loader` would read as a number."""

    yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    """Lists of scalars in flow style (``nodes: [25, 20]``), everything else as blocks."""
    flow = all(not isinstance(item, list | dict) for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def _line(mark: yaml.Mark | None) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else "an unknown position"


def _yaml_problem(err: yaml.YAMLError) -> str:
    if isinstance(err, yaml.MarkedYAMLError):
        mark = err.problem_mark or err.context_mark
        what = err.problem or err.context or "syntax error"
        text = f"invalid YAML at {_line(mark)}: {what}"
        if err.problem and err.context and err.context_mark:
            text += f" ({err.context} at line {err.context_mark.line + 1})"
        return text
    return f"invalid YAML: {' '.join(str(err).split())}"


def _duplicate_keys(node: yaml.Node, path: str, seen: set[int]) -> list[tuple[str, str]]:
    """Repeated keys in any mapping; PyYAML would silently keep only the last value."""
    if id(node) in seen:  # aliases share nodes; visit each once
        return []
    seen.add(id(node))
    problems: list[tuple[str, str]] = []
    if isinstance(node, yaml.MappingNode):
        first_line: dict[tuple[str, str], int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                continue  # merged keys may be overridden on purpose
            name = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
            key_path = _join_key(path, name)
            if isinstance(key_node, yaml.ScalarNode):
                key = (key_node.tag, key_node.value)
                line = key_node.start_mark.line + 1
                if key in first_line:
                    lines = (
                        f"twice on line {line}"
                        if first_line[key] == line
                        else f"lines {first_line[key]} and {line}"
                    )
                    problems.append(
                        (
                            key_path,
                            f"duplicate key '{name}' ({lines}); "
                            "each key may appear only once in a mapping",
                        )
                    )
                else:
                    first_line[key] = line
            problems += _duplicate_keys(value_node, key_path, seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            problems += _duplicate_keys(item, f"{path}[{index}]", seen)
    return problems


def _parse_yaml(text: str, source: str, path: str | None) -> Any:
    """YAML text to Python data, or a :class:`RuncardError` for empty or malformed text."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise RuncardError(
                [("", "the runcard is empty; write '{}' for an all-defaults fit")], path, source
            )
        problems = _duplicate_keys(node, "", set())
        if problems:
            raise RuncardError(problems, path, source)
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        raise RuncardError([("", _yaml_problem(err))], path, source) from None
    except RecursionError:
        raise RuncardError([("", "invalid YAML: nested too deeply")], path, source) from None
    finally:
        loader.dispose()


# --------------------------------------------------------------------------------------------
# Translating pydantic errors


def _join_key(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _unwrap(tp: Any) -> tuple[Any, list[Any]]:
    """Strip ``Annotated`` (returning its metadata) and ``| None``."""
    metadata: list[Any] = []
    while True:
        if get_origin(tp) is Annotated:
            tp, *extra = get_args(tp)
            metadata += extra
        elif _is_union(tp) and sum(arg is not type(None) for arg in get_args(tp)) == 1:
            tp = next(arg for arg in get_args(tp) if arg is not type(None))
        else:
            return tp, metadata


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _inlining(model: Any, name: Any) -> Inlined | None:
    field = model.model_fields.get(name) if _is_model(model) else None
    marks = [m for m in field.metadata if isinstance(m, Inlined)] if field is not None else []
    return marks[0] if marks else None


def _inlined(model: Any, name: Any) -> Any:
    """The model of ``model``'s field ``name`` if its keys are written inline, else None."""
    return model.model_fields[name].annotation if _inlining(model, name) else None


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    """The keys a runcard writes for ``model``, inlined fields replaced by their own keys."""
    fields: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        mark = _inlining(model, name)
        if mark is None:
            fields[name] = field
            continue
        inner = _fields(field.annotation)
        fields.update({key: value for key, value in inner.items() if key not in mark.without})
    return fields


def _resolve(root: type[BaseModel], loc: tuple[Any, ...]) -> tuple[str, Any, Any]:
    """Follow a pydantic ``loc`` through the schema.

    Returns the key path as the user wrote it (union tags and ``[key]`` markers dropped), the
    type found at the end (None if unknown) and the type holding the last key (for listing
    allowed keys).
    """
    path = ""
    tp: Any = root
    parent: Any = None
    outer: Any = None  # the model whose inlined field tp is
    segments = list(loc)
    i = 0
    while i < len(segments):
        segment = segments[i]
        tp, _ = _unwrap(tp) if tp is not None else (None, [])
        if _is_union(tp):
            branches = {
                tag.tag: arg
                for arg in get_args(tp)
                for tag in _unwrap(arg)[1]
                if isinstance(tag, Tag)
            }
            if segment in branches:
                tp = branches[segment]
                i += 1
            else:
                tp = None
            continue
        inner = _inlined(tp, segment)
        if inner is not None:
            outer, tp = tp, inner
            i += 1
            continue
        parent, outer = (tp if outer is None else outer), None
        if isinstance(segment, int) and not _is_model(tp) and get_origin(tp) is not dict:
            path += f"[{segment}]"
            if get_origin(tp) in (tuple, list):
                args = [a for a in get_args(tp) if a is not Ellipsis]
                tp = args[0] if len(args) == 1 else (args[segment] if segment < len(args) else None)
            else:
                tp = None
        elif segment == "[key]":
            tp = get_args(tp)[0] if get_origin(tp) is dict else None
        else:
            path = _join_key(path, segment)
            if _is_model(tp):
                field = tp.model_fields.get(segment)
                tp = field.annotation if field is not None else None
            elif get_origin(tp) is dict:
                if i + 1 < len(segments) and segments[i + 1] == "[key]":
                    tp = get_args(tp)[0]
                    i += 1
                else:
                    tp = get_args(tp)[1]
            else:
                tp = None
        i += 1
    leaf, _ = _unwrap(tp) if tp is not None else (None, [])
    return path, leaf, parent


def _describe(value: Any) -> str:
    """What the user wrote, in words: 'the string '100'', 'the boolean true', 'a list'."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {_number(value)}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__} ({value})"


def _suggest(word: Any, choices: list[str]) -> str:
    """' (did you mean 'x'?)' for the closest choice, case-insensitively, or ''."""
    if not isinstance(word, str):
        return ""
    lowered = {choice.lower(): choice for choice in choices}
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return f" (did you mean '{lowered[match[0]]}'?)" if match else ""


def _choices(tp: Any) -> list[str] | None:
    if get_origin(tp) is Literal:
        return [str(arg) for arg in get_args(tp)]
    return None


def _unknown_key(key: Any, allowed: list[str] | None) -> str:
    text = f"unknown key {key!r}"
    if allowed:
        text += _suggest(key, allowed) + "; allowed keys: " + ", ".join(allowed)
    return text


_TYPE_NAMES = {
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean (true or false)",
    "string_type": "a string",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}

_BOUNDS = {
    "greater_than": ("gt", ">"),
    "greater_than_equal": ("ge", ">="),
    "less_than": ("lt", "<"),
    "less_than_equal": ("le", "<="),
}


def _optional(parent: Any, loc: tuple[Any, ...]) -> bool:
    """Whether the key at ``loc`` is a field its model gives a default. Not an entry of a
    mapping: leaving out `scan.space.optimizer.adam` would not search adam with defaults."""
    field = _fields(parent).get(loc[-1]) if _is_model(parent) and loc else None
    return field is not None and not field.is_required()


def _message(error: dict[str, Any], leaf: Any, parent: Any) -> str:
    """One pydantic error as a sentence: what was expected, what was found."""
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    loc = error["loc"]
    if kind == RULE_ERROR:
        return str(ctx["message"])
    if kind == UNION_ERROR:
        return f"{error['msg']}, got {_describe(value)}"
    if kind == "extra_forbidden":
        allowed = list(_fields(parent)) if _is_model(parent) else None
        return _unknown_key(loc[-1], allowed)
    if kind == "literal_error" and loc and loc[-1] == "[key]":
        return _unknown_key(value, _choices(leaf))
    if kind == "invalid_key":
        return f"keys must be strings, got {_describe(value)}"
    if kind == "literal_error":
        choices = _choices(leaf)
        if choices is None:
            return f"expected {ctx.get('expected')}, got {_describe(value)}"
        shown = ", ".join(repr(c) for c in choices)
        return f"expected one of {shown}; got {_describe(value)}{_suggest(value, choices)}"
    if kind in _TYPE_NAMES:
        text = f"expected {_TYPE_NAMES[kind]}, got {_describe(value)}"
        if kind in ("model_type", "dict_type") and value is None and _optional(parent, loc):
            text += " (leave the section out to use its defaults)"
        if kind == "int_type" and isinstance(value, float) and value.is_integer():
            text += f" (write {int(value)})"
        return text
    if kind in _BOUNDS:
        name, symbol = _BOUNDS[kind]
        return f"must be {symbol} {_number(ctx[name])}, got {_number(value)}"
    if kind == "finite_number":
        return f"must be a finite number, got {_number(value)}"
    if kind == "too_short":
        minimum = ctx.get("min_length")
        if minimum == 1:
            return "must not be empty"
        return f"must have at least {minimum} entries, got {ctx.get('actual_length')}"
    if kind == "too_long":
        return f"must have at most {ctx.get('max_length')} entries, got {ctx.get('actual_length')}"
    if kind == "missing":
        return "required key is missing"
    return str(error["msg"])


def _below(path: str, ancestor: str) -> bool:
    return path == ancestor or path.startswith((f"{ancestor}.", f"{ancestor}["))


def _problems(model: type[BaseModel], err: ValidationError) -> list[tuple[str, str]]:
    """The user-facing problems of a validation error, without pydantic's follow-on noise."""
    found: list[tuple[str, str, str]] = []  # (path, error type, message)
    for error in err.errors(include_url=False):
        loc = tuple(error["loc"])
        if error["type"] == RULE_ERROR and (error.get("ctx") or {}).get("field"):
            loc += tuple(str(error["ctx"]["field"]).split("."))
        path, leaf, parent = _resolve(model, loc)
        unknown = error["type"] == "extra_forbidden" or (
            error["type"] == "literal_error" and loc[-1:] == ("[key]",)
        )
        found.append((path, "unknown" if unknown else error["type"], _message(error, leaf, parent)))
    # Nothing more to say about what is under an unknown key.
    unknown_paths = [path for path, kind, _ in found if kind == "unknown"]
    found = [
        item
        for item in found
        if item[1] == "unknown" or not any(_below(item[0], u) for u in unknown_paths)
    ]
    # pydantic counts list entries *after* validation: "too short" follows entry errors.
    found = [
        item
        for item in found
        if item[1] != "too_short"
        or not any(other[0] != item[0] and _below(other[0], item[0]) for other in found)
    ]
    problems: list[tuple[str, str]] = []
    for path, _, message in found:
        if (path, message) not in problems:
            problems.append((path, message))
    return problems


# --------------------------------------------------------------------------------------------
# Entry points (generic in the model, so a scan runcard reuses them)


def _validate(model: type[M], data: Any, source: str, path: str | None = None) -> M:
    if not isinstance(data, dict):
        found = _describe(data)
        problem = f"expected a mapping of runcard sections at the top level, got {found}"
        raise RuncardError([("", problem)], path, source)
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise RuncardError(_problems(model, err), path, source) from None


def _read(path: str | os.PathLike[str]) -> tuple[str, str]:
    """The text of a runcard file, or a :class:`RuncardError` saying why it cannot be read."""
    name = os.fspath(path)
    try:
        return Path(name).read_text(encoding="utf-8"), name
    except FileNotFoundError:
        reason = "file not found"
    except IsADirectoryError:
        reason = "cannot read the runcard: it is a directory"
    except PermissionError:
        reason = "cannot read the runcard: permission denied"
    except UnicodeDecodeError as err:
        reason = f"cannot read the runcard: not UTF-8 text (byte {err.start})"
    except OSError as err:
        reason = f"cannot read the runcard: {err.strerror or err}"
    raise RuncardError([("", reason)], name, name)


def _load(model: type[M], path: str | os.PathLike[str]) -> M:
    text, name = _read(path)
    return _validate(model, _parse_yaml(text, name, name), name, name)


def _parse(model: type[M], text: str, source: str) -> M:
    return _validate(model, _parse_yaml(text, source, None), source)


def read_value(text: str, source: str) -> Any:
    """One value written as a runcard would write it (``20000``, ``1e-3``, ``[30, 20]``,
    ``null``); ``source`` names it in the :class:`RuncardError` for malformed YAML."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as err:
        raise RuncardError([("", _yaml_problem(err))], None, source) from None


def load_fit_runcard(path: str | os.PathLike[str]) -> FitRuncard:
    """Read and validate a fit runcard file; raises :class:`RuncardError`."""
    return _load(FitRuncard, path)


def parse_fit_runcard(text: str, source: str = "<string>") -> FitRuncard:
    """Validate fit-runcard YAML text; ``source`` names it in error messages."""
    return _parse(FitRuncard, text, source)


def runcard_from_dict(data: dict[str, Any], source: str = "<dict>") -> FitRuncard:
    """Validate already-parsed runcard data (e.g. a scan trial's settings)."""
    return _validate(FitRuncard, data, source)


def dump_runcard(runcard: BaseModel, header: str | None = None) -> str:
    """YAML text, keys in schema order, that loads back to an equal runcard.

    Every setting is written, defaults included, so the file records the fit completely even if
    defaults change later. ``header`` lines become ``# `` comments at the top.
    """
    body = yaml.dump(
        runcard.model_dump(mode="json"),
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )
    if header is None:
        return body
    comments = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    return comments + body
