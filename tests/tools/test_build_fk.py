# SPDX-License-Identifier: GPL-3.0-or-later
"""tools/build_fk.py without the `theory` extra: cards, checks, errors and the pipeline wiring
(with stand-ins for yadism, eko, pineko and pineappl)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "build_fk.py"
CC_EM = "HERA_CC_318GEV_EM-SIGMARED"

# theory_99000001.yaml of the real-data kit (NNPDF card 40000000 with PTO 1, ZM-VFNS, TMC 0);
# the kit itself is not in the repository.
THEORY_CARD = {
    "ID": 99000001,
    "PTO": 1,
    "FNS": "ZM-VFNS",
    "DAMP": 0,
    "IC": 1,
    "Q0": 1.65,
    "ModEv": "TRN",
    "XIR": 1.0,
    "XIF": 1.0,
    "NfFF": 5,
    "QED": 0,
    "HQ": "POLE",
    "mc": 1.51,
    "Qmc": 1.51,
    "kcThr": 1.0,
    "mb": 4.92,
    "Qmb": 4.92,
    "kbThr": 1.0,
    "mt": 172.5,
    "Qmt": 172.5,
    "ktThr": 1.0,
    "CKM": [0.97428, 0.2253, 0.00347, 0.2252, 0.97345, 0.041, 0.00862, 0.0403, 0.999152],
    "MZ": 91.1876,
    "MW": 80.398,
    "GF": 1.1663787e-05,
    "SIN2TW": 0.23126,
    "TMC": 0,
    "MP": 0.938,
    "Qref": 91.2,
    "alphas": 0.118,
    "alphaqed": 0.0077553,
}


def _load_module():
    spec = importlib.util.spec_from_file_location("build_fk", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bfk = _load_module()


@pytest.fixture
def kit(tmp_path: Path) -> Path:
    folder = tmp_path / "kit"
    folder.mkdir()
    (folder / bfk.THEORY_CARD).write_text(yaml.safe_dump(THEORY_CARD), encoding="utf-8")
    return folder


def _run(*args: str, block: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run the script in a fresh interpreter; `block` makes those imports fail."""
    code = (
        "import runpy, sys\n"
        f"for name in {list(block)!r}: sys.modules[name] = None\n"
        f"sys.argv = [{str(SCRIPT)!r}] + {list(args)!r}\n"
        f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


# --- observables card ----------------------------------------------------------------------


def test_observables_card_for_hera_cc_em_has_the_data_kinematics(kit: Path):
    data = bfk.load_dataset(CC_EM, kit)
    card = bfk.observables_card(data)
    assert list(card["observables"]) == ["XSHERACC"]
    assert card["prDIS"] == "CC"
    assert card["ProjectileDIS"] == "electron"
    assert card["TargetDIS"] == "proton"
    assert card["interpolation_polynomial_degree"] == 4 and card["interpolation_is_log"] is True
    xgrid = np.array(card["interpolation_xgrid"])
    assert len(xgrid) == 50 and xgrid[-1] == 1.0 and xgrid[0] == pytest.approx(2e-7)
    assert np.all(np.diff(np.log(xgrid)) > 0)
    points = card["observables"]["XSHERACC"]
    assert len(points) == 42
    with np.load(ROOT / "hyperscan" / "data" / "dis" / f"{CC_EM}.npz") as z:
        kin = z["kinematics"]
    np.testing.assert_array_equal([[p["x"], p["Q2"], p["y"]] for p in points], kin)
    assert len({p["Q2"] for p in points}) == 10
    json.dumps(card)  # plain JSON types: it ends up in the grid's metadata


@pytest.mark.parametrize(
    ("dataset", "name", "current", "projectile"),
    [
        ("HERA_CC_318GEV_EP-SIGMARED", "XSHERACC", "CC", "positron"),
        ("HERA_NC_225GEV_EP-SIGMARED", "XSHERANC", "NC", "positron"),
        ("HERA_NC_318GEV_EM-SIGMARED", "XSHERANC", "NC", "electron"),
        ("NMC_NC_NOTFIXED_P_EM-F2-HEPDATA", "F2_total", "NC", "electron"),
        ("BCDMS_NC_NOTFIXED_P_EM-F2-HEPDATA", "F2_total", "NC", "electron"),
    ],
)
def test_observable_per_dataset(dataset, name, current, projectile):
    card = bfk.observables_card(bfk.load_dataset(dataset))
    assert list(card["observables"]) == [name]
    assert (card["prDIS"], card["ProjectileDIS"]) == (current, projectile)
    ys = [p["y"] for p in card["observables"][name]]
    assert all(math.isfinite(y) for y in ys)


def test_f2_without_y_gets_zero_not_nan():
    data = bfk.load_dataset("NMC_NC_NOTFIXED_P_EM-F2-HEPDATA")
    assert np.isnan(data["kinematics"][:, 2]).all()
    points = bfk.observables_card(data)["observables"]["F2_total"]
    assert {p["y"] for p in points} == {0.0}


def test_unknown_process_is_a_usage_error():
    with pytest.raises(bfk.UsageError, match="no yadism observable"):
        bfk.yadism_observable("DY", "SIGMA")


# --- theory and operator card ----------------------------------------------------------------


def test_theory_is_completed_with_the_defaults_the_tables_used(kit: Path):
    theory = bfk.load_theory(kit)
    assert theory["nf0"] == 4 and theory["MaxNfPdf"] == 5 and theory["nfref"] == 5
    assert theory["PTO"] == 1 and theory["FNS"] == "ZM-VFNS" and theory["TMC"] == 0
    assert theory["ModSV"] is None and theory["XIA"] == 1.0
    # a value in the card wins over the default
    card = dict(THEORY_CARD, nf0=3)
    (kit / bfk.THEORY_CARD).write_text(yaml.safe_dump(card), encoding="utf-8")
    assert bfk.load_theory(kit)["nf0"] == 3


def test_missing_theory_card_is_a_usage_error(tmp_path: Path):
    with pytest.raises(bfk.UsageError, match="theory card"):
        bfk.load_theory(tmp_path)


@pytest.mark.parametrize(
    ("text", "said"), [("PTO: [1\n", "is not readable YAML"), ("- a\n", "is not a mapping")]
)
def test_a_damaged_theory_card_is_a_usage_error(tmp_path: Path, text: str, said: str):
    (tmp_path / bfk.THEORY_CARD).write_text(text, encoding="utf-8")
    with pytest.raises(bfk.UsageError, match=said):
        bfk.load_theory(tmp_path)


def test_shipping_from_a_folder_without_kit_files_fails_and_writes_nothing(tmp_path: Path):
    """A mistyped kit folder shipped nothing and exited 0, as if all had gone well."""
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "ship_real_data.py"), str(tmp_path), "--out", out],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "no kit files (*.npz) in" in run.stderr
    assert not out.exists()


def test_operator_card_for_hera_cc_em(kit: Path):
    data = bfk.load_dataset(CC_EM, kit)
    card = bfk.expected_operator_card(data, bfk.load_theory(kit))
    assert card["init"] == [1.65, 4]
    q2 = [mu**2 for mu, _ in card["mugrid"]]
    np.testing.assert_allclose(q2, np.unique(data["kinematics"][:, 1]), rtol=1e-14)
    assert [nf for _, nf in card["mugrid"]] == [5] * 10  # all above mb^2
    assert card["xgrid"] == bfk.PINEKO_XGRID.tolist()
    assert card["configs"]["evolution_method"] == "truncated"
    assert card["configs"]["interpolation_polynomial_degree"] == 4


def test_mugrid_nf_follows_the_matching_scales(kit: Path):
    theory = bfk.load_theory(kit)
    mc2, mb2 = 1.51**2, 4.92**2
    grid = bfk.expected_mugrid(np.array([2.0, 2.0, mc2, 10.0, mb2, 1e5]), theory)
    assert [nf for _, nf in grid] == [3, 4, 4, 5, 5]  # distinct Q2; a matching scale goes up
    # low-Q2 HERA NC data cross both thresholds
    data = bfk.load_dataset("HERA_NC_225GEV_EP-SIGMARED")
    assert {nf for _, nf in bfk.expected_mugrid(data["kinematics"][:, 1], theory)} == {3, 4, 5}


def test_card_mismatches_finds_differences(kit: Path):
    expected = bfk.expected_operator_card(bfk.load_dataset(CC_EM, kit), bfk.load_theory(kit))
    same = json.loads(json.dumps(expected))
    same["eko_version"] = "x"  # extra keys do not matter
    assert bfk.card_mismatches(same, expected) == []
    wrong = json.loads(json.dumps(expected))
    wrong["mugrid"][3][1] = 4
    wrong["configs"]["interpolation_polynomial_degree"] = 1
    wrong["xgrid"] = wrong["xgrid"][1:]
    bad = bfk.card_mismatches(wrong, expected)
    assert len(bad) == 3
    assert any(b.startswith("configs.interpolation_polynomial_degree") for b in bad)


# --- comparison --------------------------------------------------------------------------------


def test_max_rel_diff():
    ref = np.array([[1.0, 0.0, -2.0], [1e-3, 0.0, 0.0], [0.0, 0.0, 0.0]])
    assert bfk.max_rel_diff(ref.copy(), ref) == 0.0
    new = ref.copy()
    new[0, 1] = 2e-9  # a zero entry: relative to the row's largest, not to 0
    assert bfk.max_rel_diff(new, ref) == pytest.approx(1e-9)
    new = ref.copy()
    new[1, 0] *= 1 + 1e-6
    assert bfk.max_rel_diff(new, ref) == pytest.approx(1e-6)
    assert bfk.max_rel_diff(new[:, :, None], ref[:, :, None]) == pytest.approx(1e-6)


def test_test_pdf_depends_on_pid_and_x():
    values = {bfk.test_pdf(pid, 0.1, 10.0) for pid in (21, 100, 103, 200)}
    assert len(values) == 4
    assert bfk.test_pdf(21, 1.0, 10.0) == 0.0 and bfk.test_pdf(21, 0.01, 10.0) > 0


# --- command line errors -----------------------------------------------------------------------


def test_missing_theory_extra_is_a_clear_error(kit: Path):
    run = _run(CC_EM, "--kit", str(kit), block=("yadism",))
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert "`theory` extra is not installed" in run.stderr
    assert "pip install -e '.[theory]'" in run.stderr


def test_unknown_dataset_is_a_clear_error(kit: Path):
    run = _run("NOT_A_DATASET", "--kit", str(kit))
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert "unknown dataset 'NOT_A_DATASET'" in run.stderr
    assert CC_EM in run.stderr  # lists the known ones


def test_check_without_the_shipped_table_is_a_clear_error(kit: Path):
    run = _run(CC_EM, "--kit", str(kit), "--check")
    assert run.returncode == 2
    assert "Traceback" not in run.stderr and "shipped table" in run.stderr


# --- pipeline wiring with stand-ins --------------------------------------------------------------


class _Fakes:
    """Records what build() hands to yadism, pineko and eko; writes small files instead."""

    def __init__(self, bad_nf: bool = False, fail_evolve: bool = False):
        self.calls: dict = {}
        self.bad_nf = bad_nf
        self.fail_evolve = fail_evolve

    def modules(self):
        return (
            SimpleNamespace(run_yadism=self.run_yadism),
            SimpleNamespace(dump_pineappl_to_file=self.dump),
            SimpleNamespace(
                io=SimpleNamespace(
                    runcards=SimpleNamespace(
                        Legacy=self.legacy,
                        OperatorCard=SimpleNamespace(from_dict=lambda card: ("ocard", card)),
                    )
                ),
                runner=SimpleNamespace(managed=SimpleNamespace(solve=self.solve)),
                EKO=SimpleNamespace(edit=lambda path: contextlib.nullcontext(self.edit(path))),
            ),
            SimpleNamespace(
                write_operator_card_from_file=self.write_card, evolve_grid=self.evolve_grid
            ),
            SimpleNamespace(
                grid=SimpleNamespace(Grid=SimpleNamespace(read=self.read_grid)),
            ),
        )

    def run_yadism(self, theory, runcard):
        self.calls["yadism"] = (json.loads(json.dumps(theory)), runcard)
        theory["n3lo_cf_variation"] = (0, 0, 0, 0)  # yadism edits its input
        return "output"

    def dump(self, output, path, obsname):
        self.calls["dump"] = obsname
        Path(path).write_bytes(b"grid")

    def write_card(self, grid_path, card_path, tcard):
        data = bfk.load_dataset(CC_EM)
        card = bfk.expected_operator_card(data, tcard)
        if self.bad_nf:
            card["mugrid"][0][1] = 4
        Path(card_path).write_text(yaml.safe_dump(card), encoding="utf-8")

    def legacy(self, theory, ocard):
        self.calls["legacy"] = theory
        return SimpleNamespace(new_theory=("theory", theory))

    def solve(self, theory, operator, path):
        self.calls["solve"] = (theory, operator)
        Path(path).write_bytes(b"eko")

    def edit(self, path):
        assert Path(path).read_bytes() == b"eko"
        return "operator"

    def read_grid(self, path):
        assert Path(path).read_bytes() == b"grid"
        return SimpleNamespace(optimize=lambda: None)

    def evolve_grid(self, grid, operators, path, max_as, max_al, **kwargs):
        assert operators == ["operator"]
        self.calls["evolve"] = (max_as, max_al, kwargs)
        if self.fail_evolve:
            Path(path).write_bytes(b"half")
            raise RuntimeError("evolution failed")
        Path(path).write_bytes(b"fk table")


@pytest.fixture
def fakes(monkeypatch):
    def install(**options):
        fake = _Fakes(**options)
        monkeypatch.setattr(bfk, "import_theory", fake.modules)
        return fake

    return install


def test_build_wires_the_stages_and_writes_atomically(kit: Path, tmp_path: Path, fakes):
    fake = fakes()
    out = tmp_path / "out"
    path, timings = bfk.build(CC_EM, kit, out)
    assert path == out / f"{CC_EM}.pineappl.lz4"
    assert path.read_bytes() == b"fk table"
    grid = out / f"{CC_EM}.grid.pineappl.lz4"
    assert grid.read_bytes() == b"grid"  # the grid before evolution is kept
    assert sorted(p.name for p in out.iterdir()) == sorted([path.name, grid.name])  # no temporaries
    umask = os.umask(0)
    os.umask(umask)
    for written in (path, grid):
        assert written.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600
    assert {"yadism", "operator card", "eko", "evolve"} <= set(timings)
    theory, runcard = fake.calls["yadism"]
    assert theory["PTO"] == 1 and theory["nf0"] == 4 and theory["n3lo_cf_variation"] == 0
    assert list(runcard["observables"]) == ["XSHERACC"] and fake.calls["dump"] == "XSHERACC"
    # eko gets pineko's legacy keys on its own copy
    assert fake.calls["legacy"]["Qedref"] == 91.2 and fake.calls["legacy"]["MaxNfAs"] == 5
    max_as, max_al, kwargs = fake.calls["evolve"]
    assert (max_as, max_al) == (2, 0)
    assert kwargs["assumptions"] == "Nf4Ind"
    assert (kwargs["xir"], kwargs["xif"], kwargs["xia"]) == (1.0, 1.0, 1.0)
    # the theory metadata is the card as loaded: neither yadism's nor eko's edits leak into it
    assert kwargs["theory_meta"]["n3lo_cf_variation"] == 0
    assert kwargs["theory_meta"]["Qedref"] is None


def test_failed_evolution_leaves_the_old_table(kit: Path, tmp_path: Path, fakes):
    out = tmp_path / "out"
    out.mkdir()
    old = out / f"{CC_EM}.pineappl.lz4"
    old.write_bytes(b"old table")
    fakes(fail_evolve=True)
    with pytest.raises(RuntimeError, match="evolution failed"):
        bfk.build(CC_EM, kit, out)
    assert old.read_bytes() == b"old table"
    grid = out / f"{CC_EM}.grid.pineappl.lz4"  # made before the evolution failed: kept
    assert sorted(p.name for p in out.iterdir()) == sorted([old.name, grid.name])


def test_grid_only_stops_before_the_eko(kit: Path, tmp_path: Path, fakes):
    fake = fakes()
    out = tmp_path / "out"
    path, timings = bfk.build(CC_EM, kit, out, grid_only=True)
    assert path == out / f"{CC_EM}.grid.pineappl.lz4" and path.read_bytes() == b"grid"
    assert sorted(p.name for p in out.iterdir()) == [path.name]
    assert set(timings) == {"yadism"}
    assert "solve" not in fake.calls and "evolve" not in fake.calls


def test_a_failed_yadism_run_leaves_the_old_grid(kit: Path, tmp_path: Path, fakes, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    old = out / f"{CC_EM}.grid.pineappl.lz4"
    old.write_bytes(b"old grid")
    fake = fakes()

    def broken_dump(output, path, obsname):
        Path(path).write_bytes(b"half")
        raise RuntimeError("dump failed")

    monkeypatch.setattr(fake, "dump", broken_dump)
    with pytest.raises(RuntimeError, match="dump failed"):
        bfk.build(CC_EM, kit, out, grid_only=True)
    assert old.read_bytes() == b"old grid"
    assert sorted(p.name for p in out.iterdir()) == [old.name]


def test_operator_card_disagreeing_with_the_expected_stops(kit: Path, tmp_path: Path, fakes):
    fakes(bad_nf=True)
    with pytest.raises(RuntimeError, match="mugrid"):
        bfk.build(CC_EM, kit, tmp_path / "out")


def test_a_dataset_yadism_cannot_compute_is_refused_before_the_heavy_imports(kit: Path):
    """Not after installing the theory extra (~3 GB) only to learn it was of no use."""
    np.savez(
        kit / "TOY_DY.npz",
        kinematics=np.ones((2, 3)),
        process_type=np.asarray("DY"),
        observable=np.asarray("SIGMA"),
    )
    run = _run("TOY_DY", "--kit", str(kit), block=("yadism",))
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert "no yadism observable for process 'DY'" in run.stderr
