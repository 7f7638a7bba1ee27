# SPDX-License-Identifier: GPL-3.0-or-later
"""Run in the n3fit 4.1.5 peer venv: validphys's cuts, predictions and covariance of datasets.

usage: python tools/validphys_predictions.py PDF OUT.npz --theories ID...
           --datasets NAME[:VARIANT]...
(with ``source <venv>/peer.env`` and NNPDF_PROFILE_PATH pointing at a profile whose theories
folder holds theory_<ID> for each ID)

For each theory t and dataset i (its variant, or the default one; ``use_cuts: internal``,
validphys's default q2min/w2min) tests/data/test_vs_validphys.py and benchmarks/vs_n3fit.py get,
as validphys computes them, under ``<t>_<i>_``:

* ``cuts``: the 0-based indices of the points the internal cuts keep;
* ``predictions``: ``validphys.convolution.central_predictions`` with PDF, after cuts;
* ``covmat``: ``covmat_from_systematics`` after cuts (experimental, no t0);
* ``operation``, ``operands`` (the number of FK tables the operation combines), ``pto`` (the
  perturbative order of the theory, as the cut rules read it);
* per operand j: ``xgrid_<j>`` and ``q0_<j>``, the table's x grid and Q0 as validphys loads
  them, ``xf_<j>`` (14, n_x), the PDF's central x·f in the FK flavour basis on that grid at
  that Q0 exactly as ``central_fk_predictions`` evaluates it
  (``evolution.central_grid_values(pdf, FK_FLAVOURS, xgrid, [Q0])``), and ``operand_<j>``:
  that table's own central predictions after cuts.

Also ``fk_flavours`` (validphys's FK_FLAVOURS) and the default limits of its cuts, ``q2min``,
``w2min`` and ``max_tau``.
"""

from __future__ import annotations

import argparse

import numpy as np
from validphys.api import API
from validphys.convolution import FK_FLAVOURS, central_fk_predictions, central_predictions
from validphys.covmats import covmat_from_systematics
from validphys.pdfbases import evolution


def _dataset(pdf, theory_id: int, spec: str) -> dict[str, np.ndarray]:
    name, _, variant = spec.partition(":")
    dataset_input = {"dataset": name} | ({"variant": variant} if variant else {})
    inputs = {"dataset_input": dataset_input, "theoryid": theory_id, "use_cuts": "internal"}
    dataset = API.dataset(**inputs)
    out = {
        "cuts": np.asarray(dataset.cuts.load(), dtype=np.int64),
        "predictions": central_predictions(dataset, pdf).to_numpy().reshape(-1),
        # API.covmat_from_systematics(**inputs), without parsing the commondata once more
        # (what takes validphys longest): the cut commondata as loaded_commondata_with_cuts
        # gives them, the dataset's weight (1) left out as n3fit leaves it
        "covmat": covmat_from_systematics(
            dataset.load_commondata(), dataset, use_weights_in_covmat=False
        ),
        "operation": np.array(dataset.op),
        "operands": np.array(len(dataset.fkspecs)),
        "pto": np.array(int(API.theoryid(theoryid=theory_id).get_description()["PTO"])),
    }
    for j, spec in enumerate(dataset.fkspecs):
        table = spec.load_with_cuts(dataset.cuts)
        grid = evolution.central_grid_values(
            pdf, vmat=FK_FLAVOURS, xmat=table.xgrid, qmat=[table.Q0]
        )
        out[f"xgrid_{j}"] = np.asarray(table.xgrid, dtype=np.float64)
        out[f"q0_{j}"] = np.array(float(table.Q0))
        out[f"xf_{j}"] = np.asarray(grid).squeeze(-1)[0]  # (14, n_x) of the one member asked
        out[f"operand_{j}"] = central_fk_predictions(table, pdf).to_numpy().reshape(-1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("pdf")
    parser.add_argument("target")
    parser.add_argument("--theories", type=int, nargs="+", required=True)
    parser.add_argument("--datasets", nargs="+", required=True)
    args = parser.parse_args()
    pdf = API.pdf(pdf=args.pdf)
    defaults = API.defaults()  # the kinematic limits of the internal cuts
    out: dict[str, np.ndarray] = {
        "fk_flavours": np.array(FK_FLAVOURS),
        "q2min": np.array(float(defaults.q2min)),
        "w2min": np.array(float(defaults.w2min)),
        "max_tau": np.array(float(defaults.maxTau)),
    }
    for theory_id in args.theories:
        for i, name in enumerate(args.datasets):
            for key, value in _dataset(pdf, theory_id, name).items():
                out[f"{theory_id}_{i}_{key}"] = value
    np.savez(args.target, **out)


if __name__ == "__main__":
    main()
