# SPDX-License-Identifier: GPL-3.0-or-later
"""Fit runcards: the YAML schema, validation with readable errors, loading and dumping.

This package imports nothing else from hyperscan (nor numpy or TensorFlow), so any part of the
project, and any tool, can read a runcard cheaply.
"""

from ._load import (
    RuncardError,
    dump_runcard,
    load_fit_runcard,
    parse_fit_runcard,
    runcard_from_dict,
)
from ._schema import (
    FLAVOURS,
    Architecture,
    ClosureSection,
    DataSection,
    DivergenceSection,
    FitRuncard,
    FlavourPreprocessing,
    OptimizerSection,
    PositivitySection,
    Seeds,
    Stopping,
    TrainingSection,
)

__all__ = [
    "FLAVOURS",
    "Architecture",
    "ClosureSection",
    "DataSection",
    "DivergenceSection",
    "FitRuncard",
    "FlavourPreprocessing",
    "OptimizerSection",
    "PositivitySection",
    "RuncardError",
    "Seeds",
    "Stopping",
    "TrainingSection",
    "dump_runcard",
    "load_fit_runcard",
    "parse_fit_runcard",
    "runcard_from_dict",
]
