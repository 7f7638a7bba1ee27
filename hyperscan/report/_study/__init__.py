# SPDX-License-Identifier: GPL-3.0-or-later
"""The HTML report of a study: one self-contained page a physicist reads after a scan.

Everything is on the page: figures are PNGs in ``data:`` URIs, the style is a few lines of
inline CSS, and there is no JavaScript, so the file opens anywhere, offline, and can be mailed
or attached to a logbook. Sections: summary, objective history with the running best, the
statistic against each hyperparameter (pruned and trashed trials apart, with reasons),
parameter importances, the spread of replica chi2 per trial, the best trials, trial states and
worker throughput over time, the trials set apart, and the study's runcard. A study whose
finished trials were all pruned, trashed or failed gets the page too, saying that nothing is
best: where those trials went and why is what its user needs then.

Three modules, one job each: ``trials`` reads the study into plain records, ``figures`` draws
them, ``page`` fills the template ``page.html`` (package data) with the sections.
"""

from hyperscan.report._study.page import ReportError, study_report

__all__ = ["ReportError", "study_report"]
