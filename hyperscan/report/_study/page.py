# SPDX-License-Identifier: GPL-3.0-or-later
"""The page: page.html (the layout, style and sections) filled with each section's content,
the tables and the figures as PNGs in ``data:`` URIs."""

from __future__ import annotations

import datetime
from importlib import resources
from string import Template

import optuna
from matplotlib.figure import Figure

from hyperscan._version import __version__
from hyperscan.report._study.figures import (
    history_figure,
    importance_figure,
    merit_figure,
    param_figure,
    spread_figure,
    states_figure,
    throughput_figure,
)
from hyperscan.report._study.front import front_section
from hyperscan.report._study.tables import (
    apart_rows,
    best_table,
    escape,
    export_any,
    folds_note,
    html_table,
    summary_rows,
)
from hyperscan.report._study.trials import (
    MERITS,
    TrialRecord,
    Trials,
    category,
    importances,
    merit_columns,
    objective_text,
    parameter_order,
    runcard,
)
from hyperscan.report._style import STATE_ORDER, data_uri, style
from hyperscan.runcard import ScanRuncard

_MAX_LISTED = 60  # rows of the "set apart" table


class ReportError(Exception):
    """Nothing to report on yet (no finished trial): a message for the user, not a bug."""


def _img(figure: Figure, alt: str) -> str:
    return f'<img src="{data_uri(figure)}" alt="{escape(alt)}">'


def _template() -> Template:
    """page.html: the page's layout, style and navigation, a `$name` where each part goes
    (title, generated, version, summary, no_best, one per section, runcard); package data."""
    return Template(resources.files(__package__).joinpath("page.html").read_text("utf-8"))


# --------------------------------------------------------------------------- sections


def _history(trials: Trials, sentence: str, label: str) -> str:
    if not (trials.complete or any(t.last_report for t in trials.pruned)):
        return (
            "<p>No trial has a value to plot: none is complete, trashed and failed trials "
            "have none, and no pruned trial reported one to the pruner.</p>"
        )
    return (
        f"<p>Trial value = {escape(sentence)}. "
        + ("The orange line is the best value so far. " if trials.complete else "")
        + "Pruned trials are drawn at their last report to the pruner; trashed trials "
        "(diverged replicas) have no value and are marked along the top.</p>"
        + _img(history_figure(trials, label), "objective history")
    )


def _parameters(trials: Trials, label: str, best: TrialRecord | None) -> str:
    figures = [
        _img(figure, f"trial value against {name}")
        for name in parameter_order(trials.all)
        if (figure := param_figure(name, trials, label, best)) is not None
    ]
    if not figures:
        return "<p>No complete, pruned or trashed trial to plot.</p>"
    return (
        (
            "<p>Complete trials coloured by trial number (dark: early, yellow: late); "
            "the star is the best trial. Categorical parameters show the distribution "
            "of values per choice. Below each panel, the values of pruned (○) and "
            "trashed (×) trials, which have no value to plot; alone where no complete "
            "trial has the parameter. "
            if trials.complete
            else "<p>No trial is complete, so there is no value to plot: each panel "
            "shows where in the searched range the pruned (○) and trashed (×) trials "
            "went. "
        )
        + "Their reasons are listed under "
        '<a href="#apart">Trials set apart</a>.</p><div class="grid">' + "".join(figures) + "</div>"
    )


def _merits(trials: Trials, card: ScanRuncard | None, best: TrialRecord | None) -> str:
    keys = merit_columns(card, trials.complete)
    if not keys:
        return (
            "<p>No complete trial stored ensemble figures of merit (φ, or the closure "
            "estimators, which need closure data).</p>"
        )
    names = parameter_order(trials.complete)
    figures = [
        _img(figure, f"{MERITS[key][0]} against each parameter")
        for key in keys
        if (figure := merit_figure(key, trials, names, best)) is not None
    ]
    closure = any(key in keys for key in ("bias", "rbv"))
    return (
        "<p>Each complete trial's ensemble figures, whatever its objective, each the mean over "
        "its folds (on the data each fold scores; docs/objectives.md): φ, the replicas' "
        "spread in units of the data uncertainties (n3fit's <code>phi2</code>)"
        + (
            "; the closure estimators against the known truth: bias and variance (χ² per "
            "point of the mean to the truth, of the replicas to their mean), R_bv = "
            "√(bias / variance) (ideal 1) and ξ₁σ, the fraction of the covariance's "
            "eigenvectors along which the truth is within the replicas' 1σ (ideal 0.683)"
            if closure
            else ""
        )
        + ". They are also columns of the best-trials table.</p>"
        + "".join(figures)
    )


def _importances(study: optuna.Study, trials: Trials) -> str:
    found, note = importances(study, trials)
    figure = _img(importance_figure(found), "parameter importances") if found else ""
    return f"<p>{escape(note)}</p>{figure}"


def _spread(trials: Trials, card: ScanRuncard | None, label: str) -> str:
    chi2 = category(card)
    figure = spread_figure(trials, chi2, label)
    if figure is None:
        return "<p>No trial recorded the spread of its replicas.</p>"
    return (
        f"<p>The {escape(chi2.replace('_', '-'))} χ² per point of each replica: a good "
        "trial is good for every replica, not for a lucky few. A long whisker above a "
        "low median is a trial with an unstable replica."
        + (
            " In this k-fold study each fold's replicas are scored on other datasets, "
            "so the spread also holds the folds' differences: the best-trials table "
            "gives each fold's value."
            if card is not None and card.scan.folds
            else ""
        )
        + "</p>"
        + _img(figure, "replica chi2 spread per trial")
    )


def _best(name: str, trials: Trials, card: ScanRuncard | None, top: int, multi: bool) -> str:
    if not trials.complete:
        return (
            "<p>None: no trial is complete, so there is nothing to rank, and "
            "<code>hyperscan export</code> has no best trial to write"
            f"{escape(export_any(name, trials))}.</p>"
        )
    chi2 = category(card)
    return (
        f"<p>The {min(top, len(trials.complete))} best of {len(trials.complete)} "
        f"complete trials. Replica columns: {escape(chi2.replace('_', '-'))} χ² per "
        "point. Members: how many were fitted, and how many of them diverged (up to "
        "<code>scan.divergence.max_diverged</code>) or were vetoed by positivity "
        "(pos-veto: no step passed positivity and the χ² threshold, so n3fit would "
        "discard the replica; up to <code>scan.divergence.max_pos_veto</code>, if set); "
        "their χ² counts in the trial value all the same. Best "
        "epoch: the median over the members that have one, with how many do when a "
        f"member has none. {_export_note(name, multi)}"
        f"{escape(folds_note(card))}</p>" + best_table(trials, chi2, top, card)
    )


def _export_note(name: str, multi: bool) -> str:
    """What `hyperscan export` writes: a multi-objective study has no best to write, so the
    table ranks by its first objective only."""
    command = f"<code>hyperscan export --study {escape(name)}</code>"
    if multi:
        return (
            "Ranked by the first objective: a multi-objective study has no single best. "
            f"{command} with <code>--rule</code> writes a trial of its Pareto front, with "
            "<code>--trial N</code> any other."
        )
    return f"{command} writes the best as a fit runcard, with <code>--trial N</code> any other."


def _workers(trials: Trials, now: datetime.datetime) -> str:
    throughput = throughput_figure(trials, now)
    return _img(states_figure(trials.counts), "trials by state") + (
        "" if throughput is None else _img(throughput, "worker throughput over time")
    )


def _apart(trials: Trials) -> str:
    rows = apart_rows(trials)
    if not rows:
        return "<p>None: every finished trial completed.</p>"
    more = len(rows) - _MAX_LISTED
    return (
        "<p>Never eligible as best. Trashed: more replicas diverged than "
        "<code>scan.divergence.max_diverged</code> allows, or were pos-veto than "
        "<code>scan.divergence.max_pos_veto</code> does (the sampler learns to avoid "
        "the region). Pruned: stopped early by the pruner. Failed: the worker died or was "
        "stopped; such trials are re-queued.</p>"
        + html_table(
            ["trial", "state", "worker", "reason"], rows[:_MAX_LISTED], {0}, frozenset({2})
        )
        + (f"<p class='muted'>… and {more} more.</p>" if more > 0 else "")
    )


def _no_best(name: str, trials: Trials, listed: str) -> str:
    if trials.complete:
        return ""
    return (
        f'<p class="note">No trial is complete yet ({escape(listed)}): none is best, and '
        "<code>hyperscan export</code> has no best trial to write"
        f"{escape(export_any(name, trials))}. What the finished trials "
        "tell is below: where in the space they were pruned or trashed, and why, under "
        '<a href="#apart">Trials set apart</a>.</p>'
    )


def _runcard(text: str | None) -> str:
    if text is None:
        return ""
    return (
        '<section id="runcard"><h2>Runcard of the study</h2><details><summary>show'
        f"</summary><pre>{escape(text)}</pre></details></section>"
    )


def study_report(
    study: optuna.Study,
    url: str,
    *,
    top: int = 10,
    now: datetime.datetime | None = None,
) -> str:
    """The report of ``study`` (stored at the redacted ``url``) as one self-contained HTML page.

    Raises :class:`ReportError` when no trial has finished yet. Finished trials none of which
    completed (all pruned, trashed or failed) are when the user most needs to see where and
    why: the page says that nothing is best and leaves out only what needs a value.
    """
    now = now or datetime.datetime.now()
    many = len(study.directions) > 1
    trials = Trials.of(
        study.get_trials(deepcopy=False),
        maximize=study.directions[0] == optuna.study.StudyDirection.MAXIMIZE,
    )
    counts = trials.counts
    listed = ", ".join(f"{counts[s]} {s}" for s in STATE_ORDER if counts.get(s))
    if not (trials.complete or trials.pruned or trials.trashed or trials.failed):
        raise ReportError(
            f"study {study.study_name!r} has no finished trial yet ({listed or 'no trials'}), "
            "so there is nothing to report; run workers, or see "
            f"`hyperscan study status --study {study.study_name}`"
        )
    card, runcard_text = runcard(study)
    sentence, label = objective_text(card)
    best = trials.ranked[0] if trials.complete else None
    name = study.study_name
    front = [t.number for t in study.best_trials] if many else None
    with style():  # the figures' look, read as their artists are made
        sections = {
            "history": _history(trials, sentence, label),
            "parameters": _parameters(trials, label, best),
            "merits": _merits(trials, card, best),
            "importances": _importances(study, trials),
            "spread": _spread(trials, card, label),
            "best": _best(name, trials, card, top, front is not None),
            "workers": _workers(trials, now),
            "front": "" if front is None else front_section(trials, front, card),
        }
    summary = "".join(
        f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>"
        for k, v in summary_rows(study, url, card, trials, counts, front)
    )
    title = f"hyperscan report: {name}"
    return _template().substitute(
        title=escape(title),
        generated=f"{now:%Y-%m-%d %H:%M}",
        version=escape(__version__),
        summary=summary,
        no_best=_no_best(name, trials, listed),
        front_nav='<a href="#front">Pareto front</a>\n' if sections["front"] else "",
        **sections,
        apart=_apart(trials),
        runcard=_runcard(runcard_text),
    )
