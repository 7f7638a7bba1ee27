# SPDX-License-Identifier: GPL-3.0-or-later
"""Commondata from nnpdf-data: the shipped arrays, other variants, errors, the on-disk cache."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import numpy as np
import pytest
import yaml

from hyperscan.data import REAL_DATASETS, load_problem, load_real_dataset, real_problem
from hyperscan.data._commondata import default_cache_dir, read_commondata
from hyperscan.data._real import shipped_folder
from hyperscan.runcard import RuncardError, parse_fit_runcard
from hyperscan.runcard import real_datasets as meta
from hyperscan.runcard.real_datasets import RealDataError

BCDMS = "BCDMS_NC_NOTFIXED_P_EM-F2-HEPDATA"
NMC = "NMC_NC_NOTFIXED_P_EM-F2-HEPDATA"
HERA_CC = "HERA_CC_318GEV_EP-SIGMARED"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Keep every read (also the loader's) out of the user's ~/.cache; shared by the module."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "xdg"))


@pytest.fixture
def yaml_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts YAML documents parsed (each call of yaml.load)."""
    calls: list[int] = []
    real = yaml.load

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(yaml, "load", counting)
    return calls


@pytest.fixture
def nmc_tree(tmp_path: Path) -> Path:
    """A private commondata folder holding a copy of the (small) NMC p set."""
    root = meta.nnpdf_commondata_dir()
    assert root is not None, "nnpdf-data is in the test extra"
    shutil.copytree(root / "NMC_NC_NOTFIXED_P", tmp_path / "cd" / "NMC_NC_NOTFIXED_P")
    return tmp_path / "cd"


@pytest.mark.parametrize("name", sorted(REAL_DATASETS))
def test_reader_reproduces_shipped_arrays(name: str) -> None:
    got = read_commondata(name, REAL_DATASETS[name])
    with np.load(shipped_folder(name) / f"{name}.npz") as z:
        for key in ("central", "stat", "sys"):
            assert got.__dict__[key].shape == z[key].shape, key
            np.testing.assert_array_equal(got.__dict__[key], z[key], err_msg=key)
        np.testing.assert_array_equal(got.kinematics, z["kinematics"])  # NaN = NaN (NMC y)
        for key in ("sys_names", "sys_treatment", "sys_type"):
            assert got.__dict__[key] == tuple(z[key]), key
        assert got.process_type == str(z["process_type"])
        assert (str(z["variant"]) or None) == got.variant == REAL_DATASETS[name]
        hadronic = "kinematics_names" in z
        if hadronic:
            assert got.kinematics_names == tuple(z["kinematics_names"])
    assert set(got.sys_treatment) <= {"ADD", "MULT"}
    assert hadronic or got.kinematics_names[:2] == ("x", "Q2")


def test_other_variant_of_bcdms() -> None:
    """rqcd: F2 extracted with R = R_QCD instead of R = 0; same bins, same FK table."""
    rzero, rqcd = read_commondata(BCDMS, "rzero"), read_commondata(BCDMS, "rqcd")
    np.testing.assert_array_equal(rqcd.kinematics, rzero.kinematics)
    assert rqcd.sys_names == rzero.sys_names == ("sys", "norm")
    assert rqcd.sys_type == rzero.sys_type and rqcd.sys_treatment == rzero.sys_treatment
    changed = rqcd.central != rzero.central
    assert changed.sum() > 150  # most points move ...
    assert np.max(np.abs(rqcd.central / rzero.central - 1.0)) < 0.06  # ... by a few per cent
    # the MULT normalisation column follows the central values in both variants
    np.testing.assert_allclose(rqcd.sys[:, 1] / rqcd.central, rzero.sys[:, 1] / rzero.central)

    shipped, other = load_real_dataset(BCDMS, "rzero"), load_real_dataset(BCDMS, "rqcd")
    assert other.variant == "rqcd" and shipped.variant == "rzero"
    np.testing.assert_array_equal(other.tables[0].fk, shipped.tables[0].fk)
    np.testing.assert_array_equal(other.central, rqcd.central)
    np.testing.assert_array_equal(other.sys, rqcd.sys)
    a = real_problem([{"dataset": BCDMS, "variant": "rqcd"}])
    b = real_problem([{"dataset": BCDMS, "variant": "rqcd"}])
    c = real_problem([{"dataset": BCDMS, "variant": "rzero"}])
    assert a.n_data == c.n_data == 165  # cuts depend on the kinematics only
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_hera_legacy_variant_is_the_default() -> None:
    """nnpdf-data 4.1.5 points HERA's ``legacy`` at the default files: the same arrays."""
    legacy, default = load_real_dataset(HERA_CC, "legacy"), load_real_dataset(HERA_CC)
    assert legacy.variant == "legacy"
    for key in ("central", "stat", "sys"):
        np.testing.assert_array_equal(getattr(legacy, key), getattr(default, key))


def test_runcard_takes_another_variant() -> None:
    card = parse_fit_runcard(
        f"data: {{real: {{datasets: [{{dataset: {BCDMS}, variant: rqcd}}]}}}}\n"
    )
    problem = load_problem(card)
    rqcd = load_real_dataset(BCDMS, "rqcd")
    np.testing.assert_array_equal(problem.central, rqcd.central[rqcd.cut_mask()])
    with pytest.raises(RuncardError) as info:
        parse_fit_runcard(f"data: {{real: {{datasets: [{{dataset: {BCDMS}, variant: nope}}]}}}}\n")
    text = str(info.value)
    assert "data.real.datasets[0].variant: " in text
    assert "variant 'nope' does not exist in nnpdf-data" in text
    assert "available variants: rzero, rqcd" in text


# --------------------------------------------------------------------------------------------
# errors


def test_missing_dataset() -> None:
    with pytest.raises(
        RealDataError, match=r"no set 'HERA_CC_319GEV'.*close matches: HERA_CC_318GEV"
    ):
        read_commondata("HERA_CC_319GEV_EP-SIGMARED")
    with pytest.raises(
        RealDataError,
        match=r"unknown commondata dataset 'HERA_CC_318GEV_XX'; set HERA_CC_318GEV has: "
        r"HERA_CC_318GEV_EM-SIGMARED, HERA_CC_318GEV_EP-SIGMARED",
    ):
        read_commondata("HERA_CC_318GEV_XX")
    with pytest.raises(ValueError, match=r"not a commondata dataset name"):
        read_commondata("../../etc")


def test_missing_variant() -> None:
    with pytest.raises(
        RealDataError,
        match=rf"{HERA_CC}: variant 'nope' does not exist in nnpdf-data 4\.1\.5; "
        r"available variants: legacy",
    ):
        read_commondata(HERA_CC, "nope")
    with pytest.raises(RealDataError, match=r"available variants: none"):
        load_real_dataset(NMC, "legacy")
    # BCDMS' default has no uncertainties: name the variants, and the shipped one
    with pytest.raises(
        RealDataError, match=r"choose one of the variants: rzero, rqcd \(write variant: rzero\)"
    ):
        load_real_dataset(BCDMS, None)


def test_without_nnpdf_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(meta, "nnpdf_commondata_dir", lambda: None)
    with pytest.raises(RealDataError, match=r"needs nnpdf-data.*pip install nnpdf-data==4\.1\.5"):
        read_commondata(HERA_CC)
    with pytest.raises(
        ValueError,
        match=r"variant 'legacy' is not shipped; only the default variant \(none\) is available; "
        r"other variants need nnpdf-data: pip install nnpdf-data==4\.1\.5",
    ):
        load_real_dataset(HERA_CC, "legacy")
    with pytest.raises(RuncardError, match=r"write variant: rzero.*pip install"):
        parse_fit_runcard(f"data: {{real: {{datasets: [{{dataset: {BCDMS}, variant: rqcd}}]}}}}\n")
    assert load_real_dataset(HERA_CC).n_data == 39  # the shipped variant needs nothing


def test_the_install_hint_installs_the_nnpdf_extra_by_its_own_name() -> None:
    """A user who installed hyperscan from a wheel or a path gets the extra's package, pinned
    as pyproject pins it; `pip install 'hyperscan[nnpdf]'` would fetch PyPI's "hyperscan",
    another project (Intel Hyperscan's bindings)."""
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    extra = pyproject["project"]["optional-dependencies"]["nnpdf"]
    assert f"pip install {' '.join(extra)}" == meta.INSTALL_HINT


def test_variant_with_other_fk_tables_is_refused(
    nmc_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = nmc_tree / "NMC_NC_NOTFIXED_P" / "metadata.yaml"
    doc = yaml.safe_load(path.read_text())
    obs = next(o for o in doc["implemented_observables"] if o["observable_name"] == "EM-F2-HEPDATA")
    obs["variants"] = {
        "same": {"data_central": obs["data_central"]},
        "otherfk": {"theory": {"FK_tables": [["SOMETHING_ELSE"]], "operation": "NULL"}},
    }
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.setattr(meta, "nnpdf_commondata_dir", lambda: nmc_tree)
    assert load_real_dataset(NMC, "same").variant == "same"
    with pytest.raises(
        RealDataError, match=r"variant 'otherfk' needs the FK tables.*SOMETHING_ELSE"
    ):
        load_real_dataset(NMC, "otherfk")


def test_corrupt_commondata_file(nmc_tree: Path, tmp_path: Path) -> None:
    path = nmc_tree / "NMC_NC_NOTFIXED_P" / "data_EM-F2-HEPDATA.yaml"
    doc = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({"data_central": doc["data_central"][:-1]}))
    with pytest.raises(RealDataError, match=r"corrupt commondata file .*data_EM-F2-HEPDATA\.yaml"):
        read_commondata(NMC, commondata_dir=nmc_tree, cache_dir=tmp_path / "c")
    doc["data_central"][3] = "oops"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(RealDataError, match=r"data_central\[3\] is 'oops', not a number"):
        read_commondata(NMC, commondata_dir=nmc_tree, cache_dir=tmp_path / "c")


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda obs: obs.pop("ndata"), f"{NMC} lacks ndata"),
        (lambda obs: obs.update(ndata="many"), f"{NMC} has ndata 'many', not a number of points"),
        (lambda obs: obs.pop("kinematics"), f"{NMC} lacks kinematics: file"),
        (lambda obs: obs["kinematics"].pop("file"), f"{NMC} lacks kinematics: file"),
    ],
    ids=["no ndata", "bad ndata", "no kinematics", "no kinematics file"],
)
def test_metadata_lacking_a_key_names_the_file_and_the_key(
    nmc_tree: Path, tmp_path: Path, change, why: str
) -> None:
    path = nmc_tree / "NMC_NC_NOTFIXED_P" / "metadata.yaml"
    doc = yaml.safe_load(path.read_text())
    change(
        next(o for o in doc["implemented_observables"] if o["observable_name"] == "EM-F2-HEPDATA")
    )
    path.write_text(yaml.safe_dump(doc))
    expected = re.escape(f"corrupt commondata metadata {path}: {why}")
    with pytest.raises(RealDataError, match=expected):
        read_commondata(NMC, commondata_dir=nmc_tree, cache_dir=tmp_path / "c")


@pytest.mark.parametrize(
    ("observables", "why"),
    [("[unclosed", r"\w+Error: "), ("[EM-F2-HEPDATA]", "no implemented_observables")],
    ids=["not YAML", "not mappings"],
)
def test_unreadable_metadata_is_a_real_data_error_also_in_a_runcard(
    nmc_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, observables: str, why: str
) -> None:
    path = nmc_tree / "NMC_NC_NOTFIXED_P" / "metadata.yaml"
    path.write_text(f"setname: NMC_NC_NOTFIXED_P\nimplemented_observables: {observables}\n")
    expected = re.escape(f"corrupt commondata metadata {path}: ") + why
    with pytest.raises(RealDataError, match=expected):
        read_commondata(NMC, commondata_dir=nmc_tree, cache_dir=tmp_path / "c")
    monkeypatch.setattr(meta, "nnpdf_commondata_dir", lambda: nmc_tree)
    with pytest.raises(RuncardError, match=r"data\.real\.datasets\[0\]\.variant: " + expected):
        parse_fit_runcard(f"data: {{real: {{datasets: [{{dataset: {NMC}, variant: other}}]}}}}\n")


def test_an_uncertainty_definition_that_is_not_a_mapping(nmc_tree: Path, tmp_path: Path) -> None:
    path = nmc_tree / "NMC_NC_NOTFIXED_P" / "uncertainties_EM-F2-HEPDATA.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["definitions"]["sys"] = "MULT CORR"
    path.write_text(yaml.safe_dump(doc))
    expected = f"corrupt commondata file {path}: definition of sys is 'MULT CORR', not a mapping"
    with pytest.raises(RealDataError, match=re.escape(expected)):
        read_commondata(NMC, commondata_dir=nmc_tree, cache_dir=tmp_path / "c")


# --------------------------------------------------------------------------------------------
# cache


def test_second_read_comes_from_the_cache(tmp_path: Path, yaml_calls: list[int]) -> None:
    cache = tmp_path / "cache"
    first = read_commondata(BCDMS, "rqcd", cache_dir=cache)
    assert len(yaml_calls) >= 3  # data, uncertainties, kinematics (+ metadata once a process)
    (entry,) = cache.glob("*.npz")
    assert entry.name.startswith(f"{BCDMS}-")
    assert not list(cache.glob(".*"))  # no temp file left behind (written atomically)
    yaml_calls.clear()
    again = read_commondata(BCDMS, "rqcd", cache_dir=cache)
    assert yaml_calls == []
    for key in ("central", "stat", "sys", "kinematics"):
        np.testing.assert_array_equal(getattr(again, key), getattr(first, key))
    assert again.sys_type == first.sys_type and again.variant == "rqcd"
    # another variant is another entry
    read_commondata(BCDMS, "rzero", cache_dir=cache)
    assert len(list(cache.glob("*.npz"))) == 2


def test_cache_follows_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "hyperscan" / "commondata"
    read_commondata(NMC)
    assert len(list(default_cache_dir().glob(f"{NMC}-*.npz"))) == 1
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # ignored, as the XDG spec says
    assert default_cache_dir() == Path.home() / ".cache" / "hyperscan" / "commondata"


@pytest.mark.parametrize("damage", ["truncate", "garbage", "other_entry"])
def test_corrupt_cache_is_rebuilt(tmp_path: Path, yaml_calls: list[int], damage: str) -> None:
    cache = tmp_path / "cache"
    good = read_commondata(HERA_CC, cache_dir=cache)
    (entry,) = cache.glob("*.npz")
    raw = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        entry.write_bytes(b"not a zip file at all")
    else:  # a valid entry of another dataset under this name: its key does not match
        read_commondata(NMC, cache_dir=tmp_path / "nmc")
        shutil.copy(next((tmp_path / "nmc").glob("*.npz")), entry)
    yaml_calls.clear()
    rebuilt = read_commondata(HERA_CC, cache_dir=cache)
    assert yaml_calls  # parsed again
    np.testing.assert_array_equal(rebuilt.sys, good.sys)
    assert rebuilt.sys_names == good.sys_names
    yaml_calls.clear()
    read_commondata(HERA_CC, cache_dir=cache)  # and the entry is whole again
    assert yaml_calls == []


def test_cache_key_follows_file_contents(nmc_tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    before = read_commondata(NMC, commondata_dir=nmc_tree, cache_dir=cache)
    path = nmc_tree / "NMC_NC_NOTFIXED_P" / "data_EM-F2-HEPDATA.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["data_central"][0] = 1.25
    path.write_text(yaml.safe_dump(doc))
    after = read_commondata(NMC, commondata_dir=nmc_tree, cache_dir=cache)
    assert after.central[0] == 1.25 != before.central[0]  # not the stale entry
    np.testing.assert_array_equal(after.central[1:], before.central[1:])
    assert len(list(cache.glob("*.npz"))) == 2


def test_unwritable_cache_still_reads(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    got = read_commondata(NMC, cache_dir=blocker / "cache")
    assert got.n_data == 158
