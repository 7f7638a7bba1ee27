"""The files a fit writes into its folder, their keys and status values: what the writer
(``_output``) and every reader (``hyperscan plot``, scripts) agree on.

No TensorFlow and no numpy here: readers import this without paying for the fit.

``results.json``
    ``hyperscan_version``, ``steps``, ``seconds``, ``training_seconds``, ``interrupted``, and
    ``members``: per member ``replica``, ``fold`` (-1 without folds), ``status`` (one of
    MEMBER_STATUSES), ``best_epoch``, ``stop_epoch``, ``chi2_per_point`` (by category, and
    ``experimental``), ``dataset_chi2_per_point``; ``divergence`` and ``redrawn_starts`` only
    on the members they concern. A non-finite χ² is null.
``pdfs.npz``
    PDF_ARRAYS: x·f of every member at Q0 on ``x`` (fitted basis ``xf``, flavour basis
    ``xf_flavour_basis``) and on the fit's own grid, the bases' names, and per member its
    replica, fold and status.
``history.npz``
    HISTORY_ARRAYS: at every host sync the step, every member's χ² per point (training,
    validation, held-out) and its training state (RUNNING, STOPPED, DIVERGED, FINISHED).
``runcard.yml``
    The fit runcard as fitted.
``nnfit/replica_<i>/<folder name>.exportgrid``
    Each replica's x·f at Q0 on n3fit's export grid, as n3fit 4.1.5 writes it (``_exportgrid``).
``nnfit/replica_<i>/<folder name>.json``, ``nnfit/replica_<i>/chi2exps.log``
    Beside each exportgrid, what n3fit's postfit judges the replica on (``_fitinfo``).
"""

RESULTS_FILE = "results.json"
PDF_FILE = "pdfs.npz"
HISTORY_FILE = "history.npz"
RUNCARD_FILE = "runcard.yml"

#: A member's status at the end of a fit. ``ok``: it has a best step (passed positivity and
#: the χ² threshold); ``pos-veto``: it ran to its stop without one; ``diverged``: its loss or
#: weights blew up; ``interrupted``: the fit was stopped while it was still training without a
#: best step yet, which says nothing about whether it would have had one.
OK, POSITIVITY_VETO, DIVERGED_STATUS, INTERRUPTED = "ok", "pos-veto", "diverged", "interrupted"
MEMBER_STATUSES = (OK, POSITIVITY_VETO, DIVERGED_STATUS, INTERRUPTED)

#: A member's training state at a sync: the trainer's codes, as ``history.npz`` stores them.
#: FINISHED: its own epochs ran out (members of one fit may have different epochs).
RUNNING, STOPPED, DIVERGED, FINISHED = 0, 1, 2, 3

PDF_ARRAYS = (
    "x",
    "xf",
    "xf_flavour_basis",
    "grid_x",
    "grid_xf_flavour_basis",
    "basis",
    "flavour_basis",
    "replicas",
    "folds",
    "status",
)
HISTORY_ARRAYS = ("step", "chi2_per_point", "status")
