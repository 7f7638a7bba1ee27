# SPDX-License-Identifier: GPL-3.0-or-later
"""`hyperscan plot`: PNGs of a small fit; the closure truth where there is one."""

from __future__ import annotations

import io
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from matplotlib.colors import to_rgb
from PIL import Image

from hyperscan.cli import main
from hyperscan.data import FIT_BASIS, toy_pdf
from hyperscan.fit import HISTORY_FILE, PDF_FILE, RESULTS_FILE, RUNCARD_FILE
from hyperscan.report import _fit_plots, load_fit
from hyperscan.report._fit_plots import (
    PHYSICAL,
    PHYSICAL_PLOTTED,
    dataset_chi2_figure,
    fit_figures,
    history_figure,
    pdf_figure,
    pdf_overview_figure,
    sea_ratio_figure,
)
from hyperscan.report._style import BAND, HELD_OUT, png_bytes, style

TINY = {
    "data": {"closure": {"size": "tiny", "level": 1}},
    "replicas": 3,
    "architecture": {"nodes": [8], "activations": ["tanh"]},
    "epochs": 200,
    "training": {"steps_per_call": 50},
}
TRUTH_LABEL = "truth (toy PDF)"
EXPECTED = (
    ["pdfs_evolution.png", "pdfs_physical.png", "chi2_datasets.png", "training_history.png"]
    + ["dbar_over_ubar.png"]
    + [f"pdf_evolution_{name}.png" for name in FIT_BASIS]
    + [f"pdf_physical_{name}.png" for name in PHYSICAL_PLOTTED]
)

#: One figure of each kind of title, the flavour with the longest label.
LONGEST_TITLES = (
    "pdfs_evolution.png",
    "pdfs_physical.png",
    "pdf_physical_c.png",
    "chi2_datasets.png",
    "training_history.png",
)


def _not_blank(png: bytes, what: str, band: bool = True) -> None:
    image = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=float)
    assert image.shape[0] > 200 and image.shape[1] > 300, f"{what}: {image.shape}"
    assert image.std() > 5, f"{what} is blank"
    assert (image.sum(axis=2) < 300).mean() > 0.002, f"{what} has almost nothing drawn"
    if band:  # colour: the band and median are drawn, not only black axes
        blue = (image[:, :, 2] > image[:, :, 0] + 40).mean()
        assert blue > 0.002, f"{what}: no band or median drawn"


@pytest.fixture(scope="module")
def fitdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("fit")
    runcard = root / "tiny.yml"
    runcard.write_text(yaml.safe_dump(TINY))
    outdir = root / "out"
    result = CliRunner().invoke(main, ["fit", str(runcard), "-o", str(outdir), "--no-progress"])
    assert result.exit_code == 0, result.output
    return outdir


def test_the_report_layer_loads_without_tensorflow():
    """The plots read the format hyperscan.fit declares, and the study report the scan
    service: neither needs TensorFlow (seconds, hundreds of MB), nor may import it."""
    code = (
        "import sys\n"
        "from hyperscan.report import load_fit, plot_fit, study_report, ReportError\n"
        "import hyperscan.report._fit_plots\n"
        "assert 'tensorflow' not in sys.modules, 'the report layer imported tensorflow'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_plot_writes_every_png_and_none_is_blank(fitdir, tmp_path):
    outdir = tmp_path / "plots"
    result = CliRunner().invoke(main, ["plot", str(fitdir), "-o", str(outdir)])
    assert result.exit_code == 0, result.output
    assert f"{len(EXPECTED)} plots written to {outdir}/" in result.output
    assert sorted(p.name for p in outdir.iterdir()) == sorted(EXPECTED)
    for path in outdir.iterdir():
        _not_blank(path.read_bytes(), path.name, band=path.name.startswith("pdf"))


def _truth_lines(figure):
    return [
        line for ax in figure.axes for line in ax.get_lines() if line.get_label() == TRUTH_LABEL
    ]


def test_the_light_sea_asymmetry_is_the_members_dbar_over_ubar(fitdir):
    """The Les Houches toy's d̄/ū is 1/(1 − x); the median line is the members' median ratio."""
    fit = load_fit(fitdir)
    with style():
        figure = sea_ratio_figure(fit)
        [truth] = _truth_lines(figure)
        x = truth.get_xdata()
        assert x.min() >= 1e-3 and x.max() <= 0.5 and x.size > 10
        np.testing.assert_allclose(truth.get_ydata(), 1.0 / (1.0 - x), rtol=1e-10)
        [median] = [line for line in figure.axes[0].get_lines() if line.get_label() == "median"]
        names, values = fit.pdfs(PHYSICAL)
        keep = np.isin(fit.x, x)
        used = values[fit.used][:, keep]
        ratio = used[:, :, names.index("dbar")] / used[:, :, names.index("ubar")]
        np.testing.assert_allclose(median.get_ydata(), np.median(ratio, axis=0), rtol=1e-12)


def test_closure_truth_is_drawn(fitdir):
    fit = load_fit(fitdir)
    assert fit.closure == {"size": "tiny", "level": 1, "seed": 0, "fits": 1}
    with style():
        overview = pdf_overview_figure(fit)
        lines = _truth_lines(overview)
        assert len(lines) == len(FIT_BASIS)
        truth = toy_pdf(fit.x)
        for k, line in enumerate(lines):
            np.testing.assert_allclose(line.get_ydata(), truth[:, k], rtol=0, atol=1e-12)
        # Physical basis: u - ubar is the toy's u valence, A x^0.8 (1 - x)^3 with int uv = 2.
        physical = fit.truth(PHYSICAL)
        u, ubar = (physical[:, PHYSICAL_PLOTTED.index(n)] for n in ("u", "ubar"))
        norm = 2.0 / math.exp(math.lgamma(0.8) + math.lgamma(4.0) - math.lgamma(4.8))
        inside = fit.x < 1
        shape = fit.x[inside] ** 0.8 * (1 - fit.x[inside]) ** 3
        np.testing.assert_allclose((u - ubar)[inside], norm * shape, rtol=1e-10)
        assert len(_truth_lines(pdf_overview_figure(fit, PHYSICAL))) == len(PHYSICAL_PLOTTED)
        one = pdf_figure(fit, "g")
        assert len(_truth_lines(one)) == 1 and len(one.axes) == 2  # with the pull panel


def _pdf_arrays(fit: Path) -> dict[str, np.ndarray]:
    """The arrays of a copied fit's pdfs.npz, to edit and save back with np.savez."""
    with np.load(fit / PDF_FILE) as archive:
        return {key: archive[key] for key in archive.files}


def test_fit_without_closure_has_no_truth(fitdir, tmp_path):
    copy = tmp_path / "fit"
    shutil.copytree(fitdir, copy)
    card = yaml.safe_load((copy / RUNCARD_FILE).read_text())
    del card["data"]["closure"]
    (copy / RUNCARD_FILE).write_text(yaml.safe_dump(card))
    fit = load_fit(copy)
    assert fit.closure is None and fit.truth() is None
    with style():
        assert _truth_lines(pdf_overview_figure(fit)) == []
        one = pdf_figure(fit, "Sigma")
        assert _truth_lines(one) == [] and len(one.axes) == 1
        _not_blank(png_bytes(one), "no-truth flavour plot")


def test_excluded_members_leave_the_bands(fitdir, tmp_path):
    """A diverged member (NaN PDFs) is left out of bands and chi2, and counted."""
    copy = tmp_path / "fit"
    shutil.copytree(fitdir, copy)
    arrays = _pdf_arrays(copy)
    arrays["xf"][1] = np.nan
    arrays["status"] = np.array(["ok", "diverged", "pos-veto"])
    np.savez(copy / PDF_FILE, **arrays)
    document = json.loads((copy / RESULTS_FILE).read_text())
    document["members"][1]["status"] = "diverged"
    document["members"][1]["chi2_per_point"]["experimental"] = None
    (copy / RESULTS_FILE).write_text(json.dumps(document))
    fit = load_fit(copy)
    assert fit.used.tolist() == [True, False, False]
    assert fit.members_note() == "1 of 3 members (excluded: 1 diverged, 1 pos-veto)"
    with style():
        figures = [
            ("1 of 3 members", pdf_overview_figure(fit)),
            ("1 of 3 members", dataset_chi2_figure(fit)),
            ("all 3 members", history_figure(fit)),  # how the excluded ones trained is shown too
        ]
        for note, figure in figures:
            assert note in figure.get_suptitle() + "".join(ax.get_title() for ax in figure.axes)
            _not_blank(png_bytes(figure), "figure with excluded members", band=False)


def test_with_no_member_ok_the_pos_veto_ones_are_shown_and_said_to_be(fitdir, tmp_path):
    """A diverged member's PDFs can be finite and huge: bands of pos-veto members only, and
    every title says no member is ok."""
    copy = tmp_path / "fit"
    shutil.copytree(fitdir, copy)
    arrays = _pdf_arrays(copy)
    arrays["status"] = np.array(["pos-veto", "diverged", "pos-veto"])
    np.savez(copy / PDF_FILE, **arrays)
    document = json.loads((copy / RESULTS_FILE).read_text())
    for member, status in zip(document["members"], arrays["status"], strict=True):
        member["status"] = str(status)
    (copy / RESULTS_FILE).write_text(json.dumps(document))
    fit = load_fit(copy)
    assert fit.used.tolist() == [True, False, True]
    assert fit.members_note() == "no member ok: 2 of 3 members (excluded: 1 diverged)"
    with style():
        assert "no member ok" in pdf_overview_figure(fit).get_suptitle()


@pytest.mark.parametrize(
    ("statuses", "used", "note"),
    [
        (("ok", "interrupted", "interrupted"), [True, False, False], "1 of 3 members"),
        (("interrupted", "diverged", "pos-veto"), [True, False, True], "no member ok: 2 of 3"),
    ],
)
def test_interrupted_members_are_counted_as_such(fitdir, tmp_path, statuses, used, note):
    """Members still training when the fit was interrupted are named so in the figures; with
    no member ok they are in the bands, as pos-veto ones are (trained, not yet positive)."""
    copy = tmp_path / "fit"
    shutil.copytree(fitdir, copy)
    arrays = _pdf_arrays(copy)
    arrays["status"] = np.array(statuses)
    np.savez(copy / PDF_FILE, **arrays)
    fit = load_fit(copy)
    assert fit.used.tolist() == used
    excluded = [s for s, u in zip(statuses, used, strict=True) if not u]
    assert fit.members_note().startswith(note)
    assert f"(excluded: {len(excluded)} {excluded[0]})" in fit.members_note()
    with style():
        assert fit.members_note() in pdf_overview_figure(fit).get_suptitle()


def _kfold_copy(fitdir, tmp_path, folds, held_out):
    """The fit as if k-fold: member m of fold ``folds[m]``, fold k holding ``held_out[k]``."""
    copy = tmp_path / "kfold"
    shutil.copytree(fitdir, copy)
    arrays = _pdf_arrays(copy)
    arrays["status"] = np.array(["ok"] * len(folds))
    arrays["folds"] = np.array(folds)
    np.savez(copy / PDF_FILE, **arrays)
    document = json.loads((copy / RESULTS_FILE).read_text())
    for member, fold in zip(document["members"], folds, strict=True):
        member["fold"], member["status"] = fold, "ok"
    (copy / RESULTS_FILE).write_text(json.dumps(document))
    card = yaml.safe_load((copy / RUNCARD_FILE).read_text())
    card["folds"] = held_out
    (copy / RUNCARD_FILE).write_text(yaml.safe_dump(card))
    return copy


def _drawn(figure, colour):
    """(chi2, y) of every member drawn in ``colour`` in the chi2 figure."""
    rgb = to_rgb(colour)
    return [
        tuple(point)
        for collection in figure.axes[0].collections
        if len(collection.get_offsets()) and tuple(collection.get_facecolor()[0][:3]) == rgb
        for point in collection.get_offsets()
    ]


def test_kfold_chi2_shows_fitted_and_held_out_members_apart(fitdir, tmp_path):
    """A dataset's chi2 of the members that held it out is a prediction: drawn apart from
    that of the members that fitted it (they were pooled into one band); the title says k-fold."""
    names = list(
        json.loads((fitdir / RESULTS_FILE).read_text())["members"][0]["dataset_chi2_per_point"]
    )
    first, second = names[0], names[1]
    fit = load_fit(_kfold_copy(fitdir, tmp_path, [0, 1, 1], [[first], [second]]))
    chi2 = [m["dataset_chi2_per_point"] for m in fit.members]
    with style():
        figure = dataset_chi2_figure(fit)
        held_out = sorted(x for x, _ in _drawn(figure, HELD_OUT))
        assert held_out == sorted([chi2[0][first], chi2[1][second], chi2[2][second]])
        fitted = [x for x, _ in _drawn(figure, BAND)]
        assert chi2[0][first] not in fitted and chi2[1][first] in fitted
        assert chi2[0][second] in fitted and chi2[1][second] not in fitted
        assert "k-fold (2 folds)" in figure.axes[0].get_title()
        legend = [t.get_text() for legend in figure.legends for t in legend.get_texts()]
        assert "held out: 68% of members" in legend and "fitted: 68% of members" in legend
        ticks = [t.get_text() for t in figure.axes[0].get_yticklabels()]
        assert f"{first} (" in ticks[1] and ticks[1].endswith("held out by fold 0")
        assert "held out" not in ticks[3]  # in no fold: one row, every member fitted it
        _not_blank(png_bytes(figure), "k-fold chi2 figure")
        assert fit.kfold and fit.folds == (0, 1, 1)
        assert fit.held_out == (frozenset({first}), frozenset({second}), frozenset({second}))

        plain = load_fit(fitdir)  # without folds: one row per dataset, as before
        figure = dataset_chi2_figure(plain)
        assert _drawn(figure, HELD_OUT) == [] and "k-fold" not in figure.axes[0].get_title()
        legend = [t.get_text() for legend in figure.legends for t in legend.get_texts()]
        assert legend == ["68% of members", "median", "one member"]


def test_kfold_chi2_says_which_rows_have_no_member(fitdir, tmp_path):
    """Fold 0's only member diverged: no member shown held its dataset out, or fitted fold 1's;
    the empty rows say so, else the other row of the dataset would read as either."""
    names = list(
        json.loads((fitdir / RESULTS_FILE).read_text())["members"][0]["dataset_chi2_per_point"]
    )
    copy = _kfold_copy(fitdir, tmp_path, [0, 1, 1], [[names[0]], [names[1]]])
    arrays = _pdf_arrays(copy)
    arrays["xf"][0] = np.nan
    arrays["status"] = np.array(["diverged", "ok", "ok"])
    np.savez(copy / PDF_FILE, **arrays)
    with style():
        figure = dataset_chi2_figure(load_fit(copy))
    notes = [t.get_text() for t in figure.axes[0].texts]
    assert notes == ["held out: no member", "fitted: no member"]


def test_long_titles_are_wrapped_inside_every_figure(fitdir, tmp_path):
    """A long folder name and members note: every title stays within its figure (one line
    was cut off by the figure's edge)."""
    copy = tmp_path / "closure-fit-of-the-best-trial-of-the-kfold-scan-refitted"
    shutil.copytree(fitdir, copy)
    arrays = _pdf_arrays(copy)
    arrays["status"] = np.array(["ok", "pos-veto", "pos-veto"])
    np.savez(copy / PDF_FILE, **arrays)
    fit = load_fit(copy)
    with style():
        figures = fit_figures(fit)
        assert sorted(figures) == sorted(EXPECTED)
        # One of each title's kind (the flavour figures differ only by the flavour's label).
        for name in LONGEST_TITLES:
            figure = figures[name]
            figure.draw_without_rendering()
            edge = figure.bbox
            for title in [figure._suptitle, *(ax.title for ax in figure.axes)]:
                if title is None or not title.get_text():
                    continue
                box = title.get_window_extent()
                assert edge.x0 - 0.5 <= box.x0 and box.x1 <= edge.x1 + 0.5, (name, box)
                assert box.y1 <= edge.y1 + 0.5, (name, box)


def test_a_history_of_one_record_is_drawn_as_points(fitdir, tmp_path):
    copy = tmp_path / "fit"
    shutil.copytree(fitdir, copy)
    with np.load(copy / HISTORY_FILE) as archive:
        arrays = {key: archive[key][:1] for key in archive.files}
    np.savez(copy / HISTORY_FILE, **arrays)
    with style():
        figure = history_figure(load_fit(copy))
    assert "one record" in figure.get_suptitle()
    lines = [line for ax in figure.axes for line in ax.get_lines() if len(line.get_xdata()) == 1]
    assert lines and all(line.get_marker() == "o" for line in lines)


def test_not_a_fit_folder_exits_2(tmp_path):
    (tmp_path / "results.json").write_text("{}")
    result = CliRunner().invoke(main, ["plot", str(tmp_path), "-o", str(tmp_path / "plots")])
    assert result.exit_code == 2
    assert "it has no pdfs.npz, runcard.yml" in result.output
    assert "Traceback" not in result.output
    missing = CliRunner().invoke(main, ["plot", str(tmp_path / "nope"), "-o", str(tmp_path)])
    assert missing.exit_code == 2 and "is not a folder" in missing.output
    assert not (tmp_path / "plots").exists()


def test_a_damaged_archive_is_named_not_a_pickle_hint(fitdir, tmp_path):
    damaged = tmp_path / "damaged"
    shutil.copytree(fitdir, damaged)
    (damaged / "pdfs.npz").write_bytes(b"not an archive")
    result = CliRunner().invoke(main, ["plot", str(damaged), "-o", str(tmp_path / "plots")])
    assert result.exit_code == 2
    assert "pdfs.npz is not an .npz archive" in result.output
    assert "pickle" not in result.output and "Traceback" not in result.output


def _damaged_copy(fitdir, tmp_path, name):
    damaged = tmp_path / name
    shutil.copytree(fitdir, damaged)
    return damaged


def test_damaged_files_are_messages_and_leave_no_half_set_of_plots(fitdir, tmp_path):
    """Each damage once: a member that is not a mapping, a member of a fold the runcard does
    not list, a history of the wrong shape, a runcard that is not UTF-8, a member's chi2 table
    of the wrong kind (met while drawing)."""
    members = _damaged_copy(fitdir, tmp_path, "members")
    results = json.loads((members / "results.json").read_text())
    results["members"][1] = "oops"
    (members / "results.json").write_text(json.dumps(results))

    history = _damaged_copy(fitdir, tmp_path, "history")
    with np.load(history / "history.npz") as archive:
        arrays = dict(archive)
    arrays["chi2_per_point"] = arrays["chi2_per_point"][:, :1]
    np.savez(history / "history.npz", **arrays)

    runcard = _damaged_copy(fitdir, tmp_path, "runcard")
    (runcard / "runcard.yml").write_bytes(b"\xff\xfe not utf-8")

    drawing = _damaged_copy(fitdir, tmp_path, "drawing")
    results = json.loads((drawing / "results.json").read_text())
    for member in results["members"]:
        member["dataset_chi2_per_point"] = ["not", "a", "mapping"]
    (drawing / "results.json").write_text(json.dumps(results))

    folds = _damaged_copy(fitdir, tmp_path, "folds")
    results = json.loads((folds / "results.json").read_text())
    results["members"][1]["fold"] = 2
    (folds / "results.json").write_text(json.dumps(results))

    for folder, said in (
        (members, "a member is not a mapping"),
        (folds, "has a member of fold 2, but runcard.yml lists 0 folds"),
        (history, "chi2_per_point has shape"),
        (runcard, "cannot read"),
        (drawing, "damaged fit output"),
    ):
        plots = tmp_path / f"plots-{folder.name}"
        result = CliRunner().invoke(main, ["plot", str(folder), "-o", str(plots)])
        assert result.exit_code == 2, (folder.name, result.output)
        assert said in result.output and "Traceback" not in result.output
        assert not plots.exists()


def test_a_plot_that_cannot_be_written_leaves_the_others_as_they_were(
    fitdir, tmp_path, monkeypatch
):
    """A folder in the way of one PNG: a message naming it, before any figure is rendered
    (seconds each), and no file of the set changed."""
    outdir = tmp_path / "plots"
    outdir.mkdir()
    (outdir / "training_history.png").write_bytes(b"old")
    (outdir / "pdfs_physical.png").mkdir()
    rendered = []
    monkeypatch.setattr(_fit_plots, "png_bytes", lambda figure: rendered.append(figure) or b"")
    result = CliRunner().invoke(main, ["plot", str(fitdir), "-o", str(outdir)])
    assert rendered == []
    assert result.exit_code == 2, result.output
    assert f"{outdir / 'pdfs_physical.png'} exists and is not a file" in result.output
    assert sorted(p.name for p in outdir.iterdir()) == ["pdfs_physical.png", "training_history.png"]
    assert (outdir / "training_history.png").read_bytes() == b"old"


def test_an_empty_output_is_refused_not_the_current_folder(fitdir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["plot", str(fitdir), "-o", ""])
    assert result.exit_code == 2 and "is empty: give a folder name" in result.output
    assert list(tmp_path.iterdir()) == []


def _median_line(figure, ax_index):
    (line,) = [ln for ln in figure.axes[ax_index].get_lines() if ln.get_label() == "median"]
    return line.get_ydata()


def test_an_evolved_fit_is_also_drawn_at_100_gev_with_its_evolved_truth(fitdir, tmp_path):
    """With an identity EKO the set at 100 GeV holds the exportgrids' values: the median is
    theirs over the ok replicas, the truth the toy PDF's, and the ratio to it is drawn. After
    postfit, the final set's replicas are those drawn, and the figure says so."""
    from _ekos import made_eko

    from hyperscan.data import LHA_BASIS
    from hyperscan.pdfset import evolve_fit, nnpdf_theory, postfit, read_fit
    from hyperscan.pdfset._evolve import toy_pdf_lha

    copy = tmp_path / fitdir.name  # the exportgrids are named after the fit folder
    shutil.copytree(fitdir, copy)
    exported = read_fit(copy)
    eko = tmp_path / "identity.tar"
    made_eko(eko, nnpdf_theory(exported.theory.card), exported.xgrid, seed=None)
    evolve_fit(copy, eko=eko)
    fit = load_fit(copy)
    new = ["pdfs_100GeV.png", "pdfs_100GeV_ratio_to_truth.png"]
    keep = exported.xgrid >= fit.x.min()
    ok = [i for i, m in enumerate(fit.members) if m["status"] == "ok"]
    u = LHA_BASIS.index("U")
    with style():
        # The set `hyperscan plot` writes (test_plot_writes_every_png_...): the new ones drawn.
        figures = fit_figures(fit)
        assert sorted(figures) == sorted(EXPECTED + new)
        for name in new:
            _not_blank(png_bytes(figures[name]), name)
        figure = figures["pdfs_100GeV.png"]
        median = np.median(exported.xf[ok][:, keep, u], axis=0)
        np.testing.assert_allclose(_median_line(figure, 0), median, rtol=1e-7, atol=1e-12)
        (truth,) = [ln for ln in figure.axes[0].get_lines() if ln.get_label() == "truth"]
        np.testing.assert_allclose(
            truth.get_ydata(), toy_pdf_lha(exported.xgrid)[keep, u], rtol=1e-7, atol=1e-12
        )
        assert f"{len(ok)} replicas with status ok of the evolved set" in figure.get_suptitle()
    for replica in fit.replicas:
        info = copy / f"nnfit/replica_{replica}/{copy.name}.json"
        info.write_text(json.dumps(json.loads(info.read_text()) | {"pos_state": "POS_PASS"}))
    postfit(copy, replicas=2)
    with style():
        figure = fit_figures(load_fit(copy))["pdfs_100GeV.png"]
        assert f"the 2 replicas postfit selected (postfit/{copy.name})" in figure.get_suptitle()
        median = np.median(exported.xf[:2][:, keep, u], axis=0)
        np.testing.assert_allclose(_median_line(figure, 0), median, rtol=1e-7, atol=1e-12)


def test_without_a_set_there_is_no_plot_at_100_gev(fitdir):
    assert load_fit(fitdir).evolved is None
