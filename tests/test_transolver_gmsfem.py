"""Tests for helpers.transolver_gmsfem: FEM assembly, GMsFEM, the Transolver and the subspace-alignment loss."""

import numpy as np
import pytest
import scipy.linalg as sla
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import transolver_gmsfem as tg


def exact(x, y):
    return np.sin(np.pi * x) * np.sin(np.pi * y)


@pytest.mark.parametrize("kind", ["q1", "p1"])
def test_fem_second_order_convergence(kind):
    errs = []
    for n in (8, 16, 32):
        m = tg.structured_mesh(n) if kind == "q1" else tg.jittered_mesh(n, 0.2, seed=1)
        errs.append(tg.l2_error(m, tg.solve_fine(m, 2 * np.pi**2 * exact(*m.points.T)), exact))
    assert abs(errs[1] / errs[2] - 4) < 0.3


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["q1", "p1"]))
def test_assembly_symmetric_psd_constants_in_kernel(seed, kind):
    rng = np.random.default_rng(seed)
    m = tg.structured_mesh(6) if kind == "q1" else tg.jittered_mesh(6, 0.3, seed)
    m = tg.Mesh(m.points, m.cells, m.kind, m.Ke, m.Me, 10 ** rng.uniform(0, 4, len(m.cells)))
    A, M = tg.stiffness(m).toarray(), tg.mass(m).toarray()
    assert np.allclose(A, A.T) and np.allclose(M, M.T)
    assert np.abs(A @ np.ones(m.n)).max() < 1e-9 * np.abs(A).max()  # constants have zero energy
    assert np.isclose(M.sum(), 1.0)  # the mass integrates 1 over the unit square
    assert np.linalg.eigvalsh(A).min() > -1e-9 * np.abs(A).max()


def test_local_spectral_matches_generalized_eigh_and_residual():
    m = tg.structured_mesh(32).with_kappa(tg.kappa_field(3, n_pix=32))
    nb = tg.neighbourhoods(m, 4)[12]
    lam, phi = tg.local_spectral(nb.A, nb.s, 5)
    ref = sla.eigh(nb.A, np.diag(nb.s), eigvals_only=True)[:5]
    assert np.allclose(lam, ref, rtol=1e-7, atol=1e-7 * ref.max())
    assert tg.eigen_residual(nb.A, nb.s, lam, phi) < 1e-10
    assert np.allclose(phi.T @ (nb.s[:, None] * phi), np.eye(5), atol=1e-9)
    assert abs(lam[0]) < 1e-8 and np.ptp(phi[:, 0]) < 1e-8  # constant first eigenfunction (Neumann)


def test_reduces_to_coarse_fem():
    m = tg.structured_mesh(32)
    nb = tg.neighbourhoods(m, 4, boundary=False)
    R = tg.multiscale_basis(m, nb, [tg.local_spectral(b.A, b.s, 1)[1] for b in nb])
    u, A0 = tg.gmsfem_solve(tg.stiffness(m), tg.load(m, np.ones(m.n)), R)
    assert np.abs(u - tg.coarse_q1_fem(4, 32)).max() < 1e-10
    assert np.linalg.eigvalsh(A0).min() > 0


def test_gmsfem_energy_error_decreases_and_full_space_is_exact():
    m = tg.structured_mesh(32).with_kappa(tg.kappa_field(1, n_pix=32))
    A, M, b = tg.stiffness(m), tg.mass(m), tg.load(m, np.ones(m.n))
    u = tg.solve_fine(m, np.ones(m.n), A)
    nb = tg.neighbourhoods(m, 4)
    eig = [tg.local_spectral(x.A, x.s, 4) for x in nb]
    errs = [tg.rel_errors(A, M, u, tg.gmsfem_solve(A, b, tg.multiscale_basis(m, nb, [e[1][:, :k] for e in eig]))[0])[0]
            for k in range(1, 5)]
    assert all(np.diff(errs) <= 1e-12) and errs[-1] < errs[0]


def test_parabolic_multiscale_matches_fine_with_rich_basis():
    m = tg.structured_mesh(8)
    A, M, b = tg.stiffness(m), tg.mass(m), tg.load(m, np.ones(m.n))
    inner = ~m.boundary
    R = __import__("scipy.sparse", fromlist=["eye"]).eye(m.n, format="csr")[:, np.nonzero(inner)[0]]
    U = tg.parabolic(A, M, b, np.zeros(m.n), 0.01, 5, inner=inner)
    V = tg.parabolic(A, M, b, np.zeros(m.n), 0.01, 5, R=R)
    assert np.abs(U - V).max() < 1e-12


def random_orthonormal_basis(rng, n, k):
    s = rng.uniform(0.5, 2.0, n)
    s /= s.sum()
    phi = tg.s_orthonormalize(rng.standard_normal((n, k)), s)
    return phi, s


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_sal_is_invariant_to_recombination(seed):
    rng = np.random.default_rng(seed)
    phi, s = random_orthonormal_basis(rng, 40, 4)
    mix = rng.standard_normal((4, 4)) + 4 * np.eye(4)  # any invertible recombination: signs, rotations, scales
    t = lambda a: torch.tensor(a[None])
    full = tg.sal_loss(t(phi @ mix), t(phi), t(s), nested=False, eps=0.0).item()
    assert abs(full) < 1e-8
    # nested: sign flips and rotations that keep the leading spans (upper-triangular mixing) cost nothing
    tri = np.triu(mix)
    assert abs(tg.sal_loss(t(phi @ tri), t(phi), t(s), eps=0.0).item()) < 1e-8


def test_sal_detects_a_wrong_subspace():
    rng = np.random.default_rng(0)
    phi, s = random_orthonormal_basis(rng, 40, 6)
    t = lambda a: torch.tensor(a[None])
    loss = tg.sal_loss(t(phi[:, [0, 1, 4, 5]]), t(phi[:, :4]), t(s), nested=False, eps=0.0).item()
    assert abs(loss - 2.0) < 1e-8  # two orthogonal directions: sin^2 = 1 each


def test_transolver_masking_and_permutation_equivariance():
    torch.manual_seed(0)
    net = tg.Transolver(5, 3, dim=16, layers=2, heads=2, slices=4).double()
    x = torch.randn(1, 20, 5, dtype=torch.float64)
    perm = torch.randperm(20)
    out = net(x)
    assert torch.allclose(net(x[:, perm]), out[:, perm], atol=1e-10)
    padded = torch.cat([x, torch.randn(1, 7, 5, dtype=torch.float64)], 1)
    mask = torch.tensor([[True] * 20 + [False] * 7])
    assert torch.allclose(net(padded, mask)[:, :20], net(x, torch.ones(1, 20, dtype=torch.bool)), atol=1e-10)


def test_dihedral_is_a_group_action_on_coordinates():
    f = torch.randn(8, 10, 5)
    g = torch.arange(8)
    out = tg.dihedral(f, g)
    assert torch.allclose(out[..., 2:], f[..., 2:])
    assert torch.allclose(out[..., :2].norm(dim=-1), f[..., :2].norm(dim=-1))
    assert torch.allclose(out[0], f[0])


def test_bad_input():
    with pytest.raises(ValueError):
        tg.structured_mesh(0)
    with pytest.raises(ValueError):
        tg.local_spectral(np.eye(3), np.ones(3), 4)
    with pytest.raises(ValueError):
        tg.local_spectral(np.eye(3), -np.ones(3), 1)
    with pytest.raises(ValueError):
        tg.kappa_field(0, geometry="spiral")
    with pytest.raises(TypeError):
        tg.neighbourhoods("mesh", 4)
    with pytest.raises(ValueError):
        tg.neighbourhoods(tg.structured_mesh(8), 1)
    with pytest.raises(ValueError):
        tg.load(tg.structured_mesh(4), np.ones(3))
    with pytest.raises(ValueError):
        tg.sal_loss(torch.zeros(1, 5, 2), torch.zeros(1, 5, 3), torch.ones(1, 5))
    with pytest.raises(ValueError):
        tg.Transolver(5, 0)
