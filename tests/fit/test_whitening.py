"""χ² per category by the direct, complement and nuisance ways: exact, stable, members uncoupled."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from hyperscan.data import load_problem, real_problem
from hyperscan.fit import build_members, member_specs
from hyperscan.model import HELD_OUT, TRAINING, VALIDATION, EnsembleModel
from hyperscan.model._chi2 import FLOAT32_KERNEL_MAX_NORM, Chi2
from hyperscan.model._chi2_plan import DenseBlock, NuisanceBlock, whitening

SCHEMES = ("direct", "complement", "auto")
# The dense schemes, and "nuisance": systematics given, the blocks with few take that way.
WAYS = (*SCHEMES, "nuisance")


def _problem(rng: np.random.Generator, members: int = 12):
    """Blocks of 40, 9 and 23 points, each diag(σ²) + S Sᵀ with 6, 2 and 9 systematics (the
    last too many for the nuisance way), around a diagonal block of 6; categories with a 75 %
    training split, members holding a whole block out, one member all training, one all
    validation, one all held-out, and one with the three categories at random."""
    sizes, ranks = (40, 6, 9, 23), (6, 0, 2, 9)
    covmat = np.zeros((sum(sizes), sum(sizes)))
    blocks, systematics, start = [], [], 0
    for n, rank in zip(sizes, ranks, strict=True):
        block = slice(start, start + n)
        sigma = rng.uniform(0.5, 2.0, n)
        columns = rng.standard_normal((n, rank)) * sigma[:, None]
        covmat[block, block] = np.diag(sigma**2) + columns @ columns.T
        blocks.append(block)
        systematics.append((sigma**2, columns))
        start += n
    points = covmat.shape[0]
    categories = np.where(rng.random((members, points)) < 0.75, TRAINING, VALIDATION)
    categories[3:6, blocks[0]] = HELD_OUT
    categories[6, blocks[2]] = HELD_OUT
    categories[7] = TRAINING
    categories[8] = VALIDATION
    categories[9] = HELD_OUT
    categories[10] = rng.integers(0, 3, points)
    return covmat, tuple(blocks), categories, systematics


def _setup(way, covmat, blocks, categories, systematics):
    if way == "nuisance":
        return whitening(covmat, blocks, categories, cache_bytes=0, systematics=systematics)
    return whitening(covmat, blocks, categories, way, cache_bytes=0)


def _reference(covmat, blocks, categories, residuals):
    """r_Sᵀ solve(C_SS, r_S) per member and category, and its gradient 2 C_SS⁻¹ r_S on S."""
    members = categories.shape[0]
    chi2 = np.zeros((members, 3))
    gradient = np.zeros((3, *residuals.shape))
    for m in range(members):
        for c in range(3):
            for block in blocks:
                s = np.flatnonzero(categories[m, block] == c) + block.start
                if s.size:
                    solved = np.linalg.solve(covmat[np.ix_(s, s)], residuals[m, s])
                    chi2[m, c] += residuals[m, s] @ solved
                    gradient[c, m, s] = 2 * solved
    return chi2, gradient


def _chi2_and_gradient(setup, residuals, dtype):
    chi2_of = Chi2(setup, dtype)
    r = tf.constant(residuals, dtype)
    gradients = []
    for c in range(3):
        with tf.GradientTape() as tape:
            tape.watch(r)
            chi2 = chi2_of(r)
            total = tf.reduce_sum(chi2[:, c])
        gradients.append(tape.gradient(total, r).numpy())
    return chi2.numpy(), np.array(gradients)


def test_auto_mixes_both_ways_within_a_category():
    covmat, blocks, categories, _ = _problem(np.random.default_rng(0))
    # As if the members' factors did not fit in cache (they do for any test-sized problem).
    setup = whitening(covmat, blocks, categories, cache_bytes=0)
    dense = [s for s in setup.segments if isinstance(s, DenseBlock)]
    mixed = [
        category
        for block in dense
        for category in range(3)
        if any(t.category == category for t in block.direct)
        and any(t.category == category for t in block.complement)
    ]
    assert mixed, "the test problem should have members of one category on both ways"
    np.testing.assert_array_equal(setup.points_per_category, np.eye(3)[categories].sum(axis=1))


def test_nuisance_way_for_blocks_with_few_systematics_only():
    covmat, blocks, categories, systematics = _problem(np.random.default_rng(0))
    setup = _setup("nuisance", covmat, blocks, categories, systematics)
    kinds = [type(segment).__name__ for segment in setup.segments]
    assert kinds == ["NuisanceBlock", "DiagonalRun", "NuisanceBlock", "DenseBlock"]
    nuisance = [setup.segments[0], setup.segments[2]]
    assert [block.scaled_systematics.shape for block in nuisance] == [(40, 6), (9, 2)]
    assert all(block.categories == (TRAINING, VALIDATION, HELD_OUT) for block in nuisance)


@pytest.mark.parametrize("way", WAYS)
def test_chi2_and_gradient_equal_the_solve(way):
    rng = np.random.default_rng(1)
    covmat, blocks, categories, systematics = _problem(rng)
    residuals = rng.standard_normal((categories.shape[0], covmat.shape[0]))
    setup = _setup(way, covmat, blocks, categories, systematics)
    chi2, gradient = _chi2_and_gradient(setup, residuals, tf.float64)
    expected, expected_gradient = _reference(covmat, blocks, categories, residuals)
    empty = expected == 0
    assert empty.any() and not empty.all()
    np.testing.assert_array_equal(chi2[empty], 0.0)
    np.testing.assert_allclose(chi2[~empty], expected[~empty], rtol=1e-10, atol=0)
    for c in range(3):
        scale = np.abs(expected_gradient[c]).max(axis=1, keepdims=True)
        assert np.all(np.abs(gradient[c] - expected_gradient[c]) <= 1e-8 * scale)


def _stiff_block(rng: np.random.Generator, n: int):
    """σ, the covariance and its (σ², S) factors of one block like BCDMS: small uncorrelated
    errors under large correlated systematics (cond ~1e9)."""
    sigma = rng.uniform(0.5, 2.0, n)
    systematics = rng.standard_normal((n, 4)) * sigma[:, None] * 20.0
    variance = (sigma * 2e-2) ** 2
    return sigma, np.diag(variance) + systematics @ systematics.T, [(variance, systematics)]


@pytest.mark.parametrize("way", WAYS)
def test_ill_conditioned_block_in_float32(way):
    """cond ~1e9 like BCDMS: small uncorrelated errors under large correlated systematics;
    residuals as a fit leaves them (drawn from the covariance) and generic ones."""
    rng = np.random.default_rng(2)
    n, members = 120, 16
    sigma, covmat, factors = _stiff_block(rng, n)
    assert 1e8 < np.linalg.cond(covmat) < 1e10
    categories = np.where(rng.random((members, n)) < 0.75, TRAINING, VALIDATION)
    factor = np.linalg.cholesky(covmat)
    residuals = np.concatenate(
        [
            (factor @ rng.standard_normal((n, members // 2))).T,
            rng.standard_normal((members // 2, n)) * sigma,
        ]
    )
    setup = _setup(way, covmat, (slice(0, n),), categories, factors)
    assert isinstance(setup.segments[0], NuisanceBlock) == (way == "nuisance")
    chi2 = Chi2(setup, tf.float32)(tf.constant(residuals, tf.float32)).numpy()
    expected, _ = _reference(covmat, (slice(0, n),), categories, residuals)
    np.testing.assert_allclose(chi2[:, :2], expected[:, :2], rtol=1e-3)


def _kernel_dtypes(chi2_of: Chi2) -> list[tf.DType]:
    return [kernel_inverse.dtype for *_, kernel_inverse in chi2_of._nuisance]


def test_a_float32_fit_keeps_k_inverse_in_float32_only_where_k_is_mild():
    """_problem's blocks are mild (‖K‖ ≤ 1 + ‖S̃‖² < 100), the ill-conditioned one is not; a
    float64 fit keeps float64 throughout, and the mild blocks' χ² and gradient stay within
    float32 rounding of the solve."""
    rng = np.random.default_rng(5)
    covmat, blocks, categories, systematics = _problem(rng)
    setup = _setup("nuisance", covmat, blocks, categories, systematics)
    bounds = [s.kernel_norm_bound for s in setup.segments if isinstance(s, NuisanceBlock)]
    assert len(bounds) == 2 and max(bounds) < FLOAT32_KERNEL_MAX_NORM
    assert _kernel_dtypes(Chi2(setup, tf.float32)) == [tf.float32, tf.float32]
    assert _kernel_dtypes(Chi2(setup, tf.float64)) == [tf.float64, tf.float64]
    residuals = rng.standard_normal((categories.shape[0], covmat.shape[0]))
    chi2, gradient = _chi2_and_gradient(setup, residuals, tf.float32)
    expected, expected_gradient = _reference(covmat, blocks, categories, residuals)
    np.testing.assert_allclose(chi2, expected, rtol=2e-6, atol=1e-6)
    for c in range(3):
        scale = np.abs(expected_gradient[c]).max()
        assert np.max(np.abs(gradient[c] - expected_gradient[c])) <= 1e-5 * scale

    n = 120
    _, covmat, stiff = _stiff_block(rng, n)
    categories = np.where(rng.random((4, n)) < 0.75, TRAINING, VALIDATION)
    setup = _setup("nuisance", covmat, (slice(0, n),), categories, stiff)
    assert setup.segments[0].kernel_norm_bound > 1e6
    assert _kernel_dtypes(Chi2(setup, tf.float32)) == [tf.float64]


def test_real_dis_chi2_in_float32_with_the_hera_k_inverse_in_float32():
    """HERA's 168 systematics give the one large K⁻¹ (‖K‖ ≤ 97: float32); BCDMS's is stiff
    (float64). With residuals drawn from the covariance, as a fit leaves them, χ² and HERA's
    gradient stay within float32 rounding of the float64 computation (the stiff block's
    gradient carries float32's larger error either way: its K⁻¹ is float64)."""
    problem = real_problem()
    blocks = problem.blocks()
    systematics = [
        (problem.uncorrelated_variance[block], problem.block_systematics(block)) for block in blocks
    ]
    rng = np.random.default_rng(6)
    members = 8
    categories = np.where(rng.random((members, problem.n_data)) < 0.75, TRAINING, VALIDATION)
    setup = whitening(problem.covmat, blocks, categories, systematics=systematics)
    nuisance = [s for s in setup.segments if isinstance(s, NuisanceBlock)]
    hera = max(nuisance, key=lambda s: s.scaled_systematics.shape[1])
    assert hera.scaled_systematics.shape[1] == 168
    dtypes = _kernel_dtypes(Chi2(setup, tf.float32))
    assert dtypes[nuisance.index(hera)] == tf.float32
    assert tf.float64 in dtypes  # the stiff block
    draws = rng.standard_normal((problem.n_data, members))
    residuals = (np.linalg.cholesky(problem.covmat) @ draws).T
    chi2, gradient = _chi2_and_gradient(setup, residuals, tf.float32)
    expected, expected_gradient = _chi2_and_gradient(setup, residuals, tf.float64)
    np.testing.assert_allclose(chi2[:, :2], expected[:, :2], rtol=5e-6)
    points = slice(hera.start, hera.stop)
    for c in (TRAINING, VALIDATION):
        error = gradient[c][:, points] - expected_gradient[c][:, points]
        assert np.linalg.norm(error) <= 1e-5 * np.linalg.norm(expected_gradient[c][:, points])


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64])
@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("way", ["auto", "nuisance"])
def test_members_never_couple(dtype, jit, way):
    rng = np.random.default_rng(3)
    covmat, blocks, categories, systematics = _problem(rng)
    chi2_of = Chi2(_setup(way, covmat, blocks, categories, systematics), dtype)

    @tf.function(jit_compile=jit, autograph=False)  # as the trainer traces its loop
    def value_and_gradient(r):
        with tf.GradientTape() as tape:
            tape.watch(r)
            chi2 = chi2_of(r)
            total = tf.reduce_sum(chi2 * tf.constant([1.0, 2.0, 3.0], dtype))
        return chi2, tape.gradient(total, r)

    residuals = rng.standard_normal((categories.shape[0], covmat.shape[0]))
    reference = [x.numpy() for x in value_and_gradient(tf.constant(residuals, dtype))]
    for changed in (residuals[1] * 1e6, np.full(covmat.shape[0], np.nan)):
        other = residuals.copy()
        other[1] = changed
        results = [x.numpy() for x in value_and_gradient(tf.constant(other, dtype))]
        for result, expected in zip(results, reference, strict=True):
            np.testing.assert_array_equal(np.delete(result, 1, axis=0), np.delete(expected, 1, 0))
            assert not np.array_equal(result[1], expected[1])


def test_model_with_and_without_systematics_agree(make_card):
    """The closure problem's systematics reach the model, which then takes the nuisance way
    for its blocks, and χ² and its gradient per member are the dense way's."""
    card = make_card(data={"closure": {"size": "small", "level": 1, "seed": 3}})
    problem = load_problem(card)
    inputs, params = build_members(card, problem, member_specs(card.replica_ids))
    weights = [tf.constant(p, tf.float64) for p in params]
    results = []
    for setting in (problem, dataclasses.replace(problem, systematics=None)):
        model = EnsembleModel(setting, inputs, card.architecture.activations, tf.float64)
        with tf.GradientTape() as tape:
            tape.watch(weights)
            chi2 = model.observables(weights).chi2
            total = tf.reduce_sum(chi2[:, TRAINING])
        gradients = [g.numpy() for g in tape.gradient(total, weights)]
        results.append((chi2.numpy(), gradients, model.whitening_flops()))
    (chi2, gradients, flops), (expected, expected_gradients, dense_flops) = results
    assert flops < dense_flops / 4  # the nuisance way was taken
    np.testing.assert_allclose(chi2, expected, rtol=1e-10)
    for gradient, expected_gradient in zip(gradients, expected_gradients, strict=True):
        np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("way", WAYS)
def test_a_category_no_member_has_is_exactly_zero(way):
    """Outside k-fold scans no member holds points out: that χ² is skipped, not computed."""
    rng = np.random.default_rng(4)
    covmat, blocks, categories, systematics = _problem(rng)
    categories = np.where(categories == HELD_OUT, VALIDATION, categories)
    residuals = rng.standard_normal((categories.shape[0], covmat.shape[0]))
    setup = _setup(way, covmat, blocks, categories, systematics)
    chi2, _ = _chi2_and_gradient(setup, residuals, tf.float64)
    expected, _ = _reference(covmat, blocks, categories, residuals)
    np.testing.assert_array_equal(chi2[:, HELD_OUT], 0.0)
    np.testing.assert_allclose(chi2, expected, rtol=1e-10)
