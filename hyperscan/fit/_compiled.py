"""One compiled function per loop definition in a process, whichever fit traced it.

TensorFlow names every function it traces, and the loops and placeholders inside it, with a
counter that runs on through the process, and XLA keys its compilations by those names: two
fits of one shape in one process compiled the same loop twice (4-5 s of a CPU each for a
test-size DIS fit), as a one-slot worker did for every trial of an architecture it had fitted
before. So a freshly traced loop is looked up by its definition, the counter's numbers taken
out; where an earlier trace had the same, that trace's function, compiled already, runs on
this trace's captured tensors and variables, which it takes as arguments in the same order.
Only definitions are kept: an earlier fit's tensors go with its loop. It also spares memory:
TensorFlow keeps every loop it compiles, about 19 MB of a process for a tiny fit, so twelve fits
of one architecture grew a process by 209 MB, and now by none.

The one module that reaches into TensorFlow's internals (its counter, a concrete function's
runtime function and trace), on the TensorFlow release pyproject.toml pins;
tests/test_internals.py keeps them here.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf
from google.protobuf import text_format
from tensorflow.python.framework import ops

# Loop definitions kept, each about 2 MB of a process beyond what TensorFlow keeps of every
# compiled loop (tiny fits of twelve architectures: 19.5 against 17.9 MB of RSS per fit).
CAPACITY = 64

_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_NUMBER = re.compile(r"\d+")
_UNMATCHED = itertools.count()


class _Definitions:
    """Compiled functions by the digest of their definitions, least recently used first."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._functions: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def function(self, digest: str, traced: Any) -> Any:
        """The function kept under `digest`, or `traced` (an AtomicFunction), kept from now."""
        with self._lock:
            kept = self._functions.get(digest)
            if kept is not None:
                self._functions.move_to_end(digest)
                return kept
            for function in _with_children(traced):
                # What its trace captured is this fit's; the definition is all a call needs.
                function._cached_graph = None
            self._functions[digest] = traced
            if len(self._functions) > self._capacity:
                self._functions.popitem(last=False)
            return traced


_DEFINITIONS = _Definitions(CAPACITY)


class SharedFunction:
    """A trace's loop as it runs: the compiled function of its definition, called on the
    trace's own captured tensors and variables."""

    def __init__(self, function: Any, captures: list[tf.Tensor]) -> None:
        self.function = function  # an AtomicFunction, the same for every trace it matches
        self._captures = captures

    def __call__(self, *args: tf.Tensor) -> Any:
        return self.function.call_preflattened([*args, *self._captures])


def shared_function(trace: Callable[[], Any]) -> SharedFunction:
    """Trace a concrete function (`trace()`) and return what runs it: the function of an
    earlier trace with this one's definition, compiled already, if there was one. It takes
    tensors, in the concrete function's order."""
    start = ops.uid()
    concrete = trace()
    end = ops.uid()
    traced = concrete._inference_function
    digest = _digest(concrete, traced, range(start, end))
    return SharedFunction(_DEFINITIONS.function(digest, traced), concrete.captured_inputs)


def _digest(concrete: Any, traced: Any, counters: range) -> str:
    """What identifies a trace's compiled function: its definitions, with the numbers the
    trace drew from TensorFlow's counter (`counters`) made relative, and the types and shapes
    of what it captured, variables included."""
    digest = hashlib.sha256()
    for function in _with_children(traced):
        digest.update(_relative(text_format.MessageToString(function.cached_definition), counters))
    variables = {id(variable.handle): variable for variable in concrete.graph.variables}
    signatures = [_signature(t, variables) for t in concrete.captured_inputs]
    digest.update(repr(signatures).encode())
    return digest.hexdigest()


def _signature(captured: tf.Tensor, variables: dict[int, tf.Variable]) -> tuple:
    """A captured tensor's type and shape; a variable's (its handle is what is captured, and
    `variables` are the trace's by their handles' ids), or, for a resource not among them, a
    number no other trace draws: then no other trace is taken to match this one."""
    if captured.dtype != tf.resource:
        return captured.dtype.name, tuple(captured.shape)
    variable = variables.get(id(captured))
    if variable is None:
        return "resource", next(_UNMATCHED)
    return variable.dtype.name, tuple(variable.shape)


def _relative(definition: str, counters: range) -> bytes:
    """`definition` with every number from `counters` in its names and strings replaced by
    its offset in the range: the same loop traced later differs from it in those alone.
    Tensor contents (raw bytes, shown escaped) are left as they are."""

    def offset(number: re.Match) -> str:
        value = int(number.group())
        return f"#{value - counters.start}" if value in counters else number.group()

    def strings(quoted: re.Match) -> str:
        return _NUMBER.sub(offset, quoted.group())

    lines = (
        line if line.lstrip().startswith("tensor_content:") else _QUOTED.sub(strings, line)
        for line in definition.splitlines()
    )
    return "\n".join(lines).encode()


def _with_children(function: Any) -> Iterator[Any]:
    """An AtomicFunction and those it calls (a loop's condition and body), depth first."""
    yield function
    for child in function.children:
        yield from _with_children(child)
