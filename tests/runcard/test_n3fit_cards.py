# SPDX-License-Identifier: GPL-3.0-or-later
"""Runcards both ways with n3fit 4.1.5 (hyperscan/runcard/_n3fit.py): the peer kit's three
cards survive import then export, the imported cards are valid hyperscan runcards that mean
what the project's own equivalents mean, and what cannot cross is refused by name.

The peer cards are read from ../shared/peer/runcards (skipped here without them, failed under
CI=true); every other test writes its own n3fit card.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from _n3fit_cards import small_n3fit_card

from hyperscan.runcard import (
    TOY_PDF_SET,
    FitRuncard,
    N3fitError,
    ScanRuncard,
    fit_to_n3fit,
    load_fit_runcard,
    n3fit_to_hyperscan,
    parse_fit_runcard,
    parse_scan_runcard,
    read_n3fit_card,
    runcard_from_dict,
    scan_to_n3fit,
    trial_to_n3fit,
)
from hyperscan.scan._study import check_new_study

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT.parent / "shared" / "peer" / "runcards"


@pytest.fixture(scope="module")
def peer_cards(skip_or_fail_on_ci) -> dict[str, str]:
    """The peer kit's runcards' text, by name."""
    if not all((KIT / f"{name}.yml").exists() for name in ("single", "multi", "hyperopt")):
        skip_or_fail_on_ci(
            f"no n3fit peer kit at {KIT}", on_ci=f"the n3fit peer kit is missing at {KIT}"
        )
    return {name: (KIT / f"{name}.yml").read_text() for name in ("single", "multi", "hyperopt")}


# --------------------------------------------------------------------------------------------
# Comparing n3fit cards


def normalised(card: dict[str, Any]) -> dict[str, Any]:
    """An n3fit card with what is equivalent made equal: numbers as floats (2e2 is 200), n3fit's
    defaults written out, and what hyperscan ignores (docs/n3fit.md) left out."""
    card = copy.deepcopy(card)
    card.pop("description", None)  # a comment in the imported card
    card.get("fitting", {}).pop("savepseudodata", None)  # an n3fit output option
    parameters = card.get("parameters", {})
    parameters.setdefault("threshold_chi2", 10.0)
    parameters.setdefault("positivity", {}).setdefault("threshold", 1.0e-6)
    if "kfold" in card:
        kfold = card["kfold"]
        kfold.pop("target", None)  # n3fit 4.1.5 reads none
        defaults = {"loss_type": "chi2", "replica_statistic": "average"}
        defaults |= {"fold_statistic": "average", "reduce_proportion": 0.85}
        defaults |= {"penalties": [], "penalties_in_loss": False, "threshold": 50.0}
        for key, value in defaults.items():
            kfold.setdefault(key, value)
    architecture = card.get("hyperscan_config", {}).get("architecture", {})
    if architecture.get("max_drop") == 0:  # no dropout drawn: as if not searched
        del architecture["max_drop"]
    for entry in card.get("hyperscan_config", {}).get("optimizer", []):
        entry.setdefault("clipnorm", 1.0)  # n3fit's default, which the export writes
    return _floats(card)


def _floats(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _floats(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_floats(item) for item in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """The key paths at which ``a`` and ``b`` differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in list(a) + [k for k in b if k not in a]:
            where = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                found.append(f"{where}: only in {'the original' if key in a else 'the export'}")
            else:
                found += differences(a[key], b[key], where)
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: {a!r} became {b!r}"]


def round_trip(text: str) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """(the card, the card imported and exported again, the hyperscan runcard between)."""
    card, args = read_n3fit_card(text, "peer card")
    imported = n3fit_to_hyperscan(card, args=args)
    runcard = imported.runcard("peer card")
    exported = scan_to_n3fit(runcard) if imported.is_scan else fit_to_n3fit(runcard)
    again, again_args = read_n3fit_card(exported.text(), "export")
    assert again_args == args  # the replicas and trials of the command line too
    return card, again, runcard


# --------------------------------------------------------------------------------------------
# The peer kit's cards both ways


@pytest.mark.parametrize("name", ["single", "multi", "hyperopt"])
def test_the_peer_cards_survive_import_then_export(peer_cards, name):
    original, again, runcard = round_trip(peer_cards[name])
    assert differences(normalised(original), normalised(again)) == []
    assert isinstance(runcard, ScanRuncard if name == "hyperopt" else FitRuncard)


def test_the_comparison_names_a_key_that_differs(peer_cards):
    original, again, _ = round_trip(peer_cards["single"])
    again["parameters"]["optimizer"]["clipnorm"] = 0.5
    again["datacuts"].pop("w2min")
    assert differences(normalised(original), normalised(again)) == [
        "datacuts.w2min: only in the original",
        "parameters.optimizer.clipnorm: 1.0 became 0.5",
    ]


def test_the_imported_single_card_is_the_project_s_own_dis_nlo_fit(peer_cards):
    """studies/dis-nlo.yml is hyperscan's hand-written equivalent of the kit's single.yml."""
    card, args = read_n3fit_card(peer_cards["single"])
    imported = n3fit_to_hyperscan(card, args=args).runcard()
    study = load_fit_runcard(ROOT / "studies" / "dis-nlo.yml")
    for key in ("data", "seeds", "architecture", "optimizer", "stopping", "preprocessing"):
        assert getattr(imported, key) == getattr(study, key), key
    assert imported.replica_ids == (1,) and imported.epochs == 2000
    assert imported.training.threads == 1  # debug: true runs n3fit on one thread
    assert imported.positivity.multiplier == 1.05 and imported.positivity.initial == 1.5


def test_the_multi_card_s_command_line_gives_the_replicas(peer_cards):
    card, args = read_n3fit_card(peer_cards["multi"])
    assert args == "1 -r 8"
    imported = n3fit_to_hyperscan(card, args=args).runcard()
    assert imported.replica_ids == tuple(range(1, 9))
    assert imported.training.threads is None  # debug: false: all cores


def test_the_hyperopt_card_becomes_a_scan_that_a_new_study_takes(peer_cards):
    card, args = read_n3fit_card(peer_cards["hyperopt"])
    imported = n3fit_to_hyperscan(card, args=args)
    text = imported.text("hyperopt.yml", ["imported"])
    scan = parse_scan_runcard(text, "imported")
    check_new_study(scan)  # what `hyperscan scan` checks of a new study's runcard
    assert scan == imported.runcard()
    section = scan.scan
    assert (section.trials, section.replicas) == (4, 1)  # 1 --hyperopt 4
    assert [list(f) for f in section.folds] == [
        ["HERA_NC_225GEV_EP-SIGMARED"],
        ["NMC_NC_NOTFIXED_P_EM-F2-HEPDATA"],
    ]
    objective = section.objective
    assert (objective.loss, objective.fold_statistic, objective.threshold) == (
        "chi2",
        "average",
        1000.0,
    )
    assert objective.penalties == ("saturation", "patience") and not objective.penalties_in_loss
    assert section.pruner.name == "none"  # n3fit trains every trial to its end
    space = section.space
    assert (space.layers.low, space.layers.high) == (1, 2)  # n_layers [2, 3] count the output
    assert (space.units.low, space.units.high) == (10, 30)
    assert space.activation == ("sigmoid", "tanh")
    nadam = space.optimizer["nadam"]
    assert (nadam.learning_rate.low, nadam.learning_rate.high, nadam.learning_rate.log) == (
        5e-4,
        1e-2,
        True,
    )
    assert (nadam.clipnorm.low, nadam.clipnorm.high, nadam.clipnorm.log) == (0.1, 2.0, False)
    parameters = space.parameters
    assert (parameters["epochs"].low, parameters["epochs"].high) == (200, 600)  # 2e2, 6e2
    patience = parameters["stopping.patience"]
    assert (patience.low, patience.high, patience.step) == (0.1, 0.4, 0.06)  # 5 steps
    assert parameters["positivity.multiplier"].low == 1.01
    assert parameters["architecture.initializer"].choices == ("glorot_normal", "glorot_uniform")
    assert scan.fit.training.threads == 1 and not scan.fit.data.pseudodata  # genrep: false
    assert "ignored: kfold.target" in text and "\nreplicas:" not in text


# --------------------------------------------------------------------------------------------
# Import: defaults, command lines, refusals


def refused(card: dict[str, Any], **kwargs: Any) -> str:
    with pytest.raises(N3fitError) as caught:
        n3fit_to_hyperscan(card, **kwargs)
    message = str(caught.value)
    assert "\n" not in message  # one line
    return message


def test_keys_an_n3fit_card_leaves_out_take_n3fit_s_defaults():
    runcard = n3fit_to_hyperscan(small_n3fit_card()).runcard()
    # n3fit's, not hyperscan's NNPDF4.0 defaults (clipnorm 6e-6, lr 2.6e-3, threshold 3.5)
    assert runcard.optimizer.name == "adam"
    assert (runcard.optimizer.learning_rate, runcard.optimizer.clipnorm) == (0.01, 1.0)
    assert runcard.stopping.threshold_chi2 == 10.0
    assert runcard.data.training_fraction == 0.5
    assert (runcard.seeds.data, runcard.seeds.split, runcard.seeds.network) == (9, 7, 8)
    assert runcard.architecture.nodes == (10,) and runcard.architecture.activations == ("sigmoid",)
    assert runcard.preprocessing["T15"].alpha == (0.5, 1.0)
    assert runcard.training.threads is None and runcard.replica_ids == (1,)


@pytest.mark.parametrize(
    ("args", "replicas", "trials"),
    [
        ("1", (1,), None),
        ("3 -r 6", (3, 4, 5, 6), None),
        ("1 --replica_range 2 --no-net", (1, 2), None),
    ],
)
def test_the_command_line_gives_the_replicas(args, replicas, trials):
    runcard = n3fit_to_hyperscan(small_n3fit_card(), args=args).runcard()
    assert runcard.replica_ids == replicas


def test_a_command_line_it_cannot_read_is_refused():
    message = refused(small_n3fit_card(), args="1 -r 0 --parallel-hyperopt")
    assert "n3fit-args (-r 0: expected a positive integer)" in message
    assert "'--parallel-hyperopt': not an n3fit argument hyperscan maps" in message


NNPDF40 = "NNPDF40_nnlo_as_01180"
INTEG = {"integdatasets": [{"dataset": "NNPDF_INTEG_3GEV_XT8", "maxlambda": 100}]}
POS = {"posdatasets": [{"dataset": "NNPDF_POS_2P24GEV_F2U", "maxlambda": 1e6}]}
CLOSURE = {"fakedata": True, "fakepdf": NNPDF40, "fakenoise": True, "filterseed": 1}


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"theory": {"theoryid": 40000000}}, "theory.theoryid (40000000: hyperscan ships theory"),
        ({"datacuts": {"t0pdfset": NNPDF40}}, f"datacuts.t0pdfset ({NNPDF40}:"),
        ({"integrability": INTEG}, "integrability.integdatasets[0] (hyperscan has no integrab"),
        ({"positivity": POS}, "positivity.posdatasets (positivity sets are read from a theory"),
        ({"closuretest": CLOSURE}, f"closuretest.fakepdf ({NNPDF40}:"),
        ({"sum_rules": "MSR"}, "sum_rules ('MSR': hyperscan imposes all of them"),
        ({"load": "weights.h5"}, "load (starting weights read from a file"),
        ({"same_trvl_per_replica": True}, "same_trvl_per_replica (true: hyperscan takes only"),
        (
            {"hyperscan_config": {"stopping": {"min_epochs": 10, "max_epochs": 20}}},
            "kfold (missing beside hyperscan_config",
        ),
    ],
)
def test_what_hyperscan_cannot_take_is_refused_by_name(changes, named):
    assert named in refused(small_n3fit_card(**changes))


def test_entries_hyperscan_cannot_take_are_refused_by_name():
    card = small_n3fit_card()
    card["dataset_inputs"][0] |= {"cfac": ["NRM"], "frac": 0.75}
    card["parameters"] |= {"dropout": 0.1, "layer_type": "dense_per_flavour"}
    card["parameters"]["optimizer"]["optimizer_name"] = "Adamax"
    card["fitting"]["basis"][2].pop("trainable")  # n3fit trains the exponents then
    message = refused(card)
    for named in (
        "dataset_inputs[0].cfac (['NRM']: hyperscan applies no C-factors",
        "dataset_inputs[1].frac (0.5, where dataset_inputs[0] has 0.75",
        "parameters.dropout (0.1: hyperscan takes only 0, as its network has no dropout)",
        "parameters.layer_type ('dense_per_flavour'",
        "parameters.optimizer.optimizer_name (Adamax:",
        "fitting.basis[2].trainable (n3fit trains the exponents unless 'trainable: false'",
    ):
        assert named in message, named


def test_every_unknown_key_is_named_at_once():
    card = small_n3fit_card(tensorboard={"weight_freq": 100}, sneaky=1)
    card["parameters"]["regularizer"] = "l1_l2"
    card["datacuts"]["added_filter_rules"] = []
    card["fitting"]["basis"][0]["pos"] = True
    message = refused(card)
    assert message.startswith("cannot map to hyperscan (n3fit 4.1.5 runcard): ")
    for key in ("sneaky", "parameters.regularizer (hyperscan's network has no weight regul",
                "datacuts.added_filter_rules", "fitting.basis[0].pos"):  # fmt: skip
        assert key in message, key
    assert "tensorboard" not in message  # an output option: ignored, and said so
    assert "ignored: tensorboard" in "\n".join(
        n3fit_to_hyperscan(small_n3fit_card(tensorboard={"weight_freq": 1})).notes
    )


def test_missing_keys_n3fit_needs_are_refused():
    card = small_n3fit_card(mcseed=None)
    del card["parameters"]["epochs"]
    message = refused(card)
    # keys refused for the same reason are named together
    assert "mcseed, parameters.epochs (missing: n3fit 4.1.5 needs it)" in message


def test_positivity_sets_share_one_lambda_and_need_its_maxlambda():
    sets = [{"dataset": "NNPDF_POS_2P24GEV_F2U", "maxlambda": 1e6}]
    sets += [{"dataset": "NNPDF_POS_2P24GEV_DYU", "maxlambda": 1e5}, {"dataset": "X"}]
    message = refused(
        small_n3fit_card(positivity={"posdatasets": sets}), theory="/t/theory_99000001"
    )
    assert (
        "positivity.posdatasets (maxlambda 100000, 1000000: hyperscan grows one lambda" in message
    )
    assert "positivity.posdatasets[2].maxlambda (missing: n3fit 4.1.5 needs it)" in message
    # without any positivity section: no sets, and hyperscan's defaults, which then act on none
    runcard = n3fit_to_hyperscan(small_n3fit_card(positivity=None)).runcard()
    assert runcard.data.real.positivity == ()


def test_unknown_keys_inside_a_searched_range_and_wrong_types_are_named():
    rate = {"min": 1e-3, "max": 1e-2, "smapling": "log"}
    card = small_n3fit_card(
        hyperscan_config={"optimizer": [{"optimizer_name": "Adam", "learning_rate": rate}]},
        kfold={"partitions": [{"datasets": ["HERA_NC_225GEV_EP-SIGMARED"]}]},
    )
    card["parameters"]["epochs"] = 300.5
    card["fitting"].pop("fitbasis")
    message = refused(card)
    assert (
        "hyperscan_config.optimizer[0].learning_rate.smapling (not an n3fit runcard key" in message
    )
    assert "parameters.epochs (expected an integer, got 300.5)" in message
    assert "fitting.fitbasis (missing: n3fit 4.1.5 needs it)" in message


def test_a_theory_folder_opens_other_theories_and_positivity_sets():
    card = small_n3fit_card(
        theory={"theoryid": 40000000},
        positivity={"posdatasets": [{"dataset": "NNPDF_POS_2P24GEV_F2U", "maxlambda": 1e6}]},
    )
    card["parameters"]["positivity"] = {"initial": 10.0}
    imported = n3fit_to_hyperscan(card, theory="/data/theories/theory_40000000")
    real = imported.data["data"]["real"]
    assert real["theory"] == "/data/theories/theory_40000000"
    assert real["positivity"] == ["NNPDF_POS_2P24GEV_F2U"]
    assert imported.data["positivity"] == {"initial": 10.0, "max": 1e6}  # each set's maxlambda
    wrong = refused(card, theory="/data/theory_41000000")
    assert "theory.theoryid (40000000, but the theory folder given is theory_41000000)" in wrong


def test_a_closure_test_becomes_a_real_data_closure():
    closuretest = {"fakedata": True, "fakepdf": TOY_PDF_SET, "fakenoise": True, "filterseed": 4}
    runcard = n3fit_to_hyperscan(small_n3fit_card(closuretest=closuretest)).runcard()
    assert (runcard.data.real.closure.level, runcard.data.real.closure.seed) == (1, 4)
    again = fit_to_n3fit(runcard).card["closuretest"]
    assert again == closuretest


def test_a_hyperopt_space_hyperscan_cannot_draw_is_refused_by_name():
    card = small_n3fit_card(
        hyperscan_config={
            "stopping": {"max_patience": 0.4},  # min_patience: n3fit's default 0
            "optimizer": [{"optimizer_name": "Adagrad"}],
            "architecture": {
                "n_layers": [2, 4, 5],
                "min_units": 5,
                "max_units": 9,
                "max_drop": 0.2,
            },
            "parameters": [{}],
        },
        kfold={"partitions": [{"datasets": []}]},
    )
    message = refused(card)
    for named in (
        "hyperscan_config.stopping.min_patience (0 (n3fit's default when left out)",
        "hyperscan_config.optimizer[0].optimizer_name (Adagrad:",
        "hyperscan_config.architecture.max_drop (0.2: hyperscan's network has no dropout)",
        "hyperscan_config.architecture.n_layers ([2, 4, 5]:",
        "hyperscan_config.parameters (whole parameter sets",
        "kfold.partitions[0].datasets (an empty fold",
    ):
        assert named in message, named


def test_an_optimizer_the_hyperopt_space_leaves_bare_takes_n3fit_s_defaults():
    optimizers = [{"optimizer_name": "Adam"}, {"optimizer_name": "RMSprop", "learning_rate": 0.05}]
    partitions = [{"datasets": ["HERA_NC_225GEV_EP-SIGMARED"]}]
    card = small_n3fit_card(
        hyperscan_config={"optimizer": optimizers},
        kfold={"partitions": partitions, "loss_type": "phi2", "threshold": float("inf")},
    )
    scan = n3fit_to_hyperscan(card, args="1 -r 2 --hyperopt 3").runcard()
    optimizers = scan.scan.space.optimizer
    assert optimizers["adam"].learning_rate is None  # n3fit's default 0.01: the base's too
    assert optimizers["rmsprop"].learning_rate.choices == (0.05,)
    assert scan.scan.objective.loss == "phi2" and scan.scan.objective.threshold is None
    assert (scan.scan.replicas, scan.scan.trials) == (2, 3)


# --------------------------------------------------------------------------------------------
# Export: the n3fit card of a hyperscan fit runcard


def real_card(**changes: Any) -> FitRuncard:
    data = {
        "data": {"real": {"datasets": [{"dataset": "HERA_NC_225GEV_EP-SIGMARED"}]}},
        "optimizer": {"clipnorm": 1.0},
    }
    return runcard_from_dict(data | changes)


def cannot(runcard: FitRuncard) -> str:
    with pytest.raises(N3fitError) as caught:
        fit_to_n3fit(runcard)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("n3fit 4.1.5 cannot express: ")
    return message


def test_the_built_in_closure_data_are_refused_by_name():
    message = cannot(runcard_from_dict({"optimizer": {"clipnorm": 1.0}}))
    assert "data.closure (hyperscan's built-in closure data have no n3fit equivalent" in message


def test_everything_n3fit_cannot_express_is_named_at_once():
    runcard = runcard_from_dict(
        {
            "data": {"real": {"t0": False, "closure": {"fits": 3}}},
            "architecture": {"nodes": [5], "initializer": "he_normal"},
            "optimizer": {"clipnorm": None},
            "replicas": 2,
            "folds": [["HERA_NC_225GEV_EP-SIGMARED"]],
            "methodologies": [{}, {"epochs": 50}],
        }
    )
    message = cannot(runcard)
    for key in (
        "methodologies (per-replica methodologies",
        "folds (n3fit 4.1.5 holds datasets out only in a hyperopt run",
        "data.real.t0 (false: n3fit 4.1.5 always fits with the t0 covariance",
        "data.real.closure.fits (3:",
        "architecture.initializer (he_normal:",
        "optimizer.clipnorm (null (no clipping)",
    ):
        assert key in message, key


def test_how_hyperscan_runs_is_left_out_and_said_so():
    runcard = real_card(
        training={"threads": 4, "precision": "float64", "steps_per_call": 50},
        replicas=[3, 4, 5],
    )
    exported = fit_to_n3fit(runcard)
    card = exported.card
    assert (card["debug"], card["maxcores"], card["double_precision"]) == (False, 4, True)
    assert exported.args == "3 -r 5"
    text = exported.text(["a header"])
    assert "training.steps_per_call 50" in text and "divergence.max_loss" in text
    assert read_n3fit_card(text) == (yaml.safe_load(text), "3 -r 5")
    assert fit_to_n3fit(real_card(training={"threads": 1})).card["debug"] is True
    apart = fit_to_n3fit(real_card(replicas=[2, 7]))
    assert apart.args is None and "replicas 2, 7: one n3fit command fits a range" in apart.text()


def test_the_data_s_selection_variants_positivity_and_theory_folder_are_n3fit_s_keys():
    runcard = runcard_from_dict(
        {
            "data": {
                "real": {
                    "theory": "/share/theories/theory_41000000/",
                    "datasets": [
                        {"dataset": "HERA_NC_225GEV_EP-SIGMARED"},
                        {"dataset": "BCDMS_NC_NOTFIXED_P_EM-F2-HEPDATA", "variant": "rzero"},
                        {"dataset": "NMC_NC_NOTFIXED_P_EM-F2-HEPDATA"},
                    ],
                    "positivity": ["NNPDF_POS_2P24GEV_F2U"],
                    "q2min": 5.0,
                },
                "datasets": [
                    "BCDMS_NC_NOTFIXED_P_EM-F2-HEPDATA",
                    "NMC_NC_NOTFIXED_P_EM-F2-HEPDATA",
                ],
                "training_fraction": 0.6,
                "pseudodata": False,
            },
            "optimizer": {"clipnorm": 1.0},
            "positivity": {"initial": 2.0, "max": 1.0e5},
        }
    )
    card = fit_to_n3fit(runcard).card
    assert card["dataset_inputs"] == [
        {"dataset": "BCDMS_NC_NOTFIXED_P_EM-F2-HEPDATA", "variant": "rzero", "frac": 0.6},
        {"dataset": "NMC_NC_NOTFIXED_P_EM-F2-HEPDATA", "frac": 0.6},
    ]
    assert card["theory"] == {"theoryid": 41000000} and card["genrep"] is False
    assert card["datacuts"] == {"t0pdfset": TOY_PDF_SET, "q2min": 5.0, "w2min": 12.5}
    assert card["positivity"]["posdatasets"] == [
        {"dataset": "NNPDF_POS_2P24GEV_F2U", "maxlambda": 1e5}
    ]
    assert card["parameters"]["positivity"] == {"initial": 2.0}  # grows to maxlambda
    # n3fit's card back: the same hyperscan runcard (but data.datasets, now the list itself)
    again = n3fit_to_hyperscan(card, theory="/share/theories/theory_41000000/").runcard()
    assert again.positivity == runcard.positivity
    assert [e.dataset for e in again.data.real.datasets] == list(runcard.data.datasets)


def test_an_unnamed_theory_folder_needs_its_id():
    runcard = real_card(data={"real": {"theory": "/share/theories"}})
    assert "data.real.theory (/share/theories: its theory ID is unknown" in cannot(runcard)
    assert fit_to_n3fit(runcard, theory_id=40000000).card["theory"]["theoryid"] == 40000000


def test_an_exported_k_fold_trial_fits_every_dataset_and_keeps_its_provenance():
    names = ["HERA_NC_225GEV_EP-SIGMARED", "NMC_NC_NOTFIXED_P_EM-F2-HEPDATA"]
    runcard = real_card(
        data={"real": {"datasets": [{"dataset": name} for name in names]}},
        folds=[[name] for name in names],
        replicas=2,
    )
    from hyperscan.runcard import dump_runcard

    text = dump_runcard(
        runcard, header="Fit runcard exported by hyperscan from a scan trial.\nstudy: s\ntrial: 12"
    )
    n3fit = trial_to_n3fit(text)
    card, args = read_n3fit_card(n3fit)
    assert args == "1 -r 2" and card["description"] == "exported by hyperscan, study s, trial 12"
    assert "left out: the trial's 2 folds" in n3fit and "#   trial: 12" in n3fit
    unfolded = runcard.model_copy(update={"folds": ()})
    plain, _ = read_n3fit_card(fit_to_n3fit(unfolded).text())
    assert card == plain | {"description": card["description"]}


def test_a_scan_n3fit_cannot_run_is_refused_by_name():
    scan = parse_scan_runcard(
        yaml.safe_dump(
            {
                "data": {"real": {"datasets": [{"dataset": "HERA_NC_225GEV_EP-SIGMARED"}]}},
                "optimizer": {"clipnorm": 1.0},
                "scan": {
                    "objective": {"statistic": "median", "fold_statistic": "median"},
                    "space": {"parameters": {"seeds.network": {"low": 1, "high": 9}}},
                },
            }
        )
    )
    with pytest.raises(N3fitError) as caught:
        scan_to_n3fit(scan)
    for named in (
        "scan.folds (n3fit's hyperopt needs k-fold partitions)",
        "scan.objective.loss (statistic: n3fit's hyperopt losses are chi2, phi2, logp and chi2p)",
        "scan.objective.fold_statistic (median:",
        "scan.space.parameters.seeds.network (",
    ):
        assert named in str(caught.value), named


def test_the_hyperscan_card_written_validates_with_hyperscan_s_loader():
    imported = n3fit_to_hyperscan(small_n3fit_card(), args="1 -r 3")
    text = imported.text("small.yml", ["imported"])
    assert text.startswith("# imported\n")
    assert parse_fit_runcard(text) == imported.runcard()
    assert parse_fit_runcard(text).replica_ids == (1, 2, 3)
