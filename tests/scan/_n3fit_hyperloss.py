# SPDX-License-Identifier: GPL-3.0-or-later
"""Run in the n3fit 4.1.5 peer venv: n3fit's own hyperopt code on given predictions.

usage: python _n3fit_hyperloss.py IN.npz OUT.json   (with ``source <venv>/peer.env``)

test_hyperloss_vs_n3fit.py writes IN.npz: per dataset its name, fold, cut indices and the
replicas' predictions on its points after cuts; per fold the replicas' validation and
experimental χ²; every replica's x·f in n3fit's 14-flavour evolution basis at the penalties'
small x; the stopping numbers. This script feeds them to ``compute_hyperopt_metrics``,
``HyperLoss`` (each loss, replica and fold statistic, with and without penalties), the
penalties of ``n3fit/hyper_optimization/penalties.py`` and ``LossHyperopt``, with validphys'
own commondata and experimental covariance, and writes what they return.

Only n3fit's ``predictions``/``central_predictions`` are replaced, by the given predictions
(the central one is the replicas' mean: DIS is linear in the PDF), and its PDF models by
stand-ins that return the given x·f: the convolution is not what is checked here.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import n3fit.vpinterface as vpinterface
import numpy as np
import pandas as pd
from n3fit.hyper_optimization import penalties as n3penalties
from n3fit.hyper_optimization.rewards import IMPLEMENTED_LOSSES, IMPLEMENTED_STATS, HyperLoss
from n3fit.layers.losses import LossHyperopt
from n3fit.vpinterface import N3PDF, compute_hyperopt_metrics
from validphys.loader import Loader

PREDICTIONS: dict[str, np.ndarray] = {}  # dataset name → (R, n) after cuts


def _predictions(dataset, n3pdf) -> pd.DataFrame:
    return pd.DataFrame(PREDICTIONS[dataset.name][list(n3pdf._models)].T)


def _central_predictions(dataset, n3pdf) -> pd.DataFrame:
    return pd.DataFrame(PREDICTIONS[dataset.name][list(n3pdf._models)].mean(axis=0)[:, None])


class _Dataset:
    """What compute_hyperopt_metrics reads of a DataSetSpec: its name and cut commondata."""

    def __init__(self, name: str, commondata) -> None:
        self.name = name
        self._commondata = commondata

    def load_commondata(self):
        return self._commondata


class _Model:
    """A replica's PDF model: x·f (n_x, 14) on known x, as n3fit's models return it."""

    def __init__(self, x: np.ndarray, xf: np.ndarray) -> None:
        self.x, self.xf = x, xf

    def _rows(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x).reshape(-1)
        rows = np.array([np.argmin(np.abs(self.x / value - 1.0)) for value in x])
        assert np.allclose(self.x[rows], x, rtol=1e-12), "asked for an x the test did not give"
        return rows

    def predict(self, inputs: dict) -> np.ndarray:
        return self.xf[self._rows(inputs["pdf_input"])][None]  # (1, n_x, 14)

    def get_layer_re(self, _pattern: str) -> list:
        return []  # no photon


class _Ensemble:
    """n3fit's multi-replica pdf_model: predict gives (1, R, n_x, 14)."""

    def __init__(self, models: list[_Model]) -> None:
        self.models = models

    def predict(self, inputs: dict) -> np.ndarray:
        return np.stack([m.predict(inputs)[0] for m in self.models])[None]

    def split_replicas(self) -> list[_Model]:
        return self.models


def main(source: str, target: str) -> None:
    vpinterface.predictions = _predictions
    vpinterface.central_predictions = _central_predictions
    given = np.load(source, allow_pickle=False)
    names = [str(n) for n in given["names"]]
    folds = given["folds"]
    loader = Loader()
    groups: dict[int, list[_Dataset]] = {}
    for i, name in enumerate(names):
        cut = loader.check_commondata(name).load().with_cuts(given[f"cuts_{i}"])
        PREDICTIONS[name] = given[f"predictions_{i}"]
        groups.setdefault(int(folds[i]), []).append(_Dataset(name, cut))
    fold_ids = sorted(groups)
    proportion = float(given["proportion"])
    replicas = given["validation"].shape[1]
    everyone = N3PDF(list(range(replicas)))

    # penalties, from stand-in PDF models of the given x·f
    pdf_model = _Ensemble([_Model(given["small_x"], xf) for xf in given["xf14"]])
    small_x = {
        "saturation": n3penalties.saturation(pdf_model=pdf_model),
        "integrability": n3penalties.integrability(pdf_model=pdf_model),
    }

    out: dict = {"folds": []}
    for k in fold_ids:
        stopping = SimpleNamespace(
            e_best_chi2=given["best_epoch"],
            stopping_patience=int(given["patience"]),
            total_epochs=int(given["epochs"]),
            vl_chi2=given["validation"][k],
        )
        penalties = {**small_x, "patience": n3penalties.patience(stopping)}
        group = SimpleNamespace(datasets=groups[k])
        fitted = SimpleNamespace(datasets=[d for j in fold_ids if j != k for d in groups[j]])
        commondata = [d.load_commondata() for d in groups[k]]
        central = np.concatenate([cd.central_values.to_numpy() for cd in commondata])
        covmat = vpinterface.dataset_inputs_covmat_from_systematics(
            commondata, use_weights_in_covmat=False
        )
        validation, experimental = given["validation"][k], given["experimental"][k]
        best = np.argsort(validation)[: int(np.ceil(proportion * replicas))]
        metrics = compute_hyperopt_metrics(everyone.select_models(best), [group])
        record = {
            "central": central.tolist(),
            "covmat": covmat.tolist(),
            "chi2p": metrics.chi2,
            "phi2": metrics.phi2,
            "logp": metrics.logp,
            "fitted_chi2": compute_hyperopt_metrics(everyone, [fitted]).chi2exp,
            "losses": {},
            "penalties": {name: np.asarray(v).tolist() for name, v in penalties.items()},
        }
        for loss in IMPLEMENTED_LOSSES:
            for statistic in IMPLEMENTED_STATS:
                for in_loss in (False, True):
                    hyper = HyperLoss(loss, statistic, "average", proportion, in_loss)
                    value = hyper.compute_loss(
                        penalties={name: np.array(v) for name, v in penalties.items()},
                        validation_loss=validation.copy(),
                        experimental_loss=experimental.copy(),
                        pdf_object=everyone,
                        experimental_data=[group],
                    )
                    record["losses"][f"{loss} {statistic} {in_loss}"] = float(value)
        out["folds"].append(record)

    # across folds: each loss's fold statistics of the given fold losses
    out["fold_statistics"] = {
        f"{loss} {statistic}": HyperLoss(loss, "average", statistic).reduce_over_folds(
            given["fold_losses"]
        )
        for loss in IMPLEMENTED_LOSSES
        for statistic in IMPLEMENTED_STATS
    }
    out["fit_quality"] = {
        str(value): float(LossHyperopt()(np.float64(value))) for value in given["fitted_means"]
    }
    with open(target, "w") as handle:
        json.dump(out, handle)


if __name__ == "__main__":
    main(*sys.argv[1:3])
