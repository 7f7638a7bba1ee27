# SPDX-License-Identifier: GPL-3.0-or-later
"""The one error a user's input can cause here."""


class EvolveError(ValueError):
    """A fit folder, theory card or EKO that cannot make a PDF set: the message says which
    file and why, in one line."""
