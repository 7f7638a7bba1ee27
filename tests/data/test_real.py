# SPDX-License-Identifier: GPL-3.0-or-later
"""Real data shipped in hyperscan/data (DIS and LO hadronic): arrays, cuts, covariance, FK
convolution, presets, errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from _datasets import toy_xfx

from hyperscan.data import (
    DIS_DATASETS,
    HADRONIC_DATASETS,
    REAL_DATASETS,
    fit_to_fk_rotation,
    load_problem,
    load_real_dataset,
    toy_pdf,
)
from hyperscan.data._real import (
    HADRONIC_DATA_DIR,
    REAL_DATA_DIR,
    SHIPPED_PTO,
    SHIPPED_THEORY_CARD,
    _cached,
    experimental_covariance,
    real_problem,
)
from hyperscan.runcard import RuncardError, dump_runcard, parse_fit_runcard
from hyperscan.runcard.real_datasets import PRESETS
from hyperscan.runcard.reference import json_schema

HERA = sorted(n for n in REAL_DATASETS if n.startswith("HERA"))


def _kit(path: Path) -> tuple[str, str | None, np.lib.npyio.NpzFile]:
    z = np.load(path)
    return str(z["dataset"]), (str(z["variant"]) or None), z


@pytest.fixture(scope="module")
def exp_problem():
    return real_problem(t0=False)


def test_shipped_set_is_the_kit(real_data_files: list[Path]) -> None:
    assert sorted(_kit(f)[0] for f in real_data_files) == sorted(DIS_DATASETS)
    for f in real_data_files:
        name, variant, z = _kit(f)
        assert REAL_DATASETS[name] == variant
        d = load_real_dataset(name, variant)
        (table,) = d.tables
        np.testing.assert_array_equal(table.fk, z["fk"])  # the 9 rows restore (n, 14, n_x) exactly
        np.testing.assert_array_equal(table.xgrid, z["xgrid"])
        for key in ("central", "stat", "sys"):
            np.testing.assert_array_equal(getattr(d, key), z[key])
        np.testing.assert_array_equal(d.kinematics, z["kinematics"])
        assert d.sys_type == tuple(z["sys_type"]) and d.sys_treatment == tuple(z["sys_treatment"])
        np.testing.assert_array_equal(d.cut_mask(), z["cut_mask"])


def test_package_is_small() -> None:
    total = sum(f.stat().st_size for f in REAL_DATA_DIR.glob("*.npz"))
    assert total < 4e6
    assert (REAL_DATA_DIR / "NOTICE.md").is_file()


def test_covmat_matches_kit_per_dataset(real_data_files: list[Path], exp_problem) -> None:
    slices = dict(zip(exp_problem.names, exp_problem.dataset_slices(), strict=True))
    for f in real_data_files:
        name, _, z = _kit(f)
        m = z["cut_mask"]
        ref = z["covmat"][np.ix_(m, m)]
        got = exp_problem.covmat[slices[name], slices[name]]
        assert np.max(np.abs(got - ref)) <= 1e-12 * np.max(np.abs(ref)), name


def test_named_systematics_correlate_hera(real_data_files: list[Path], exp_problem) -> None:
    """Cross-dataset blocks = sum over shared systematic names, computed independently."""
    kit = {_kit(f)[0]: _kit(f)[2] for f in real_data_files}
    slices = dict(zip(exp_problem.names, exp_problem.dataset_slices(), strict=True))
    intra = ("UNCORR", "CORR", "THEORYUNCORR", "THEORYCORR", "SKIP")
    for a in HERA:
        for b in HERA:
            if a == b:
                continue
            za, zb = kit[a], kit[b]
            ma, mb = za["cut_mask"], zb["cut_mask"]
            shared = sorted(
                (set(za["sys_type"]) & set(zb["sys_type"])) - set(intra)
            )  # e.g. HC_sys1 ...
            assert shared
            ia = [list(za["sys_type"]).index(t) for t in shared]
            ib = [list(zb["sys_type"]).index(t) for t in shared]
            ref = za["sys"][ma][:, ia] @ zb["sys"][mb][:, ib].T
            got = exp_problem.covmat[slices[a], slices[b]]
            assert np.max(np.abs(got - ref)) <= 1e-12 * np.max(np.abs(ref)), (a, b)
    # HERA sets form one covariance block; BCDMS and NMC are alone
    blocks = {
        tuple(n for n, s in zip(exp_problem.names, exp_problem.dataset_slices(), strict=True)
              if b.start <= s.start < b.stop)
        for b in exp_problem.blocks()
    }  # fmt: skip
    assert tuple(HERA) in blocks
    assert ("BCDMS_NC_NOTFIXED_P_EM-F2-HEPDATA",) in blocks
    assert ("NMC_NC_NOTFIXED_P_EM-F2-HEPDATA",) in blocks
    np.linalg.cholesky(exp_problem.covmat)  # positive definite (raises otherwise)


def test_t0_rescales_mult_only() -> None:
    names = ["NMC_NC_NOTFIXED_P_EM-F2-HEPDATA", "HERA_CC_318GEV_EP-SIGMARED"]
    data = [load_real_dataset(n) for n in names]
    masks = [d.cut_mask() for d in data]
    exp = experimental_covariance(data, masks)[0]
    # t0 predictions equal to the data: the experimental covariance again
    same = experimental_covariance(data, masks, [d.central[m] for d, m in zip(data, masks)])[0]  # noqa: B905
    np.testing.assert_allclose(same, exp, rtol=1e-12, atol=0)
    # NMC: stat (ADD) + one CORR MULT column -> diag(stat^2) + s s^T with s = sys/central*t0
    d, m = data[0], masks[0]
    t0 = d.toy_prediction()[m]
    got = experimental_covariance([d], [m], [t0])[0]
    s = d.sys[m][:, 0] / d.central[m] * t0
    np.testing.assert_allclose(got, np.diag(d.stat[m] ** 2) + np.outer(s, s), rtol=1e-12)
    problem = real_problem(names, t0=True)
    assert not np.allclose(problem.covmat, real_problem(names, t0=False).covmat)


def test_toy_convolution_matches_kit(real_data_files: list[Path]) -> None:
    for f in real_data_files:
        name, variant, z = _kit(f)
        d = load_real_dataset(name, variant)
        xf = fit_to_fk_rotation() @ toy_pdf(d.tables[0].xgrid, normalise=False).T  # (14, n_x)
        ours = np.einsum("ifa,fa->i", d.tables[0].fk, xf)
        np.testing.assert_allclose(ours, z["toy_prediction"], rtol=1e-12, atol=0)
        # the normalised toy (the closure truth) differs by < 1e-7
        np.testing.assert_allclose(d.toy_prediction(), z["toy_prediction"], rtol=1e-6)


def test_toy_convolution_matches_pineappl(real_data_files: list[Path]) -> None:
    # pineappl is in the test extra: missing, this check (the README's "FK convolution against
    # PineAPPL's to 1e-12") must fail, not skip.
    import pineappl.fk_table

    folder = real_data_files[0].parent / "fktables"
    xfx = toy_xfx()

    for name, variant in DIS_DATASETS.items():
        table = pineappl.fk_table.FkTable.read(str(folder / f"{name}.pineappl.lz4"))
        ref = np.asarray(table.convolve(pdg_convs=table.convolutions, xfxs=[xfx]))
        d = load_real_dataset(name, variant)
        xf = fit_to_fk_rotation() @ toy_pdf(d.tables[0].xgrid).T
        ours = np.einsum("ifa,fa->i", d.tables[0].fk, xf)
        np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=0, err_msg=name)


# --------------------------------------------------------------------------------------------
# errors


def test_unknown_dataset() -> None:
    with pytest.raises(ValueError, match=r"unknown real dataset 'NOPE'; available: BCDMS_NC"):
        load_real_dataset("NOPE")


def test_missing_variant() -> None:
    # other variants come from nnpdf-data (test extra): tests/data/test_commondata.py
    with pytest.raises(ValueError, match=r"variant 'nope' does not exist.*variants: legacy"):
        load_real_dataset("HERA_CC_318GEV_EP-SIGMARED", "nope")
    with pytest.raises(ValueError, match=r"write variant: rzero"):
        load_real_dataset("BCDMS_NC_NOTFIXED_P_EM-F2-HEPDATA", None)


def test_missing_file(tmp_path: Path, monkeypatch) -> None:
    """A message at the runcard's key, as every data problem is, not a traceback."""
    with pytest.raises(ValueError, match=r"FK file of HERA_CC_318GEV_EP-SIGMARED is missing"):
        load_real_dataset("HERA_CC_318GEV_EP-SIGMARED", data_dir=tmp_path)
    monkeypatch.setattr("hyperscan.data._real.REAL_DATA_DIR", tmp_path)
    card = parse_fit_runcard("data: {real: {datasets: [{dataset: HERA_CC_318GEV_EP-SIGMARED}]}}\n")
    _cached.cache_clear()  # datasets read by other tests are kept
    try:
        with pytest.raises(RuncardError, match=r"data\.real: FK file of HERA_CC_318GEV_EP-"):
            load_problem(card)
    finally:
        _cached.cache_clear()


def test_kinematics_out_of_range_are_corruption(tmp_path: Path) -> None:
    """x = 0 would make W² infinite and let every point through the cuts."""
    name = "HERA_CC_318GEV_EP-SIGMARED"
    with np.load(REAL_DATA_DIR / f"{name}.npz") as archive:
        arrays = dict(archive)
    arrays["kinematics"][3, 0] = 0.0
    np.savez(tmp_path / f"{name}.npz", **arrays)
    with pytest.raises(ValueError, match=r"kinematics outside 0 < x < 1, Q2 > 0"):
        load_real_dataset(name, data_dir=tmp_path)


def test_an_unreadable_file_is_not_called_corrupt(monkeypatch) -> None:
    def denied(path, mode="r"):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("hyperscan.data._real.open", denied, raising=False)
    with pytest.raises(ValueError, match=r"^cannot read the FK file .*: Permission denied$"):
        load_real_dataset("HERA_CC_318GEV_EP-SIGMARED", data_dir=REAL_DATA_DIR)


def test_corrupt_file(tmp_path: Path) -> None:
    name = "HERA_CC_318GEV_EP-SIGMARED"
    raw = (REAL_DATA_DIR / f"{name}.npz").read_bytes()
    (tmp_path / f"{name}.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match=r"corrupt FK file .*HERA_CC_318GEV_EP-SIGMARED\.npz"):
        load_real_dataset(name, data_dir=tmp_path)
    with pytest.raises(ValueError, match=r"corrupt FK file"):
        real_problem([name], data_dir=tmp_path)
    (tmp_path / f"{name}.npz").write_bytes(b"\x80\x04 some other kind of file")
    with pytest.raises(ValueError, match=r"\.npz: it is not an \.npz archive$"):
        load_real_dataset(name, data_dir=tmp_path)
    # a readable archive with a wrong array
    other = tmp_path / "other"
    other.mkdir()
    with np.load(REAL_DATA_DIR / f"{name}.npz") as z:
        arrays = dict(z)
    arrays["central"] = arrays["central"][:-1]
    np.savez(other / f"{name}.npz", **arrays)
    with pytest.raises(ValueError, match=r"corrupt FK file .*central has shape"):
        load_real_dataset(name, data_dir=other)
    shutil.rmtree(other)


def test_shipped_hadronic_sets_load_with_their_operations() -> None:
    """The LO hadronic sets (docs/hadronic.md): two-PDF tables on their non-zero flavour pairs,
    combined as nnpdf-data says, and the toy PDF predicts the data to tens of per cent."""
    operations = {}
    for name, variant in HADRONIC_DATASETS.items():
        d = load_real_dataset(name, variant)
        assert d.variant == variant == "legacy" and all(t.hadronic for t in d.tables)
        assert d.process.startswith(("DY", "EWK")), d.process
        operations[name] = (d.operation, [t.n_data for t in d.tables])
        mask = d.cut_mask(pto=SHIPPED_PTO)
        ratio = d.toy_prediction()[mask] / d.central[mask]
        assert np.all(np.isfinite(ratio)) and 0.6 < np.median(ratio) < 1.2, (name, ratio)
    assert operations == {
        "DYE866_Z0_800GEV_DW_RATIO_PDXSECRATIO": ("RATIO", [15, 15]),
        "DYE866_Z0_800GEV_PXSEC": ("NULL", [184]),
        "CDF_Z0_1P96TEV_ZRAP": ("NULL", [28]),
        "D0_Z0_1P96TEV_ZRAP": ("RATIO", [28, 1]),
        "D0_WPWM_1P96TEV_ASY": ("ASY", [10, 10]),
    }


def test_the_hadronic_preset_fits_dis_and_hadronic_data() -> None:
    card = parse_fit_runcard("data: {real: {datasets: dis+hadronic}}\n")
    problem = load_problem(card)
    dis = load_problem(parse_fit_runcard("data: {real: {}}\n"))
    assert problem.names == tuple(REAL_DATASETS) and dis.names == tuple(DIS_DATASETS)
    # E866 pp keeps 88 of its 184 points (tau <= 0.08, |y/y_max| <= 0.663), the others all
    assert problem.n_data == dis.n_data + 15 + 88 + 28 + 28 + 10
    assert np.all(np.linalg.eigvalsh(problem.covmat) > 0)


def test_the_shipped_order_is_the_theory_cards() -> None:
    """The hadronic cut rules of NNLO and beyond (D0's W asymmetry) follow the card: NLO."""
    card = yaml.safe_load(SHIPPED_THEORY_CARD.read_text(encoding="utf-8"))
    assert SHIPPED_PTO == card["PTO"] == 1


def test_a_damaged_hadronic_file_is_named(tmp_path: Path) -> None:
    name = "D0_WPWM_1P96TEV_ASY"
    with np.load(HADRONIC_DATA_DIR / f"{name}.npz") as z:
        arrays = dict(z)
    for broken, message in [
        ({"fk_1": None}, r"missing arrays \['fk_1'\]"),
        ({"operation": np.asarray("DIVIDE")}, r"operation 'DIVIDE' is not supported"),
        ({"pairs_0": arrays["pairs_0"][:-1]}, r"fk must have shape"),
        ({"central": arrays["central"][:-1]}, r"central has shape \(9,\), expected \(10,\)"),
    ]:
        changed = {k: v for k, v in (arrays | broken).items() if v is not None}
        np.savez(tmp_path / f"{name}.npz", **changed)
        with pytest.raises(ValueError, match=rf"corrupt FK file .*{name}\.npz: .*{message}"):
            load_real_dataset(name, "legacy", data_dir=tmp_path)


# --------------------------------------------------------------------------------------------
# problem, closure on the real tables, runcard


def test_cuts_are_configurable() -> None:
    name = "NMC_NC_NOTFIXED_P_EM-F2-HEPDATA"
    assert real_problem([name]).n_data == 113
    assert real_problem([name], q2min=0.0, w2min=0.0).n_data == 158
    assert real_problem([name], q2min=10.0).n_data < 113


def test_real_closure_levels() -> None:
    names = ["HERA_CC_318GEV_EP-SIGMARED", "HERA_CC_318GEV_EM-SIGMARED"]
    level0 = real_problem(names, closure_level=0)
    np.testing.assert_array_equal(level0.central, level0.truth)
    level1 = real_problem(names, closure_level=1, closure_seed=3)
    again = real_problem(names, closure_level=1, closure_seed=3)
    assert level1.fingerprint() == again.fingerprint()
    assert not np.array_equal(level1.central, level1.truth)
    assert real_problem(names).truth is None


def test_runcard_builds_real_problem() -> None:
    card = parse_fit_runcard(
        "data: {real: {datasets: [{dataset: BCDMS_NC_NOTFIXED_P_EM-F2-HEPDATA, variant: rzero}],"
        " t0: false}}\n"
    )
    problem = load_problem(card)
    assert problem.names == ("BCDMS_NC_NOTFIXED_P_EM-F2-HEPDATA",) and problem.n_data == 165
    everything = load_problem(parse_fit_runcard("data: {real: {}}\n"))
    assert everything.n_data == 976 and not everything.positivity


def test_presets_name_the_shipped_datasets() -> None:
    """A preset stands for its sets in their shipped variants, and the dump lists them, so an
    exported runcard does not depend on what a preset holds in a later release."""
    default = parse_fit_runcard("data: {real: {}}\n").data.real.datasets
    assert parse_fit_runcard("data: {real: {datasets: dis}}\n").data.real.datasets == default
    assert [(e.dataset, e.variant) for e in default] == list(DIS_DATASETS.items())
    card = parse_fit_runcard("data: {real: {datasets: dis+hadronic}}\n")
    entries = [(e.dataset, e.variant) for e in card.data.real.datasets]
    assert entries == list(DIS_DATASETS.items()) + list(HADRONIC_DATASETS.items())
    dumped = dump_runcard(card)
    assert "dis+hadronic" not in dumped and "DYE866_Z0_800GEV_PXSEC" in dumped
    assert parse_fit_runcard(dumped) == card
    schema = json_schema()["$defs"]["RealSection"]["properties"]["datasets"]["anyOf"]
    assert schema[0]["enum"] == list(PRESETS)


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        (
            "data: {real: {datasets: dis+jets}}",
            "data.real.datasets",
            "unknown preset 'dis+jets'; expected one of 'dis', 'dis+hadronic' or a list",
        ),
        (
            "data: {real: {datasets: [{dataset: NOPE}]}}",
            "data.real.datasets[0].dataset",
            "available",
        ),
        (
            "data: {real: {datasets: [{dataset: BCDMS_NC_NOTFIXED_P_EM-F2-HEPDATA}]}}",
            "data.real.datasets[0].variant",
            "write variant: rzero",
        ),
        ("data: {real: {}, closure: {}}", "data.real", "either 'closure' or 'real'"),
        ("data: {closure: null}", "data.closure", "one of 'closure' or 'real'"),
    ],
)
def test_runcard_errors(text: str, key: str, message: str) -> None:
    with pytest.raises(RuncardError) as info:
        parse_fit_runcard(text + "\n")
    assert f"{key}: " in str(info.value) and message in str(info.value)
