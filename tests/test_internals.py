# SPDX-License-Identifier: GPL-3.0-or-later
"""Only hyperscan.scan.storage touches Optuna's internals, and only hyperscan.fit._compiled
TensorFlow's, so that a release that renames one breaks a single module, whose tests say so.

Checked on the source: no other module imports a private Optuna or TensorFlow module
(``tensorflow.python``), names one (a logger), or reads a private attribute of another object
(``study._storage``, ``trial._trial_id``, ``concrete._inference_function``).
"""

import ast
import re
from pathlib import Path

import hyperscan

ROOT = Path(hyperscan.__file__).parent
STORAGE = ROOT / "scan" / "storage"
COMPILED = ROOT / "fit" / "_compiled.py"
_PRIVATE_MODULE = re.compile(r"^optuna(\.\w+)*\._|^tensorflow\.python\b")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _annotations(tree: ast.AST) -> set[int]:
    """The nodes of type annotations (``hashlib._Hash`` there reads no object)."""
    roots = [getattr(node, "returns", None) for node in ast.walk(tree)]
    roots += [
        node.annotation for node in ast.walk(tree) if isinstance(node, ast.arg | ast.AnnAssign)
    ]
    return {id(node) for root in roots if root is not None for node in ast.walk(root)}


def _touches(path: Path) -> list[str]:
    """Each place ``path`` reaches into Optuna's, TensorFlow's or another object's internals."""
    found = []
    tree = ast.parse(path.read_text(), str(path))
    in_annotations = _annotations(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        else:
            names = []
        found += [f"{node.lineno}: {name}" for name in names if _PRIVATE_MODULE.match(name)]
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and id(node) not in in_annotations
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            found.append(f"{node.lineno}: .{node.attr}")
    return [f"{path.relative_to(ROOT.parent)}:{where}" for where in found]


def test_only_the_storage_package_and_the_compiled_loops_touch_internals():
    outside = [
        path
        for path in sorted(ROOT.rglob("*.py"))
        if STORAGE not in path.parents and path != COMPILED
    ]
    assert outside, "no modules found"
    assert [touch for path in outside for touch in _touches(path)] == []


def test_the_check_sees_each_way_in():
    """The storage package does each of these: a check that found none there could not fail."""
    touches = "\n".join(touch for path in sorted(STORAGE.glob("*.py")) for touch in _touches(path))
    assert "optuna.storages._heartbeat" in touches  # a private module imported
    assert "optuna.study._optimize" in touches  # and named
    assert "._storage" in touches and "._trial_id" in touches  # private attributes


def test_the_compiled_loops_touch_tensorflow_alone():
    """The check sees them, and they reach into nothing but TensorFlow's functions."""
    touches = "\n".join(_touches(COMPILED))
    assert "tensorflow.python.framework" in touches
    assert "._inference_function" in touches
    assert "optuna" not in touches
