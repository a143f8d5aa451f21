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


def small_patch(seed=3, idx=12, n_fine=32, n_coarse=4):
    m = tg.structured_mesh(n_fine).with_kappa(tg.kappa_field(seed, n_pix=n_fine))
    return tg.neighbourhoods(m, n_coarse)[idx]


@pytest.mark.parametrize("idx", [0, 12])  # a Dirichlet (corner) and a Neumann (interior) neighbourhood
def test_sparse_eigensolvers_match_evr(idx):
    nb = small_patch(idx=idx)
    lam, phi = tg.local_spectral(nb.A, nb.s, 4)
    for solver in (tg.local_spectral_arpack, tg.local_spectral_lobpcg):
        lam2, phi2 = solver(nb.A_sparse(), nb.s, 4)
        assert np.allclose(lam2, lam, rtol=1e-7, atol=1e-9 * lam.max())
        assert np.allclose(phi2.T @ (nb.s[:, None] * phi2), np.eye(4), atol=1e-6)
        assert tg.eigen_residual(nb.A, nb.s, lam2, phi2) < 1e-6
    for pc in ("ilu", "lu"):  # LOBPCG with a real preconditioner converges in a few dozen iterations
        lam2, _ = tg.local_spectral_lobpcg(nb.A_sparse(), nb.s, 4, precond=pc, maxiter=40)
        assert np.allclose(lam2, lam, rtol=1e-6, atol=1e-8 * lam.max())
    lam2, _ = tg.local_spectral_arpack(nb.A_sparse(), nb.s, 4, tol=1e-10, ncv=9)
    assert np.allclose(lam2, lam, rtol=1e-6, atol=1e-8 * lam.max())


@pytest.mark.parametrize("arch", ["unet", "fno"])
def test_pure_solver_training_and_held_out_error(arch):
    cfg = dict(tg.checkpoint_config("pure_s0"), n_fine=16, arch=arch, widths=[4, 8], width=4, modes=3, rank=2,
               steps=4, batch=2)
    X, Y = tg.grid_dataset(cfg, 3)
    assert X.shape == (3, 4, 17, 17) and Y.shape == (3, 17, 17)
    assert float(Y[:, 0].abs().max()) == 0 and float(Y[:, -1].abs().max()) == 0  # u = 0 on the boundary
    model, hist = tg.train_pure(cfg, X, Y, 0, progress=False, test=(X[:2], Y[:2]))
    assert [e[0] for e in hist.evals["test_rel_l2"]][-1] == 4
    err = tg.pure_rel_l2(model, X[:2], Y[:2])
    assert err.shape == (2,) and abs(hist.evals["test_rel_l2"][-1][1] - float(err.mean())) < 1e-6
    again, _ = tg.train_pure(cfg, X, Y, 0, progress=False)  # deterministic under its seed
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    out = tg.pure_forward(model, X)
    assert float(out[:, 0].abs().max()) == 0 and float(out[:, :, -1].abs().max()) == 0
    with pytest.raises(ValueError):
        tg.pure_rel_l2(model, X[:2], Y[:1])
    with pytest.raises(ValueError):
        model(X[:, :3])  # 3 channels, the net takes 4
    with pytest.raises(ValueError):
        tg.checkpoint_config("pure_sx")


def test_spectral_conv_is_a_fourier_multiplier_and_cp_matches_its_dense_weight():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 12, 12)
    dense, cp = tg.SpectralConv2d(3, 2, 4), tg.SpectralConv2d(3, 2, 4, rank=5)
    shift = torch.roll(x, (3, 5), dims=(-2, -1))  # translation equivariant (periodic grid)
    assert torch.allclose(dense(shift), torch.roll(dense(x), (3, 5), dims=(-2, -1)), atol=1e-5)
    assert torch.allclose(dense(2 * x + 1) - dense(torch.ones_like(x)), 2 * dense(x), atol=1e-5)  # linear
    c = {k: torch.view_as_complex(getattr(cp, k).detach()) for k in "abxy"}
    w = torch.einsum("rsi,rso,rsx,rsy->sioxy", c["a"], c["b"], c["x"], c["y"])  # the CP weight, made dense
    with torch.no_grad():
        dense.weight.copy_(torch.view_as_real(w))
    assert torch.allclose(dense(x), cp(x), atol=1e-5)
    low = torch.cos(2 * torch.pi * torch.arange(12.0) * 6 / 12).expand(1, 3, 12, 12)  # above the kept modes
    assert float(dense(low).abs().max()) < 1e-5
    with pytest.raises(ValueError):
        dense(torch.zeros(1, 3, 6, 6))  # 6 x 6 is too small for 4 modes
    with pytest.raises(ValueError):
        tg.SpectralConv2d(3, 2, 4, rank=-1)


@pytest.mark.parametrize("n", [16, 17, 33])
def test_fno_any_grid_size_and_make_pure_net(n):
    net = tg.FNO(4, 1, width=6, modes=4, layers=2, pad=3, rank=3)
    assert net(torch.zeros(2, 4, n, n)).shape == (2, 1, n, n)
    cfg = tg.checkpoint_config("pure_s1")
    assert isinstance(tg.make_pure_net(cfg), tg.FNO) and cfg["seeds"] == [1]
    assert isinstance(tg.make_pure_net(dict(cfg, arch="unet", widths=[4, 8])), tg.UNet)
    with pytest.raises(ValueError):
        tg.make_pure_net(dict(cfg, arch="resnet"))
    with pytest.raises(ValueError):
        net(torch.zeros(1, 3, n, n))  # 3 channels, the net takes 4
    with pytest.raises(ValueError):
        tg.FNO(4, 1, width=0)


@pytest.mark.parametrize("n", [16, 17, 33])
def test_unet_any_grid_size_and_grid_features(n):
    net = tg.UNet(2, 1, (4, 8, 8))
    assert net(torch.zeros(1, 2, n, n)).shape == (1, 1, n, n)
    mesh = tg.structured_mesh(4)
    f = np.arange(mesh.n, dtype=float)
    img = tg.grid_features(tg.pure_features(mesh, mesh.node_log_kappa(), f))
    assert img.shape == (4, 5, 5)
    assert float(img[3, 1, 2]) == f[1 * 5 + 2]  # row = y (j), column = x (i)
    assert np.allclose(img[0, 1].numpy(), np.linspace(0, 1, 5)) and np.allclose(img[1, :, 0].numpy(),
                                                                                np.linspace(0, 1, 5))
    with pytest.raises(ValueError):
        tg.grid_features(np.zeros((10, 4)))  # 10 nodes: not a square grid
    with pytest.raises(ValueError):
        tg.UNet(2, 1, ())


def test_dihedral_grid_matches_the_symmetric_fem_solution():
    n = 16
    mesh = tg.structured_mesh(n)
    pix = tg.kappa_field(3, n_pix=n)
    f = tg.forcing(mesh.points, "smooth", seed=3)
    u = tg.solve_fine(mesh.with_kappa(pix), f).reshape(n + 1, n + 1)
    F = torch.tensor(f.reshape(n + 1, n + 1))
    for g in range(8):
        # the transformed coefficient (cells) and forcing (nodes) give the transformed solution
        pix_g = tg.dihedral_grid(torch.tensor(pix), g).numpy()
        u_g = tg.solve_fine(mesh.with_kappa(pix_g), tg.dihedral_grid(F, g).numpy().ravel())
        assert np.allclose(u_g.reshape(n + 1, n + 1), tg.dihedral_grid(torch.tensor(u), g).numpy(), atol=1e-10)
    assert len({tuple(tg.dihedral_grid(torch.arange(4.0).view(2, 2), g).ravel().tolist()) for g in range(8)}) == 8
    with pytest.raises(ValueError):
        tg.dihedral_grid(torch.zeros(2, 3), 1)
    with pytest.raises(ValueError):
        tg.dihedral_grid(torch.zeros(2, 2), 8)


def test_grid_to_points_is_exact_for_bilinear_functions():
    n = 8
    x = np.linspace(0, 1, n + 1)
    X, Y = np.meshgrid(x, x)
    u = 1 + 2 * X - 3 * Y + 4 * X * Y
    pts = np.random.default_rng(0).uniform(0, 1, (50, 2))
    pts[:2] = [[1.0, 1.0], [0.0, 1.0]]
    want = 1 + 2 * pts[:, 0] - 3 * pts[:, 1] + 4 * pts[:, 0] * pts[:, 1]
    assert np.allclose(tg.grid_to_points(u, pts), want)
    with pytest.raises(ValueError):
        tg.grid_to_points(u, pts + 1.5)  # outside the unit square
    with pytest.raises(ValueError):
        tg.grid_to_points(u[:, :-1], pts)


def test_relative_fall():
    assert tg.relative_fall([500, 1000, 2000, 3000, 4000], [1, 0.5, 0.3, 0.25, 0.2]) == pytest.approx(0.04 / 0.24)
    assert tg.relative_fall([1, 2, 3, 4, 5], [3, 2, 1, 1, 1]) == pytest.approx(0.0)
    assert tg.relative_fall([1, 2, 3, 4, 5], [3, 2, 1, 1, 1.1]) < 0  # rose at the end
    with pytest.raises(ValueError):
        tg.relative_fall([1, 1, 2], [1, 1, 1])  # steps not increasing
    with pytest.raises(ValueError):
        tg.relative_fall([9, 10], [1, 1])  # the curve starts after 80% of training
    with pytest.raises(ValueError):
        tg.relative_fall([1, 2], [1, 1], frac=1.0)


def test_basis_test_losses_and_long_config():
    cfg = tg.checkpoint_config("basis_long")
    assert cfg["steps"] == 2 * tg.checkpoint_config("basis")["steps"] and cfg["seeds"] == [0]
    with pytest.raises(TypeError):
        tg.basis_test_losses(torch.nn.Linear(2, 2), [])


def test_inverse_iteration_fixes_contamination_and_keeps_exact_basis():
    nb = small_patch()
    lam, phi = tg.local_spectral(nb.A, nb.s, 8)
    mu, _ = tg.inverse_iteration(nb.A_sparse(), nb.s, phi[:, :4])
    assert np.allclose(mu, lam[:4], rtol=1e-8, atol=1e-8 * lam[3])
    bad = phi[:, :4] + 0.3 * phi[:, 4:8]  # mixed with higher eigenvectors
    Q = tg.s_orthonormalize(bad, nb.s)
    mu_bad = np.linalg.eigvalsh(Q.T @ nb.A @ Q)
    mu_fix, _ = tg.inverse_iteration(nb.A_sparse(), nb.s, bad)
    assert np.sum(mu_fix - lam[:4]) < 0.1 * np.sum(mu_bad - lam[:4])


def test_spectral_cuts():
    lam = np.array([[0.0, 1.0, 1.01, 3.0, 5.0], [0.0, 2.0, 4.0, 4.0, 9.0]])
    assert tg.spectral_cuts(lam).tolist() == [[True, False, True, True], [True, True, False, True]]
    with pytest.raises(ValueError):
        tg.spectral_cuts(np.array([3.0, 1.0]))
    with pytest.raises(ValueError):
        tg.spectral_cuts(np.array([1.0]))


def patch_batch(nb, k=4, extra=4):
    lam, phi = tg.local_spectral(nb.A, nb.s, k + extra)
    tot = nb.s.sum()
    cells, cK = tg.patch_cells([nb], len(nb.nodes))
    t = lambda a: torch.tensor(np.asarray(a)[None])
    return lam * tot, phi * np.sqrt(tot), t(nb.s / tot), cells, cK.double(), t


def test_energy_loss_zero_at_exact_invariant_and_energy_weighted():
    nb = small_patch()
    lam, phi, s, cells, cK, t = patch_batch(nb)
    L = t(lam[:5])
    loss = lambda p: tg.energy_loss(t(p), L, s, cells, cK, eps=0.0).item()
    tri = np.triu(np.random.default_rng(0).standard_normal((4, 4))) + 3 * np.eye(4)
    assert abs(loss(phi[:, :4])) < 1e-6 and abs(loss(phi[:, :4] @ tri)) < 1e-6
    low, high = phi[:, :4].copy(), phi[:, :4].copy()
    low[:, 3] += 0.2 * phi[:, 4]  # contamination by the next eigenvector ...
    high[:, 3] += 0.2 * phi[:, 7]  # ... or by a higher one: the same sin^2, more energy
    assert 0 < loss(low) < loss(high)
    sal = lambda p: tg.sal_loss(t(p), t(phi[:, :4]), s, nested=False, eps=0.0).item()
    assert abs(sal(low) - sal(high)) < 1e-9  # the mass-norm loss cannot tell them apart


def test_nested_sal_supervises_k1_and_cuts_skip_degenerate_spaces():
    rng = np.random.default_rng(1)
    phi, s = random_orthonormal_basis(rng, 40, 4)
    t = lambda a: torch.tensor(a[None])
    swapped = phi[:, [1, 0, 2, 3]]  # right span for k >= 2, wrong first function
    assert tg.sal_loss(t(swapped), t(phi), t(s), eps=0.0).item() > 0.1
    only_k1 = torch.tensor([[True, False, False, False]])
    assert tg.sal_loss(t(swapped), t(phi), t(s), eps=0.0, cuts=only_k1).item() > 0.9
    rot = phi.copy()  # a rotation inside span(phi_2, phi_3), as if lambda_2 = lambda_3
    rot[:, 1], rot[:, 2] = (phi[:, 1] + phi[:, 2]) / np.sqrt(2), (phi[:, 1] - phi[:, 2]) / np.sqrt(2)
    assert tg.sal_loss(t(rot), t(phi), t(s), eps=0.0).item() > 0.05  # k = 2 sits inside the pair
    cuts = torch.tensor([[True, False, True, True]])
    assert abs(tg.sal_loss(t(rot), t(phi), t(s), eps=0.0, cuts=cuts).item()) < 1e-9


def test_new_functions_reject_bad_input():
    nb = small_patch()
    with pytest.raises(TypeError):
        tg.local_spectral_arpack(nb.A, nb.s, 2)  # dense, not sparse
    with pytest.raises(ValueError):
        tg.local_spectral_arpack(nb.A_sparse(), nb.s[:-1], 2)
    with pytest.raises(ValueError):
        tg.local_spectral_lobpcg(nb.A_sparse(), nb.s, 0)
    with pytest.raises(ValueError):
        tg.local_spectral_lobpcg(nb.A_sparse(), nb.s, 2, precond="multigrid")
    with pytest.raises(ValueError):
        tg.local_spectral_arpack(nb.A_sparse(), nb.s, 2, tol=-1.0)
    with pytest.raises(ValueError):
        tg.local_spectral_arpack(nb.A_sparse(), nb.s, 2, ncv=2)
    with pytest.raises(ValueError):
        tg.inverse_iteration(nb.A_sparse(), nb.s, np.ones((3, 2)))
    with pytest.raises(ValueError):
        tg.patch_cells([nb], 3)
    lam, phi, s, cells, cK, t = patch_batch(nb)
    with pytest.raises(ValueError):
        tg.energy_loss(t(phi[:, :4]), t(lam[:4]), s, cells, cK)  # needs K + 1 eigenvalues
    with pytest.raises(ValueError):
        tg.sal_loss(t(phi[:, :4]), t(phi[:, :4]), s, cuts=torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError):
        tg.checkpoint_config("other")
    with pytest.raises(ValueError):
        tg.forcing(np.zeros((3, 2)), "noise")


def test_loose_arpack_misses_a_copy_of_a_double_eigenvalue():
    """Section 7's diagnosis: on a symmetric (kappa = 1) patch lambda_2 = lambda_3; ARPACK at
    machine precision finds both copies, at tol = 1e-2 (the chapter's fastest setting) only one,
    and returns a higher eigenvalue instead, so its span is not the leading eigenspace."""
    m = tg.structured_mesh(32)
    b = [x for x in tg.neighbourhoods(m, 4) if x.neumann][4]
    le = tg.local_spectral(b.A, b.s, 5)[0]
    assert abs(le[1] - le[2]) < 1e-9 * le[3]  # a double eigenvalue
    tight = tg.local_spectral_arpack(b.A_sparse(), b.s, 4)[0]
    loose = tg.local_spectral_arpack(b.A_sparse(), b.s, 4, tol=1e-2, ncv=9)[0]
    np.testing.assert_allclose(tight, le[:4], rtol=1e-8, atol=1e-10 * le[3])
    assert np.sum(np.abs(loose - le[1]) < 1e-3 * le[3]) == 1
    assert loose[-1] > 1.5 * le[3]


def test_solver_menu_fastest_at_and_missed_pairs():
    nb = small_patch(idx=0)
    menu = tg.classical_solvers(4)
    ref = [tg.local_spectral(nb.A, nb.s, 4)]
    for name, solve in menu.items():
        out = solve(nb.A_sparse(), nb)
        assert out is None or out[1].shape[1] == 4, name
    assert tg.missed_pairs([menu["ARPACK shift-invert"](nb.A_sparse(), nb)], ref, 4) == 0
    lam, phi = ref[0]
    assert tg.missed_pairs([(lam * 1.5, phi)], ref, 4) == 1  # other eigenpairs
    assert tg.missed_pairs([None], ref, 4) == 1  # a breakdown counts as every patch
    times = {"a": 1.0, "b": 2.0, "c": 0.5}
    errs = {"a": [0.2, 0.1], "b": [0.1, 0.1], "c": [0.3, 0.05]}
    assert tg.fastest_at(times, errs, [0.2, 0.2]) == "a"  # c is faster but too inaccurate on one forcing
    assert tg.fastest_at(times, errs, [0.3, 0.2]) == "c"
    assert tg.fastest_at(times, errs, [0.3, 0.2], exclude="c") == "a"
    with pytest.raises(ValueError):
        tg.fastest_at(times, errs, [0.05, 0.05])
    with pytest.raises(ValueError):
        tg.classical_solvers(0)
