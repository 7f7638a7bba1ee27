"""The layering docs/architecture.md promises, checked on the source.

hyperscan's packages form a chain, runcard → data → model → fit → pdfset → score → scan → report
→ cli: each imports only from itself and the packages before it, and from those only their public
names, so a package can be read, tested and changed knowing only what comes before it. Public
functions carry type hints: they are the contracts between the layers.
"""

import ast
import importlib
import inspect
from collections.abc import Callable
from pathlib import Path

import hyperscan

LAYERS = ("runcard", "data", "model", "fit", "pdfset", "score", "scan", "report", "cli")
# Shared by every layer: the version, the file-permission helper and TensorFlow's quiet import
# (never the top package, which loads the API of the later layers).
COMMON = ("hyperscan._version", "hyperscan._files", "hyperscan._tensorflow")
ROOT = Path(hyperscan.__file__).parent


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of everything the file imports from hyperscan: modules, and the
    names taken from them; relative imports resolved."""
    package = path.relative_to(ROOT.parent).parent.parts
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] == "hyperscan"]


def _violations() -> list[str]:
    found = []
    for position, layer in enumerate(LAYERS):
        for path in sorted((ROOT / layer).rglob("*.py")):
            for line, name in _imports(path):
                where = f"{path.relative_to(ROOT.parent)}:{line} imports {name}"
                parts = name.split(".")
                if name.rsplit(".", 1)[0] in COMMON or parts[1] == layer:
                    continue
                if parts[1] not in LAYERS:
                    found.append(f"{where}, from no layer")
                elif LAYERS.index(parts[1]) > position:
                    found.append(f"{where}, from a later layer")
                elif any(part.startswith("_") for part in parts[2:]):
                    found.append(f"{where}, a private name of another layer")
    return found


def test_every_package_is_a_layer():
    assert {path.parent.name for path in ROOT.glob("*/__init__.py")} == set(LAYERS)


def test_packages_import_only_public_names_of_earlier_layers():
    assert _violations() == []


def _unannotated(name: str, function: Callable) -> list[str]:
    signature = inspect.signature(function)
    missing = [
        f"{name}({parameter.name})"
        for parameter in signature.parameters.values()
        if parameter.name not in ("self", "cls") and parameter.annotation is inspect.Parameter.empty
    ]
    if signature.return_annotation is inspect.Signature.empty and function.__name__ != "__init__":
        missing.append(f"{name} (return)")
    return missing


def test_public_functions_have_type_hints():
    missing = []
    for layer in LAYERS:
        package = importlib.import_module(f"hyperscan.{layer}")
        for name in package.__all__:
            value = getattr(package, name)
            if inspect.isfunction(value):
                missing += _unannotated(f"{layer}.{name}", value)
            elif inspect.isclass(value):
                for attribute, member in vars(value).items():
                    if inspect.isfunction(member) and (
                        not attribute.startswith("_") or attribute == "__init__"
                    ):
                        missing += _unannotated(f"{layer}.{name}.{attribute}", member)
    assert missing == []
