"""Tests for helpers.sail_scf: the torch SCF against PySCF, the projector backward, the counter, equivariance."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pyscf import scf

from helpers import sail_scf as ss

WATER = (["O", "H", "H"], [[0, 0, 0.117], [0, 0.757, -0.467], [0, -0.757, -0.467]])


@pytest.fixture(scope="module")
def water():
    return ss.build_molecule(*WATER)


@pytest.fixture(scope="module")
def formaldehyde():
    return ss.build_molecule(["C", "O", "H", "H"], [[0, 0, 0], [0, 0, 1.21], [0, 0.94, -0.59], [0, -0.94, -0.59]])


def test_bad_input():
    with pytest.raises(ValueError, match="even number of electrons"):
        ss.build_molecule(["H"], [[0, 0, 0]])  # one electron: not closed shell
    with pytest.raises(ValueError, match="even number of electrons"):
        ss.build_molecule(["C", "H", "H", "H"], np.eye(4, 3))
    with pytest.raises(ValueError, match="shape"):
        ss.build_molecule(["H", "H"], [[0, 0, 0]])
    with pytest.raises(ValueError, match="elements"):
        ss.build_molecule(["Na", "H"], [[0, 0, 0], [0, 0, 1.9]])
    with pytest.raises(TypeError):
        ss.integrals("H2O")
    with pytest.raises(ValueError):
        ss.occupied_projector(torch.eye(3, dtype=torch.float64), 0)
    with pytest.raises(ValueError):
        ss.pyscf_guess(ss.build_molecule(*WATER), "random")
    with pytest.raises(TypeError, match="ints"):
        ss.scf_unrolled(torch.zeros(2, 2), None, 1)
    ints = ss.integrals(ss.build_molecule(*WATER))
    with pytest.raises(ValueError, match="n_cycles"):
        ss.scf_unrolled(ss.density_from_hamiltonian(ints.H, ints), ints, 0)


@pytest.mark.parametrize("which", ["water", "formaldehyde"])
def test_torch_scf_matches_pyscf(which, request):
    mol = request.getfixturevalue(which)
    mf = scf.RHF(mol)
    mf.conv_tol = 1e-11
    e_ref = mf.kernel()
    ints = ss.integrals(mol)
    P0 = ss.density_from_hamiltonian(ints.H, ints)
    trace = ss.scf_unrolled(P0, ints, 80, tol=1e-9)
    assert abs(trace.energies[-1].item() - e_ref) <= 1e-8
    assert trace.grad_norms[-1].item() < 1e-9
    # the converged density reproduces PySCF's
    assert np.abs(trace.P.numpy() - mf.make_rdm1()).max() < 1e-6


def test_fock_and_energy_match_pyscf_for_any_density(water):
    ints = ss.integrals(water)
    mf = scf.RHF(water)
    dm = ss.pyscf_guess(water, "minao")
    F = ss.fock(torch.from_numpy(dm), ints).numpy()
    np.testing.assert_allclose(F, mf.get_fock(dm=dm), atol=1e-10)
    e = ss.energy(torch.from_numpy(dm), torch.from_numpy(F), ints).item()
    assert abs(e - mf.energy_tot(dm=dm)) < 1e-10


def test_projector_gradcheck_and_agrees_with_eigh(water):
    ints = ss.integrals(water)
    A = (ints.X.T @ ints.H @ ints.X).clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a: ss.occupied_projector(0.5 * (a + a.T), ints.n_occ), (A,))
    G = torch.randn(A.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))

    def via_eigh(a):
        _, C = torch.linalg.eigh(0.5 * (a + a.T))
        return C[:, : ints.n_occ] @ C[:, : ints.n_occ].T

    (g1,) = torch.autograd.grad((ss.occupied_projector(0.5 * (A + A.T), ints.n_occ) * G).sum(), A)
    (g2,) = torch.autograd.grad((via_eigh(A) * G).sum(), A)
    assert torch.allclose(g1, g2, atol=1e-8)


def test_projector_backward_is_finite_with_degenerate_levels():
    # exactly degenerate occupied and virtual pairs: eigh's own backward divides by zero here
    A = torch.diag(torch.tensor([-2.0, -1.0, -1.0, 1.0, 1.0], dtype=torch.float64)).requires_grad_(True)
    Q = ss.occupied_projector(A, 3)
    (g,) = torch.autograd.grad((Q * torch.arange(25.0, dtype=torch.float64).reshape(5, 5)).sum(), A)
    assert torch.isfinite(g).all()
    assert torch.allclose(Q, torch.diag(torch.tensor([1.0, 1, 1, 0, 0], dtype=torch.float64)))


def test_electron_count_of_model_guess(formaldehyde):
    ints = ss.integrals(formaldehyde)
    torch.manual_seed(0)
    model = ss.HuckelGuess()
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.1)
    P0 = model.density(ss.features(formaldehyde), ints)
    assert abs(torch.trace(P0 @ ints.S).item() - formaldehyde.nelectron) < 1e-10


def test_untrained_model_is_the_core_guess(water):
    ints = ss.integrals(water)
    H = ss.HuckelGuess()(ss.features(water), ints)
    assert torch.equal(H, ints.H)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_property_rotation_equivariance(s):
    mol = ss.build_molecule(["C", "O", "H", "H"], [[0, 0, 0], [0, 0, 1.21], [0, 0.94, -0.59], [0, -0.94, -0.59]])
    q, _ = np.linalg.qr(np.random.default_rng(s).normal(size=(3, 3)))
    R = q * np.sign(np.linalg.det(q))
    torch.manual_seed(1)
    model = ss.HuckelGuess()
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.1)
    out = []
    for m in (mol, ss.rotate(mol, R)):
        ints = ss.integrals(m)
        with torch.no_grad():
            H = model(ss.features(m), ints)
            P0 = ss.density_from_hamiltonian(H, ints)
        out.append((torch.linalg.eigvalsh(ints.X.T @ H @ ints.X), ss.energy(P0, ss.fock(P0, ints), ints)))
    assert (out[0][0] - out[1][0]).abs().max().item() < 1e-8
    assert abs(out[0][1] - out[1][1]).item() < 1e-8


def test_counter_counts_every_fock_build(water):
    mf = scf.RHF(water)
    default = ss.run_pyscf(mf, None)
    again = ss.run_pyscf(mf, ss.pyscf_guess(water, "minao"))
    assert default.fock_builds == again.fock_builds  # ERIC(minao) == 1
    # PySCF: one build for dm0, one per cycle, one for the final convergence check
    assert default.fock_builds == default.cycles + 2
    assert default.converged and abs(default.energy - again.energy) < 1e-8
    assert "get_veff" not in mf.__dict__  # the wrapper is removed afterwards


def test_sail_loss_backpropagates_to_the_model(water):
    ints = ss.integrals(water)
    model = ss.HuckelGuess()
    f = ss.features(water)
    trace = ss.scf_unrolled(model.density(f, ints), ints, 4)
    loss = torch.stack(trace.grad_norms).sum()
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)
