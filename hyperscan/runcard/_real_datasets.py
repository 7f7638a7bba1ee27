# SPDX-License-Identifier: GPL-3.0-or-later
"""Which real DIS datasets (and variants) hyperscan ships, in plain Python.

It lives in the runcard layer, the lowest, so that the schema can check dataset names and
variants without importing numpy; the data layer loads the datasets it names.
"""

from __future__ import annotations

#: Shipped datasets -> the variant shipped (None: the commondata default). One variant each.
REAL_DATASETS: dict[str, str | None] = {
    "BCDMS_NC_NOTFIXED_P_EM-F2-HEPDATA": "rzero",
    "HERA_CC_318GEV_EM-SIGMARED": None,
    "HERA_CC_318GEV_EP-SIGMARED": None,
    "HERA_NC_225GEV_EP-SIGMARED": None,
    "HERA_NC_251GEV_EP-SIGMARED": None,
    "HERA_NC_318GEV_EM-SIGMARED": None,
    "NMC_NC_NOTFIXED_P_EM-F2-HEPDATA": None,
}


def variant_text(variant: str | None) -> str:
    return "the default variant (none)" if variant is None else f"variant {variant!r}"


def check_real_dataset(name: str, variant: str | None) -> None:
    """Raise ValueError with a clear message unless ``name`` with ``variant`` is shipped."""
    if name not in REAL_DATASETS:
        raise ValueError(
            f"unknown real dataset {name!r}; available: {', '.join(sorted(REAL_DATASETS))}"
        )
    shipped = REAL_DATASETS[name]
    if variant != shipped:
        hint = "" if shipped is None else f" (write variant: {shipped})"
        raise ValueError(
            f"{name}: {variant_text(variant)} is not shipped; only {variant_text(shipped)} "
            f"is available{hint}"
        )
