"""A small n3fit 4.1.5 fit runcard, for the tests of both directions of the n3fit mapping."""

from __future__ import annotations

from typing import Any

from hyperscan.runcard import SHIPPED_THEORY_ID, TOY_PDF_SET


def small_n3fit_card(**changes: Any) -> dict[str, Any]:
    """A small n3fit fit card of two shipped datasets; ``changes`` replace top-level keys
    (None removes one)."""
    card = {
        "dataset_inputs": [
            {"dataset": "HERA_NC_225GEV_EP-SIGMARED", "frac": 0.5},
            {"dataset": "BCDMS_NC_NOTFIXED_P_EM-F2-HEPDATA", "variant": "rzero", "frac": 0.5},
        ],
        "genrep": True,
        "theory": {"theoryid": SHIPPED_THEORY_ID},
        "datacuts": {"t0pdfset": TOY_PDF_SET, "q2min": 3.49, "w2min": 12.5},
        "trvlseed": 7,
        "nnseed": 8,
        "mcseed": 9,
        "parameters": {
            "nodes_per_layer": [10, 8],
            "activation_per_layer": ["sigmoid", "linear"],
            "initializer": "glorot_uniform",
            "optimizer": {"optimizer_name": "Adam"},
            "epochs": 300,
            "stopping_patience": 0.2,
        },
        "fitting": {
            "fitbasis": "EVOL",
            "basis": [
                {"fl": fl, "trainable": False, "smallx": [0.5, 1.0], "largex": [2.0, 3.0]}
                for fl in ("sng", "g", "v", "v3", "v8", "t3", "t8", "t15")
            ],
        },
        "positivity": {"posdatasets": []},
        "integrability": {"integdatasets": []},
    }
    for key, value in changes.items():
        if value is None:
            card.pop(key)
        else:
            card[key] = value
    return card
