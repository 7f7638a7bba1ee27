"""Which arrays of an ensemble carry the member axis, and how to keep some members of them all.

A fit drops its stopped members from the batch: every per-member array must then
shrink with the batch, or the members would silently mix. Each class holding such arrays
declares them in a ``member_axis`` class attribute, and `take_members` keeps the chosen members
of every declared one; tests/fit/test_compaction.py checks that after a selection no array
anywhere in a model or trainer still has the old number of members, so an array added later
without its declaration fails there, not in a fit.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import tensorflow as tf

T = TypeVar("T")


@dataclass(frozen=True)
class MemberAxis:
    """The attributes of a class that carry the member axis.

    arrays: attribute name → the axis of its members, for numpy arrays and TF tensors.
    nested: attributes holding objects (or tuples of objects, or None) that declare their own.
    then: a method of the copy to call with the members taken, for what derives from the
        taken arrays (so no caller reaches into the copy's private state).
    """

    arrays: Mapping[str, int] = field(default_factory=dict)
    nested: tuple[str, ...] = ()
    then: str | None = None


def take_members(obj: T, members: np.ndarray) -> T:
    """A shallow copy of `obj` with only `members` (indices, in that order) along every member
    axis it declares, recursively; what it does not declare is shared with `obj`.

    Raises TypeError for an object that declares nothing (``member_axis`` missing), so that a
    new kind of plan segment cannot be passed over unnoticed.
    """
    if obj is None:  # an optional part that is absent stays absent
        return None
    if isinstance(obj, tuple | list):
        return type(obj)(take_members(item, members) for item in obj)
    declared = getattr(type(obj), "member_axis", None)
    if not isinstance(declared, MemberAxis):
        raise TypeError(f"{type(obj).__name__} does not declare its member axes (member_axis)")
    members = np.asarray(members, dtype=np.int64)
    taken = copy.copy(obj)
    for name, axis in declared.arrays.items():
        object.__setattr__(taken, name, _take(getattr(obj, name), members, axis))
    for name in declared.nested:
        object.__setattr__(taken, name, take_members(getattr(obj, name), members))
    if declared.then is not None:
        getattr(taken, declared.then)(members)
    return taken


def _take(value: Any, members: np.ndarray, axis: int) -> Any:
    if isinstance(value, tf.Tensor | tf.Variable):
        return tf.gather(value, members, axis=axis)
    return np.take(value, members, axis=axis)
