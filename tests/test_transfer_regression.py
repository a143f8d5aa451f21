import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import transfer_regression as tr


def _problem(seed, n=12, d=20, m=3):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.normal(size=n), rng.normal(size=(m, d))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), lam=st.floats(1e-2, 1e2), c=st.floats(-2, 4), m=st.integers(1, 5),
       n=st.integers(3, 30))
def test_closed_form_equals_stacked_lstsq(seed, lam, c, m, n):
    X, y, th = _problem(seed, n=n, m=m)
    a = tr.transfer_fit(X, y, th, lam, c)
    b = tr.transfer_fit_stacked(X, y, th, lam, c)
    assert np.abs(a - b).max() <= 1e-8 * max(1.0, np.abs(b).max())


def test_zero_lambda_is_the_limit_and_interpolates():
    X, y, th = _problem(1)
    b0 = tr.transfer_fit(X, y, th, 0.0, 1.7)
    assert np.abs(X @ b0 - y).max() <= 1e-10
    assert np.abs(tr.transfer_fit(X, y, th, 1e-9, 1.7) - b0).max() <= 1e-5
    # among interpolators, b0 is the closest to c * theta_bar
    null = np.linalg.svd(X)[2][X.shape[0]:]
    other = b0 + null.T @ np.random.default_rng(0).normal(size=null.shape[0])
    anchor = 1.7 * th.mean(axis=0)
    assert np.linalg.norm(b0 - anchor) < np.linalg.norm(other - anchor)


@pytest.mark.parametrize("n", [5, 40])
def test_batched_min_norm_matches_lstsq(n):
    rng = np.random.default_rng(n)
    Xs, ys = rng.normal(size=(4, n, 20)), rng.normal(size=(4, n))
    ref = np.array([tr.min_norm_lstsq(X, y) for X, y in zip(Xs, ys)])
    assert np.abs(tr.batched_min_norm(Xs, ys) - ref).max() <= 1e-9


def test_projection_bias_rho():
    s = tr.Setting(d=30, n_s=10, sigma_s=0.0, tau=0.0)
    beta = np.zeros(30)
    beta[0] = 1.0
    th = tr.pretrain(beta, 3000, s, np.random.default_rng(0))
    assert abs(th.mean(axis=0)[0] - s.rho) < 0.02  # E[theta] = rho * beta
    assert np.abs(th.mean(axis=0)[1:]).max() < 0.02


def test_c_star_minimises_D_and_tends_to_inverse_rho():
    for n_s in [10, 50, 300]:
        s = tr.Setting(d=100, n_s=n_s)
        for m in [1, 3, 30, 1000]:
            cs = tr.c_star(m, s)
            grid = np.linspace(-1, 12, 2001)
            assert tr.bias_D(cs, m, s) <= min(tr.bias_D(c, m, s) for c in grid) + 1e-12
            assert tr.bias_D(cs, m, s) <= min(tr.bias_D(1, m, s), tr.bias_D(1 / s.rho, m, s))
        assert abs(tr.c_star(10**7, s) - 1 / s.rho) < 1e-3
    under = tr.Setting(d=100, n_s=300)
    assert tr.c_star(5, under) <= 1 and tr.bias_D(1, 10**8, under) < 1e-6


def test_analytic_matches_monte_carlo_small():
    s = tr.Setting(d=40, n=15, n_s=10, tau=0.5)
    mc = tr.monte_carlo(s, [1, 8], [0.0, 2.0], trials=600, seed=1, rules=("1", "c*"))
    eig = tr.target_eigenvalues(s, 3000)
    for (rule, m, lam), (mean, se) in ((k, v) for k, v in mc.items() if k != "c_hat"):
        c = 1.0 if rule == "1" else tr.c_star(m, s)
        a = tr.test_error(s, m, c, lam, eigs=eig)
        assert abs(mean - a) <= 4 * se + 0.01 * a


def test_lambda_positive_formula_tends_to_limit():
    s = tr.Setting(d=60, n=20, n_s=15)
    e0 = tr.test_error(s, 4, 1.0, 0.0)
    e_small = tr.test_error(s, 4, 1.0, 1e-7, draws=500)
    assert abs(e_small - e0) / e0 < 0.02


def test_bad_input():
    X, y, th = _problem(0)
    with pytest.raises(ValueError, match="lam"):
        tr.transfer_fit(X, y, th, -1.0)
    with pytest.raises(ValueError, match="shape"):
        tr.transfer_fit(X, y[:-1], th, 1.0)
    with pytest.raises(ValueError, match="d = 20"):
        tr.transfer_fit(X, y, th[:, :5], 1.0)
    with pytest.raises(ValueError, match="lam > 0"):
        tr.transfer_fit_stacked(X, y, th, 0.0)
    with pytest.raises(ValueError, match="within 1"):
        tr.Setting(d=50, n_s=50)
    with pytest.raises(ValueError, match="positive int"):
        tr.Setting(d=0)
    with pytest.raises(ValueError, match="overparameterised target"):
        tr.test_error(tr.Setting(d=20, n=30, n_s=5), 1, 1.0, 0.0)
    with pytest.raises(ValueError, match="m must"):
        tr.c_star(0, tr.Setting())
    with pytest.raises(ValueError, match="beta"):
        tr.pretrain(np.zeros(3), 2, tr.Setting(), np.random.default_rng(0))
