# SPDX-License-Identifier: GPL-3.0-or-later
"""Fit and scan runcards: the YAML schema, validation with readable errors, loading, dumping.

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
from ._scan import (
    Choices,
    Distribution,
    ObjectiveSection,
    OptimizerSpace,
    PrunerSection,
    Range,
    SamplerSection,
    ScanDivergenceSection,
    ScanRuncard,
    ScanSection,
    SpaceSection,
    fit_part,
    load_runcard,
    load_scan_runcard,
    parse_scan_runcard,
    scan_runcard_from_dict,
    with_settings,
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
    "Choices",
    "ClosureSection",
    "DataSection",
    "Distribution",
    "DivergenceSection",
    "FitRuncard",
    "FlavourPreprocessing",
    "ObjectiveSection",
    "OptimizerSection",
    "OptimizerSpace",
    "PositivitySection",
    "PrunerSection",
    "Range",
    "RuncardError",
    "SamplerSection",
    "ScanDivergenceSection",
    "ScanRuncard",
    "ScanSection",
    "Seeds",
    "SpaceSection",
    "Stopping",
    "TrainingSection",
    "dump_runcard",
    "fit_part",
    "load_fit_runcard",
    "load_runcard",
    "load_scan_runcard",
    "parse_fit_runcard",
    "parse_scan_runcard",
    "runcard_from_dict",
    "scan_runcard_from_dict",
    "with_settings",
]
