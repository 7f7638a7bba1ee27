# SPDX-License-Identifier: GPL-3.0-or-later
"""Fit and scan runcards: the YAML schema, validation with readable errors, loading, dumping.

This package imports nothing else from hyperscan (nor numpy or TensorFlow), so any part of the
project, and any tool, can read a runcard cheaply.
"""

from ._architecture import FLAVOURS, Architecture, FlavourPreprocessing
from ._base import MAX_THREADS
from ._data import DEFAULT_Q2MIN, DEFAULT_W2MIN, ClosureSection, DataSection
from ._distributions import Choices, Distribution, Range
from ._fit import FitRuncard
from ._load import (
    RuncardError,
    dump_runcard,
    load_fit_runcard,
    parse_fit_runcard,
    read_value,
    runcard_from_dict,
)
from ._methodologies import MEMBER_KEYS, Methodology
from ._n3fit import (
    N3FIT_VERSION,
    SHIPPED_THEORY_ID,
    TOY_PDF_SET,
    ImportedCard,
    N3fitCard,
    N3fitError,
    fit_to_n3fit,
    n3fit_to_hyperscan,
    read_n3fit_card,
    scan_to_n3fit,
    trial_to_n3fit,
)
from ._points import Dimension, NotInSpace, with_settings
from ._replicas import Seeds
from ._scan import (
    CLOSURE_LOSSES,
    LOSSES,
    N3FIT_LOSSES,
    PENALTIES,
    ObjectiveEntry,
    ObjectiveSection,
    PrunerSection,
    SamplerSection,
    ScanDivergenceSection,
    ScanRuncard,
    ScanSection,
    load_runcard,
    load_scan_runcard,
    parse_scan_runcard,
    scan_runcard_from_dict,
)
from ._slots import Slots, checked_slots
from ._space import OptimizerSpace, Space
from ._training import (
    LAMBDA_UPDATE_INTERVAL,
    BatchLayout,
    DivergenceSection,
    OptimizerSection,
    PositivitySection,
    Stopping,
    TrainingSection,
)

__all__ = [
    "CLOSURE_LOSSES",
    "DEFAULT_Q2MIN",
    "DEFAULT_W2MIN",
    "FLAVOURS",
    "LAMBDA_UPDATE_INTERVAL",
    "LOSSES",
    "MAX_THREADS",
    "MEMBER_KEYS",
    "N3FIT_LOSSES",
    "N3FIT_VERSION",
    "PENALTIES",
    "SHIPPED_THEORY_ID",
    "TOY_PDF_SET",
    "Architecture",
    "BatchLayout",
    "Choices",
    "ClosureSection",
    "DataSection",
    "Dimension",
    "Distribution",
    "DivergenceSection",
    "FitRuncard",
    "FlavourPreprocessing",
    "ImportedCard",
    "Methodology",
    "N3fitCard",
    "N3fitError",
    "NotInSpace",
    "ObjectiveEntry",
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
    "Slots",
    "Space",
    "Stopping",
    "TrainingSection",
    "checked_slots",
    "dump_runcard",
    "fit_to_n3fit",
    "load_fit_runcard",
    "load_runcard",
    "load_scan_runcard",
    "n3fit_to_hyperscan",
    "parse_fit_runcard",
    "parse_scan_runcard",
    "read_n3fit_card",
    "read_value",
    "runcard_from_dict",
    "scan_runcard_from_dict",
    "scan_to_n3fit",
    "trial_to_n3fit",
    "with_settings",
]
