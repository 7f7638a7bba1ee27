# SPDX-License-Identifier: GPL-3.0-or-later
"""The shared "skip here, fail under CI=true" of tests whose server, tool or data are missing."""

import pytest


@pytest.mark.parametrize("ci", ["true", "TRUE"])
def test_under_ci_a_missing_tool_fails_the_test(skip_or_fail_on_ci, monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match="^it is missing on CI$"):
        skip_or_fail_on_ci("not installed here", on_ci="it is missing on CI")
    with pytest.raises(pytest.fail.Exception, match="^not installed here$"):
        skip_or_fail_on_ci("not installed here")


@pytest.mark.parametrize("ci", [None, "false", ""])
def test_elsewhere_a_missing_tool_skips_the_test(skip_or_fail_on_ci, monkeypatch, ci):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match="^not installed here$"):
        skip_or_fail_on_ci("not installed here", on_ci="it is missing on CI")
