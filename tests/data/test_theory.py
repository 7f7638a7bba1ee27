"""Datasets from an NNPDF theory folder: PineAPPL tables, compound operations, cuts, errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from _datasets import toy_xfx
from _theory_folder import (
    HADRONIC,
    PAIRS,
    POSITIVITY,
    Q0,
    SHARED_DATA,
    XGRID,
    build_theory_folder,
)

from hyperscan.data import (
    DIS_DATASETS,
    FK_BASIS,
    Dataset,
    FkTable,
    fit_to_fk_rotation,
    real_problem,
    toy_pdf,
)
from hyperscan.data._cuts import DEFAULT_MAX_TAU
from hyperscan.data._fk_writer import write_fk_table
from hyperscan.data._theory import (
    EVOLUTION_PIDS,
    converted_table,
    find_theory,
    theory_dataset,
    theory_positivity,
)
from hyperscan.runcard.real_datasets import RealDataError, commondata_files


@pytest.fixture(scope="module")
def theory_folder(tmp_path_factory, real_data_files) -> Path:
    del real_data_files  # the DIS tables come from the real-data kit (fails under CI without it)
    return build_theory_folder(tmp_path_factory.mktemp("share"))


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _toy_fk_basis(xgrid: np.ndarray) -> np.ndarray:
    return fit_to_fk_rotation() @ toy_pdf(xgrid).T  # (14, n_x), as _toy_physical gives it


def test_a_shipped_set_read_from_a_theory_folder_is_the_shipped_set(theory_folder) -> None:
    from_folder = real_problem(theory=theory_folder)
    shipped = real_problem()
    assert from_folder.names == shipped.names
    assert from_folder.fingerprint() == shipped.fingerprint()  # every table, datum and covariance
    for a, b in zip(from_folder.datasets, shipped.datasets, strict=True):
        np.testing.assert_array_equal(a.table.fk, b.table.fk)


@pytest.mark.parametrize("name", HADRONIC)
def test_each_table_predicts_what_pineappl_convolves(theory_folder, name) -> None:
    from pineappl.fk_table import FkTable as PineapplTable

    theory = find_theory(theory_folder)
    xfx = toy_xfx()
    for operand in commondata_files(name, None).fk_tables:
        (table_name,) = operand
        path = theory.fastkernel / f"{table_name}.pineappl.lz4"
        reference = PineapplTable.read(str(path))
        expected = reference.convolve(pdg_convs=reference.convolutions, xfxs=[xfx, xfx])
        table = converted_table(path, theory.q0)
        assert table.hadronic and table.pairs.shape == (len(PAIRS), 2)
        ours = table.predictions(_toy_fk_basis(table.xgrid))
        np.testing.assert_allclose(ours, expected, rtol=1e-10, atol=0)
        # the fixed-order sum, used for closure data and t0, is the same number
        np.testing.assert_allclose(
            table.fixed_order_predictions(_toy_fk_basis(table.xgrid)), expected, rtol=1e-10
        )


@pytest.mark.parametrize("name", HADRONIC)
def test_a_compound_dataset_combines_its_tables_as_validphys(theory_folder, name) -> None:
    theory = find_theory(theory_folder)
    files = commondata_files(name, None)
    dataset = theory_dataset(theory, name, None)
    parts = [
        converted_table(theory.fastkernel / f"{t}.pineappl.lz4", theory.q0).predictions(
            _toy_fk_basis(XGRID)
        )
        for (t,) in files.fk_tables
    ]
    expected = {
        "NULL": lambda a: a,
        "RATIO": lambda a, b: a / b,
        "ASY": lambda a, b: (a - b) / (a + b),
        "ADD": lambda a, b: a + b,
        "COM": lambda *t: sum(t[:10]) / sum(t[10:]),
    }[files.operation](*parts)
    xf = _toy_fk_basis(dataset.dataset(np.ones(dataset.n_data, bool)).xgrid)
    got = dataset.dataset(np.ones(dataset.n_data, bool)).predictions(xf)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_a_drell_yan_positivity_set_takes_its_conversion_factor(theory_folder) -> None:
    from pineappl.fk_table import FkTable as PineapplTable

    theory = find_theory(theory_folder)
    files = commondata_files(POSITIVITY, None)
    assert files.process_type == "POS_DY" and files.conversion_factor == 0.7071
    positivity = theory_positivity(theory, POSITIVITY)
    ((table_name,),) = files.fk_tables
    reference = PineapplTable.read(str(theory.fastkernel / f"{table_name}.pineappl.lz4"))
    xfx = toy_xfx()
    expected = reference.convolve(pdg_convs=reference.convolutions, xfxs=[xfx, xfx])
    got = positivity.predictions(_toy_fk_basis(positivity.xgrid))
    np.testing.assert_allclose(got, 0.7071 * expected, rtol=1e-10)
    problem = real_problem(
        ["DYE605_Z0_38P8GEV_DW_PXSEC"], theory=theory_folder, positivity=[POSITIVITY]
    )
    assert [p.name for p in problem.positivity] == [POSITIVITY]
    with pytest.raises(RealDataError, match="is not a positivity set"):
        theory_positivity(theory, "DYE605_Z0_38P8GEV_DW_PXSEC")


def test_the_fixed_target_cut_is_validphys_rule(theory_folder) -> None:
    name = "DYE605_Z0_38P8GEV_DW_PXSEC"
    dataset = theory_dataset(find_theory(theory_folder), name, None)
    assert dataset.kinematics_names == ("y", "M2", "sqrts")
    y, m2, sqrts = dataset.kinematics.T
    tau = m2 / sqrts**2
    expected = (tau <= DEFAULT_MAX_TAU) & (np.abs(y / (-0.5 * np.log(tau))) <= 0.663)
    mask = dataset.cut_mask(pto=1)
    np.testing.assert_array_equal(mask, expected)
    assert 0 < mask.sum() < dataset.n_data
    problem = real_problem([name], theory=theory_folder)
    assert problem.n_data == mask.sum()


def test_a_table_is_converted_once_and_then_read_from_the_cache(theory_folder, tmp_path) -> None:
    theory = find_theory(theory_folder)
    path = theory.fastkernel / "DYE605.pineappl.lz4"
    first = converted_table(path, theory.q0, cache_dir=tmp_path)
    (entry,) = tmp_path.glob("*.npz")
    copy = tmp_path / "copy.pineappl.lz4"
    shutil.copy(path, copy)
    second = converted_table(copy, theory.q0, cache_dir=tmp_path)  # same bytes: same entry
    assert list(tmp_path.glob("*.npz")) == [entry]
    np.testing.assert_array_equal(first.fk, second.fk)


def test_operations_on_tables_built_by_hand() -> None:
    """Each operation of validphys 4.1.5 on tables whose predictions are known numbers."""
    xgrid = np.array([0.1, 0.5])
    xf = np.ones((14, 2))

    def table(value: float) -> FkTable:  # predicts `value` on a PDF of ones, at two points
        fk = np.zeros((2, 14, 2))
        fk[:, FK_BASIS.index("g"), 0] = value
        return FkTable(fk, xgrid)

    def predict(operation: str, values: list[float]) -> float:
        tables = tuple(table(v) for v in values)
        d = Dataset("D", "X", tables, np.zeros(2), np.zeros((2, 3)), operation)
        out = d.predictions(xf)
        assert out[0] == out[1]
        return float(out[0])

    assert predict("NULL", [3.0]) == 3.0
    assert predict("add", [3.0, 4.0]) == 7.0
    assert predict("RATIO", [3.0, 4.0]) == 0.75
    assert predict("ASY", [3.0, 1.0]) == 0.5
    assert predict("SMN", [1.0, 2.0, 3.0, 3.0]) == 0.5
    assert predict("COM", [*[1.0] * 10, *[4.0] * 10]) == 0.25
    assert predict("SMT", [float(i) for i in range(10)]) == 45.0
    assert predict("SUBTRACT_ABS", [3.0, -5.0]) == -2.0
    assert predict("SUBTRACT_ABSPAIR", [3.0, 1.0, -2.0, -3.0]) == -1.0


def test_a_one_point_ratio_denominator_divides_every_point_and_survives_cuts() -> None:
    xgrid = np.array([0.1, 0.5])
    numerator = np.zeros((3, 14, 2))
    numerator[:, FK_BASIS.index("g"), 0] = [1.0, 2.0, 3.0]
    total = np.zeros((1, 14, 2))
    total[0, FK_BASIS.index("g"), 1] = 4.0
    tables = (FkTable(numerator, xgrid), FkTable(total, xgrid))
    d = Dataset("D", "X", tables, np.zeros(3), np.zeros((3, 3)), "RATIO")
    np.testing.assert_array_equal(d.predictions(np.ones((14, 2))), [0.25, 0.5, 0.75])
    cut = d.rows(np.array([False, True, True]))
    assert cut.tables[1].n_data == 1
    np.testing.assert_array_equal(cut.predictions(np.ones((14, 2))), [0.5, 0.75])


def test_a_ratio_denominator_padded_with_empty_rows_is_its_first_row(theory_folder, tmp_path):
    """validphys keeps only the first row of a RATIO's one-table denominator whose other rows
    are all zero: a total that divides every point, and that cuts leave whole."""
    name = "DYE866_Z0_800GEV_DW_RATIO_PDXSECRATIO"
    folder = tmp_path / "theory_99000001"
    shutil.copytree(theory_folder, folder)
    total = np.zeros((15, len(PAIRS), XGRID.size, XGRID.size))
    total[0] = 1.0
    write_fk_table(folder / "fastkernel" / "DYE866R_P.pineappl.lz4", list(PAIRS), XGRID, total, Q0)
    dataset = theory_dataset(find_theory(folder), name, None)
    assert [t.n_data for t in dataset.tables] == [15, 1]
    numerator, denominator = (t.predictions(_toy_fk_basis(XGRID)) for t in dataset.tables)
    everything = dataset.dataset(np.ones(15, bool))
    np.testing.assert_allclose(
        everything.predictions(_toy_fk_basis(everything.xgrid)), numerator / denominator[0]
    )


def test_an_operand_of_several_tables_is_their_concatenation(tmp_path) -> None:
    """validphys's operand of sub-tables: one after another on the union of their x grids, each
    times the conversion factor and its own normalisation, ``shifts`` empty points before it."""
    from dataclasses import replace

    from hyperscan.data._theory import Theory, _tables

    fastkernel = tmp_path / "fastkernel"
    fastkernel.mkdir()
    rng = np.random.default_rng(5)
    grids = {"A": XGRID[:6], "B": XGRID[3:]}
    sizes = {"A": 2, "B": 3}
    pairs = {"A": list(PAIRS[:2]), "B": list(PAIRS[1:])}
    values = {}
    for name in ("A", "B"):
        shape = (sizes[name], len(pairs[name]), grids[name].size, grids[name].size)
        values[name] = rng.uniform(0.5, 1.5, size=shape)
        write_fk_table(
            fastkernel / f"{name}.pineappl.lz4", pairs[name], grids[name], values[name], Q0
        )
    files = replace(
        commondata_files("DYE605_Z0_38P8GEV_DW_PXSEC", None),
        fk_tables=(("A", "B"),),
        conversion_factor=0.5,
        normalization=(("B", 2.0),),
        shifts=(("B", 1),),
    )
    theory = Theory(99000001, fastkernel, 1.65, 1, tmp_path / "theory.yaml")
    _, (table,) = _tables(theory, files, 6)
    assert table.n_data == 2 + 1 + 3
    np.testing.assert_array_equal(table.xgrid, XGRID)
    xf = np.random.default_rng(6).uniform(0.1, 1.0, size=(14, XGRID.size))
    alone = {n: converted_table(fastkernel / f"{n}.pineappl.lz4", 1.65) for n in ("A", "B")}
    a = alone["A"].predictions(xf[:, :6])
    b = alone["B"].predictions(xf[:, 3:])
    expected = np.concatenate([0.5 * a, [0.0], 0.5 * 2.0 * b])
    np.testing.assert_allclose(table.predictions(xf), expected, rtol=1e-13)


def test_a_hadronic_table_keeps_its_pairs_only() -> None:
    fk = np.arange(2 * 2 * 3 * 3, dtype=float).reshape(2, 2, 3, 3)
    pairs = np.array([[FK_BASIS.index("g"), FK_BASIS.index("Sigma")], [1, 1]])
    table = FkTable(fk, np.array([0.1, 0.2, 0.3]), pairs)
    xf = np.random.default_rng(1).normal(size=(14, 3))
    dense = np.zeros((2, 14, 3, 14, 3))
    dense[:, pairs[:, 0], :, pairs[:, 1], :] = fk.transpose(1, 0, 2, 3)
    np.testing.assert_allclose(
        table.predictions(xf), np.einsum("napbq,ap,bq->n", dense, xf, xf), rtol=1e-13
    )
    with pytest.raises(ValueError, match="distinct"):
        FkTable(fk, np.array([0.1, 0.2, 0.3]), np.array([[1, 1], [1, 1]]))


# --------------------------------------------------------------------------------------------
# bad input: one RealDataError (a ValueError, exit 2 from a runcard) naming what and why


def test_a_theory_folder_that_does_not_exist(tmp_path) -> None:
    with pytest.raises(RealDataError, match=r"theory folder .*nowhere does not exist"):
        real_problem(theory=tmp_path / "nowhere")
    with pytest.raises(RealDataError, match="not exactly one theory_<ID>/fastkernel/"):
        real_problem(theory=tmp_path)


def test_a_missing_table_names_the_table_and_the_dataset(theory_folder, tmp_path) -> None:
    folder = tmp_path / "theory_99000001"
    shutil.copytree(theory_folder, folder)
    (folder / "fastkernel" / "DYE866R_P.pineappl.lz4").unlink()
    with pytest.raises(
        RealDataError,
        match="DYE866_Z0_800GEV_DW_RATIO_PDXSECRATIO needs the FK table DYE866R_P, which theory "
        "99000001 lacks",
    ):
        real_problem(["DYE866_Z0_800GEV_DW_RATIO_PDXSECRATIO"], theory=folder)


@pytest.mark.parametrize("content", [b"", b"not a table", b"\x04\x22\x4d\x18garbage"])
def test_a_damaged_table_is_refused(theory_folder, tmp_path, content) -> None:
    folder = tmp_path / "theory_99000001"
    shutil.copytree(theory_folder, folder)
    (folder / "fastkernel" / "DYE605.pineappl.lz4").write_bytes(content)
    with pytest.raises(RealDataError, match=r"DYE605.pineappl.lz4 is damaged or not a PineAPPL"):
        real_problem(["DYE605_Z0_38P8GEV_DW_PXSEC"], theory=folder)


def test_a_table_at_another_q0_or_in_another_basis_is_refused(theory_folder, tmp_path) -> None:
    folder = tmp_path / "theory_99000001"
    shutil.copytree(theory_folder, folder)
    table = folder / "fastkernel" / "DYE605.pineappl.lz4"
    values = np.ones((119, len(PAIRS), XGRID.size, XGRID.size))
    write_fk_table(table, list(PAIRS), XGRID, values, q0=1.0)
    with pytest.raises(RealDataError, match="its Q0 is 1 GeV, the theory card's 1.65 GeV"):
        real_problem(["DYE605_Z0_38P8GEV_DW_PXSEC"], theory=folder)
    write_fk_table(table, [(2, -2), (21, 21)], XGRID, values[:, :2], Q0, evolution_basis=False)
    with pytest.raises(RealDataError, match=r"flavours \[-2, 2\] are not the evolution basis"):
        real_problem(["DYE605_Z0_38P8GEV_DW_PXSEC"], theory=folder)


def test_a_dataset_not_in_nnpdf_data_is_refused(theory_folder) -> None:
    with pytest.raises(RealDataError, match="unknown commondata dataset 'DYE999_Z0_XSEC'"):
        real_problem(["DYE999_Z0_XSEC"], theory=theory_folder)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("ATLAS_TTBAR_8TEV_LJ_DIF_YT-NORM", "top-pair or jet data"),
        ("CMS_1JET_8TEV_PTY", "top-pair or jet data"),
        ("NNPDF_POS_2P24GEV_DYU", "give positivity sets in data.real.positivity"),
    ],
)
def test_a_dataset_whose_cuts_are_not_ported_is_refused(theory_folder, name, why) -> None:
    with pytest.raises(RealDataError, match=f"{name} .*is not supported: .*{why}"):
        real_problem([name], theory=theory_folder)


def test_the_drell_yan_rules_at_each_order() -> None:
    from hyperscan.data._cuts import default_cut_mask

    def mask(name, names, rows, pto, central=None):
        kinematics = np.array(rows, dtype=float)
        central = np.zeros(len(rows)) if central is None else np.array(central)
        return default_cut_mask(
            name, "DY", kinematics, names, central, q2min=3.49, w2min=12.5, pto=pto
        ).tolist()

    cms = ("y", "m_Z2", "sqrts")
    rows = [[1.0, 25.0**2, 7000], [1.0, 100.0**2, 7000], [2.3, 100.0**2, 7000]]
    assert mask("CMS_Z0_7TEV_DIMUON_2D", cms, rows, pto=1) == [False, True, False]
    assert mask("CMS_Z0_7TEV_DIMUON_2D", cms, rows, pto=2) == [True, True, False]
    lhcb = [[2.0, 8315.0, 7000], [2.5, 8315.0, 7000]]
    assert mask("LHCB_Z0_7TEV_MUON_Y", cms, lhcb, pto=1) == [True, True]
    assert mask("LHCB_Z0_7TEV_MUON_Y", cms, lhcb, pto=2) == [False, True]
    ptm = ("pT", "m_ll", "")
    rows = [[20.0, 90.0, 0], [100.0, 90.0, 0], [200.0, 90.0, 0], [100.0, 60.0, 0]]
    assert mask("CMS_Z0J_13TEV_PT-M", ptm, rows, pto=2) == [False, True, False, False]
    lomass = ("m_ll", "sqrts", "")
    rows = [[20.0, 7000], [30.0, 7000], [40.0, 7000]]
    assert mask("ATLAS_Z0_7TEV_LOMASS_M", lomass, rows, pto=1) == [False, False, True]
    assert mask("ATLAS_Z0_7TEV_LOMASS_M", lomass, rows, pto=2) == [True, True, True]
    with pytest.raises(ValueError, match="needs the kinematic variable 'm_Z2'"):
        mask("CMS_Z0_7TEV_DIMUON_2D", ("y", "M2", "sqrts"), [[1.0, 1.0, 1.0]], pto=2)


def test_an_unsupported_operation_is_refused(theory_folder, monkeypatch) -> None:
    from hyperscan.data import _theory

    real = _theory.meta.commondata_files

    def with_operation(name, variant, root=None):
        from dataclasses import replace

        return replace(real(name, variant, root), operation="DIVIDE")

    monkeypatch.setattr(_theory.meta, "commondata_files", with_operation)
    with pytest.raises(RealDataError, match="operation 'DIVIDE' is not supported"):
        real_problem(["DYE605_Z0_38P8GEV_DW_PXSEC"], theory=theory_folder)


def test_the_shipped_names_are_the_kits(real_data_files) -> None:
    """The fixture's folder names the DIS tables as n3fit does (datasets.tsv's fk_name)."""
    del real_data_files
    rows = (SHARED_DATA / "datasets.tsv").read_text().splitlines()[1:]
    assert sorted(r.split("\t")[0] for r in rows) == sorted(DIS_DATASETS)
    assert EVOLUTION_PIDS[FK_BASIS.index("g")] == 21
