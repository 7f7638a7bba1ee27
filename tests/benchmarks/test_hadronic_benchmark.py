"""benchmarks/hadronic.py (issue #50): its byte counts are the formulas', its contraction orders
compute the host's predictions, and its --quick run prints every section, in seconds."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from _scripts import load_benchmark

from hyperscan.data import FK_BASIS


@pytest.fixture(scope="module")
def hadronic():
    return load_benchmark("hadronic")


def test_the_bytes_per_point_are_the_dense_and_masked_table_sizes(hadronic):
    assert len(FK_BASIS) ** 2 == hadronic.DENSE_PAIRS == 196
    assert hadronic.MAX_PAIRS == 81
    assert hadronic.dense_bytes(40) == (14 * 40) ** 2 * 8 == 2_508_800
    assert hadronic.masked_bytes(40, 40) == 40 * 40**2 * 8 == 512_000
    assert hadronic.dense_bytes(30) / hadronic.masked_bytes(20, 30) == pytest.approx(196 / 20)
    assert hadronic.dis_bytes(50) == 14 * 50 * 8
    assert hadronic.fmt_bytes(512_000) == "500.0 KiB"


def test_every_contraction_order_computes_the_hosts_predictions(hadronic):
    tables = hadronic.contraction_tables(2, 7, 5, 6)
    assert all(t.pairs.shape == (5, 2) for t in tables)
    checks = hadronic.contraction_check(tables)
    assert set(checks) == set(hadronic.ORDERS) == {"a", "a'", "b", "c"}
    for key, (prediction, gradient) in checks.items():
        assert prediction < 1e-10, key
        assert gradient < 1e-10, key
    # each order holds the same table in its own layout
    contraction = hadronic.Contraction.of(tables[0], tf.float64)
    assert contraction.fk.shape == (7, 5, 6, 6)
    assert contraction.fk_flat.shape == (5 * 36, 7) and contraction.fk_rows.shape == (7, 5 * 36)
    assert contraction.fk_pairs.shape == (5, 6, 7 * 6)


def test_the_two_problems_differ_only_in_their_tables(hadronic):
    dis = hadronic.made_up_problem("dis", 30, 12, 8, 6)
    had = hadronic.made_up_problem("hadronic", 30, 12, 8, 6)
    assert [d.n_data for d in dis.datasets] == [d.n_data for d in had.datasets] == [12, 12, 6]
    for d, h in zip(dis.datasets, had.datasets, strict=True):
        np.testing.assert_array_equal(d.xgrid, h.xgrid)
        assert not d.table.hadronic and h.table.hadronic
        assert h.table.fk.shape == (h.n_data, 6, 8, 8)
        # the data are the toy PDF's predictions, of order 1
        assert np.all(np.abs(h.central) > 0.05) and np.all(np.abs(h.central) < 20)
    assert (
        np.all(np.diag(had.covmat) > 0)
        and np.count_nonzero(had.covmat - np.diag(np.diag(had.covmat))) == 0
    )


def test_the_quick_run_prints_every_section(hadronic, capsys):
    quick = ["--quick", "--replicas", "2", "--members", "2", "--contraction-tables", "1"]
    hadronic.main([*quick, "--repeats", "1"])
    out = capsys.readouterr().out
    for heading in ("1. Bytes per hadronic point", "2. Training step", "3. Contraction order"):
        assert heading in out
    assert "the hadronic tables alone, 135.0 KiB of float32" in out  # 40 points × 6 × 12² × 4
    assert out.count("predictions within") == 4
