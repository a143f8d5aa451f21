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
    with pytest.raises(ValueError, match="diis_start"):
        ss.scf_unrolled(ss.density_from_hamiltonian(ints.H, ints), ints, 2, diis_start=-1)
    with pytest.raises(ValueError, match="head"):
        ss.GuessModel("orbital")
    with pytest.raises(TypeError, match="x"):
        ss.GuessModel()(ints)
    with pytest.raises(ValueError, match="minimal basis"):
        ss.features(ss.build_molecule(*WATER, basis="6-31g"))
    with pytest.raises(ValueError, match="P"):
        ss.purify(torch.zeros(3, 3, dtype=torch.float64), ints)
    with pytest.raises(ValueError, match="same molecule"):
        x = ss.inputs(ss.build_molecule(*WATER), eri=False)
        ss.Inputs(ss.features(ss.build_molecule(["H", "H"], [[0, 0, 0], [0, 0, 0.74]])), x.ints, x.H_sap, x.P_minao)
    with pytest.raises(ValueError, match="name"):
        ss.checkpoint_config("other")
    with pytest.raises(ValueError, match="objective"):
        ss.train_guess("density", "labels", [], ss.checkpoint_config(), 0)
    with pytest.raises(ValueError, match="n"):
        ss.perturbed(ss.build_molecule(*WATER), -1, 0.1, 0)


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


def _random_model(head, seed=0):
    torch.manual_seed(seed)
    model = ss.GuessModel(head, hidden=8)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.1)
    return model


@pytest.mark.parametrize("head", ss.HEADS)
def test_electron_count_and_idempotency_of_model_guess(formaldehyde, head):
    x = ss.inputs(formaldehyde)
    P0 = _random_model(head).density(x)
    S = x.ints.S
    assert abs(torch.trace(P0 @ S).item() - formaldehyde.nelectron) < 1e-10
    assert torch.allclose(P0 @ S @ P0, 2 * P0, atol=1e-10)


def test_untrained_models_are_their_priors(water):
    x = ss.inputs(water)
    assert torch.equal(ss.GuessModel("hamiltonian")(x), x.H_sap)
    assert torch.equal(ss.GuessModel("density")(x), x.P_minao)
    # the untrained Hamiltonian head is PySCF's SAP guess
    np.testing.assert_allclose(ss.GuessModel("hamiltonian").density(x).detach().numpy(),
                               ss.pyscf_guess(water, "sap"), atol=1e-8)


def test_purify_keeps_an_idempotent_density_and_fixes_minao(water):
    x = ss.inputs(water)
    mf = scf.RHF(water)
    mf.kernel()
    P_star = torch.from_numpy(mf.make_rdm1())
    assert torch.allclose(ss.purify(P_star, x.ints), P_star, atol=1e-8)
    Pm = ss.purify(x.P_minao, x.ints)
    assert abs(torch.trace(Pm @ x.ints.S).item() - water.nelectron) < 1e-10


def test_sigma_and_pi_couplings_are_separate_channels():
    # N2 along z: the sigma scalar moves only the pz-pz coupling, the pi scalar only px-px and py-py
    mol = ss.build_molecule(["N", "N"], [[0, 0, 0], [0, 0, 1.1]])
    x = ss.inputs(mol, eri=False)
    z = [i for i, lab in enumerate(mol.ao_labels()) if "2pz" in lab]
    xx = [i for i, lab in enumerate(mol.ao_labels()) if "2px" in lab]
    for ch, moved, fixed in ((8, z, xx), (9, xx, z)):
        model = ss.GuessModel("hamiltonian", hidden=4)
        with torch.no_grad():
            model.coupling[-1].bias[ch] = 1.0
        d = model.correction(x)
        assert abs(d[moved[0], moved[1]].item()) > 1e-3
        assert abs(d[fixed[0], fixed[1]].item()) < 1e-12


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(ss.HEADS))
def test_property_rotation_equivariance(s, head):
    mol = ss.build_molecule(["C", "O", "H", "H"], [[0, 0, 0], [0, 0, 1.21], [0, 0.94, -0.59], [0, -0.94, -0.59]])
    q, _ = np.linalg.qr(np.random.default_rng(s).normal(size=(3, 3)))
    R = q * np.sign(np.linalg.det(q))
    model = _random_model(head, 1)
    out = []
    for m in (mol, ss.rotate(mol, R)):
        x = ss.inputs(m)
        with torch.no_grad():
            P0 = model.density(x)
        M = model(x)
        Sh = x.ints.S @ x.ints.X
        spec = torch.linalg.eigvalsh(x.ints.X.T @ M @ x.ints.X if head == "hamiltonian" else Sh @ M @ Sh)
        out.append((spec.detach(), ss.energy(P0, ss.fock(P0, x.ints), x.ints)))
    assert (out[0][0] - out[1][0]).abs().max().item() < 1e-8
    assert abs(out[0][1] - out[1][1]).item() < 1e-8


def test_rotation_check_sees_a_non_covariant_correction(formaldehyde, monkeypatch):
    """`rotation_invariance` can fail: shifting the 2px levels alone (a term that does not rotate with the molecule)
    changes the guess energy of formaldehyde turned 90 degrees about z (px <-> py)."""
    R = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1.0]])
    model = _random_model("hamiltonian", 1)

    def guess_energy(mol):
        x = ss.inputs(mol)
        with torch.no_grad():
            P0 = model.density(x)
            return ss.energy(P0, ss.fock(P0, x.ints), x.ints).item()

    assert abs(guess_energy(formaldehyde) - guess_energy(ss.rotate(formaldehyde, R))) < 1e-8
    covariant = ss._correction

    def broken(m, x):
        return covariant(m, x) + torch.diag((x.f.ao_slot % 5 == 2).double() * 0.3)

    monkeypatch.setattr(ss, "_correction", broken)
    assert abs(guess_energy(formaldehyde) - guess_energy(ss.rotate(formaldehyde, R))) > 1e-6


def test_torch_scf_reproduces_pyscf_trajectory(formaldehyde):
    mf = scf.RHF(formaldehyde)
    dm0 = ss.pyscf_guess(formaldehyde, "minao")
    ref = ss.run_pyscf(mf, dm0)
    ints = ss.integrals(formaldehyde)
    tr = ss.scf_unrolled(torch.from_numpy(dm0), ints, ref.cycles + 1)
    e = np.array([x.item() for x in tr.energies[1 : ref.cycles + 1]])
    np.testing.assert_allclose(e, ref.energies, atol=1e-9)
    g = np.array([x.item() for x in tr.grad_norms[1 : ref.cycles + 1]]) * ints.n_ao / 2**0.5
    big = np.array(ref.grad_norms) > 1e-5
    np.testing.assert_allclose(g[big], np.array(ref.grad_norms)[big], rtol=1e-2)
    # DIIS from the first cycle (diis_start=0) is another trajectory
    tr0 = ss.scf_unrolled(torch.from_numpy(dm0), ints, 4, diis_start=0)
    assert abs(tr0.energies[3].item() - e[2]) > 1e-9


def test_ratio_of_sums_and_bootstrap():
    assert ss.ratio_of_sums([8, 10], [10, 10]) == 0.9
    lo, hi = ss.bootstrap_ratio([8, 10, 9, 12], [10, 10, 10, 10], n_boot=500)
    assert lo <= ss.ratio_of_sums([8, 10, 9, 12], [10] * 4) <= hi
    with pytest.raises(ValueError, match="den"):
        ss.ratio_of_sums([1, 2], [0, 0])
    with pytest.raises(ValueError, match="den"):
        ss.ratio_of_sums([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="level"):
        ss.bootstrap_ratio([1.0], [1.0], level=1.5)


def test_sail_and_surrogate_losses_backpropagate(water):
    s = ss.sample(water)
    for head in ss.HEADS:
        for loss_fn in (ss.sail_loss, ss.surrogate_loss):
            model = _random_model(head)
            loss = loss_fn(model, [s])
            loss.backward()
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            assert grads and all(torch.isfinite(g).all() for g in grads)
            assert any(g.abs().sum() > 0 for g in grads)
    assert ss.target_error(ss.GuessModel("density"), s).item() > 0


def test_counter_counts_every_fock_build(water):
    mf = scf.RHF(water)
    default = ss.run_pyscf(mf, None)
    again = ss.run_pyscf(mf, ss.pyscf_guess(water, "minao"))
    assert default.fock_builds == again.fock_builds  # ERIC(minao) == 1
    # PySCF: one build for dm0, one per cycle, one for the final convergence check
    assert default.fock_builds == default.cycles + 2
    assert default.converged and abs(default.energy - again.energy) < 1e-8
    assert "get_veff" not in mf.__dict__  # the wrapper is removed afterwards


def test_dft_solver_counts_are_reproducible_and_see_a_broken_guess(water):
    """`pbe_counts_reproduce`: a recount of the same guess under the same PBE solver gives the same number of builds;
    a different (broken) guess gives another, so a stored count from wrong weights or settings would not match."""
    mf = ss.dft_solver(water, "pbe", 1)
    assert mf.xc == "pbe" and mf.grids.level == 1
    dm = ss.pyscf_guess(water, "minao")
    first = ss.run_pyscf(mf, dm)
    again = ss.run_pyscf(ss.dft_solver(water, "pbe", 1), dm)
    assert first.converged and (first.fock_builds, first.energy) == (again.fock_builds, pytest.approx(again.energy))
    broken = ss.run_pyscf(ss.dft_solver(water, "pbe", 1), np.eye(water.nao) * water.nelectron / water.nao)
    assert broken.fock_builds != first.fock_builds
    with pytest.raises(ValueError, match="xc"):
        ss.dft_solver(water, "no-such-functional")
    with pytest.raises(ValueError, match="grid_level"):
        ss.dft_solver(water, "pbe", 12)


def test_project_density_into_a_larger_basis(water):
    big = ss.build_molecule(*WATER, basis="6-31g")
    dm = ss.pyscf_guess(water, "minao")
    P = ss.project_density(dm, water, big)
    S = big.intor("int1e_ovlp")
    assert P.shape == (big.nao, big.nao) and np.allclose(P, P.T)
    assert abs(np.trace(P @ S) - water.nelectron) < 0.05 * water.nelectron
    np.testing.assert_allclose(ss.project_density(dm, water, water), dm, atol=1e-10)  # same basis: unchanged
    with pytest.raises(ValueError, match="same atoms"):
        ss.project_density(dm, water, ss.rotate(big, np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1.0]])))
    with pytest.raises(ValueError, match="dm"):
        ss.project_density(dm[:3, :3], water, big)


def test_ood_smiles_embed():
    assert len(ss.OOD_SMILES) == 26
    m = ss.rdkit_molecule(ss.OOD_SMILES["furan"], seed=0)
    assert m.natm == 9


# --- the J/K build through PySCF (autograd) ---------------------------------------------------------------------
def test_jk_engine_matches_the_einsum_and_refuses_bad_shapes(formaldehyde):
    full, jk = ss.integrals(formaldehyde), ss.integrals(formaldehyde, eri="jk")
    assert jk.eri.numel() == 0 and jk.jk is not None
    D = torch.from_numpy(np.random.default_rng(0).normal(size=(full.n_ao,) * 2))  # not symmetric
    for P in (D, D + D.T):
        J1, K1 = ss.coulomb_exchange(P, full)
        J2, K2 = ss.coulomb_exchange(P, jk)
        assert torch.allclose(J1, J2, atol=1e-12) and torch.allclose(K1, K2, atol=1e-12)
    with pytest.raises(ValueError, match="D must have shape"):
        jk.jk(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="eri must be"):
        ss.integrals(formaldehyde, eri="direct")
    with pytest.raises(ValueError, match="two-electron"):
        ss.coulomb_exchange(D, ss.integrals(formaldehyde, eri=False))
    with pytest.raises(ValueError, match="jk must build"):
        ss.Integrals(full.S, full.H, full.eri, full.X, full.n_occ, full.e_nuc, ss.JKEngine(ss.build_molecule(*WATER)))


def test_jk_backward_against_finite_differences_and_the_einsum(water):
    full, jk = ss.integrals(water), ss.integrals(water, eri="jk")
    D = torch.from_numpy(np.random.default_rng(1).normal(size=(full.n_ao,) * 2)).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda P: ss.coulomb_exchange(P, jk), (D,))  # finite differences
    W = torch.from_numpy(np.random.default_rng(2).normal(size=(2, full.n_ao, full.n_ao)))
    grads = []
    for ints in (full, jk):
        J, K = ss.coulomb_exchange(D, ints)
        (g,) = torch.autograd.grad((W[0] * J).sum() + (W[1] * K).sum(), D)
        grads.append(g)
    assert torch.allclose(*grads, atol=1e-12)
    # a broken backward (K's adjoint replaced by J's) is seen
    J, K = ss.coulomb_exchange(D, full)
    (g_wrong,) = torch.autograd.grad((W[0] * J).sum() + (W[1] * J).sum(), D)
    assert not torch.allclose(grads[1], g_wrong, atol=1e-6)


def test_unrolled_scf_and_sail_loss_through_the_jk_build(formaldehyde):
    full, jk = ss.inputs(formaldehyde), ss.inputs(formaldehyde, eri="jk")
    model = ss.GuessModel("hamiltonian", hidden=4)
    losses, grads = [], []
    for x in (full, jk):
        model.zero_grad()
        tr = ss.scf_unrolled(model.density(x), x.ints, 8)
        loss = torch.stack(tr.grad_norms).sum()
        loss.backward()
        losses.append(loss.item())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert abs(losses[0] - losses[1]) < 1e-12
    assert torch.allclose(*grads, atol=1e-10)
    calls = jk.ints.jk.calls
    ss.scf_unrolled(model.density(jk).detach(), jk.ints, 3)
    assert jk.ints.jk.calls == calls + 3  # one PySCF J/K build per cycle


def test_random_smiles_are_distinct_valid_and_deterministic():
    from rdkit import Chem

    a = ss.random_smiles(40, 6, seed=3, exclude=["c1ccoc1"])
    assert a == ss.random_smiles(40, 6, seed=3, exclude=["c1ccoc1"])
    assert a != ss.random_smiles(40, 6, seed=4)
    assert len(set(a)) == 40 and "c1ccoc1" not in a
    for smi in a:
        m = Chem.MolFromSmiles(smi)
        assert m is not None and 2 <= m.GetNumAtoms() <= 6
        assert {at.GetSymbol() for at in m.GetAtoms()} <= set("CNOF")
    with pytest.raises(ValueError, match="n=.*distinct"):
        ss.random_smiles(50, max_heavy=1, min_heavy=1)  # only CH4 exists
    with pytest.raises(ValueError, match="exclude"):
        ss.random_smiles(2, exclude=["not a smiles ("])
    with pytest.raises(ValueError, match="min_heavy"):
        ss.random_smiles(2, max_heavy=2, min_heavy=3)


def test_ft_molecules_split_and_train_guess_init(water):
    cfg = ss.checkpoint_config("sail_ft_1")
    assert cfg["seeds"] == [1]
    cfg.update(n_mols=6, n_held=2)
    mols, tr, held = ss.ft_molecules(cfg)
    assert len(tr) + len(held) == len(mols) and not set(tr) & set(held) and len(held) == 2
    assert not set(mols) & set(ss.OOD_SMILES.values())
    with pytest.raises(ValueError, match="n_held"):
        ss.ft_molecules({k: v for k, v in cfg.items() if k != "n_held"})
    s = ss.sample(water, eri="jk")
    init = ss.GuessModel("hamiltonian", hidden=cfg["hidden"])
    with torch.no_grad():
        init.coupling[-1].bias.fill_(0.01)
    model, _ = ss.train_guess("hamiltonian", "sail", [s], cfg, 0, steps=0, progress=False, init=init)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), init.parameters()))
    with pytest.raises(ValueError, match="init must be"):
        ss.train_guess("density", "sail", [s], cfg, 0, steps=0, progress=False, init=init)
    with pytest.raises(ValueError, match="eri must be"):
        ss.sample(water, eri=False)


def test_target_error_is_the_relative_frobenius_error_and_the_prior_baseline(water):
    """The fit-half illustration (no verdict) compares the surrogate's target-fit error with the SAP prior's,
    computed in the notebook as ||H_SAP - F*|| / ||F*||: that is exactly target_error of the untrained Hamiltonian
    head, and a model that predicts F* itself has error 0."""
    s = ss.sample(water)
    prior = (s.x.H_sap - s.F_star).norm() / s.F_star.norm()
    with torch.no_grad():
        assert ss.target_error(ss.GuessModel("hamiltonian"), s).item() == pytest.approx(prior.item(), rel=1e-12)
        assert prior.item() > 1e-3  # the prior is not the converged Fock matrix

        class Exact(ss.GuessModel):
            def forward(self, x):
                return s.F_star

        assert ss.target_error(Exact("hamiltonian"), s).item() == 0.0


def test_train_guess_overrides_and_sail_tail(water):
    """A continued run draws the batches after the first run's and starts from float32-rounded weights; broken
    overrides and a config without the continuation's keys are refused."""
    cfg = ss.checkpoint_config("sail_ft_0")
    assert cfg["lr_sail_tail"] == pytest.approx(0.1 * cfg["lr_sail"])  # the cosine schedule's floor
    s = ss.sample(water, eri="jk")
    model = ss.GuessModel("hamiltonian", hidden=cfg["hidden"])
    with torch.no_grad():
        model.coupling[-1].bias.fill_(0.0123456789012345)  # not a float32 number
    tail, hist = ss.sail_tail(model, [s], dict(cfg, steps_sail_tail=0), 0, progress=False)
    assert hist.loss == [] and tail.coupling[-1].bias[0].item() == pytest.approx(0.0123456789012345, rel=1e-7)
    assert tail.coupling[-1].bias[0].item() == float(torch.tensor(0.0123456789012345, dtype=torch.float32))
    _, h = ss.sail_tail(model, [s], dict(cfg, steps_sail_tail=2, warmup_tail=0, unroll=2), 0, progress=False)
    assert len(h.loss) == 2 and h.lr == [cfg["lr_sail_tail"]] * 2  # constant at the floor
    with pytest.raises(ValueError, match="steps_sail_tail"):
        ss.sail_tail(model, [s], {k: v for k, v in cfg.items() if k != "steps_sail_tail"}, 0)
    with pytest.raises(TypeError):
        ss.sail_tail("model", [s], cfg, 0)
    for bad, match in ((dict(step_offset=-1), "step_offset"), (dict(schedule="linear"), "schedule"),
                       (dict(lr=0.0), "lr"), (dict(warmup=-2), "warmup")):
        with pytest.raises(ValueError, match=match):
            ss.train_guess("hamiltonian", "sail", [s], cfg, 0, steps=0, progress=False, **bad)


def test_sail_continue_configs_and_unroll(water):
    """The two continuations of a seed differ only in the unroll, start where sail_ft ended (steps, floor lr) and
    draw the same batches; the unroll reaches the loss; broken configs are refused."""
    c12, c6 = ss.checkpoint_config("sail_t12_1"), ss.checkpoint_config("sail_t6c_1")
    ft = ss.checkpoint_config("sail_ft_1")
    assert {k for k in c12 if c12[k] != c6[k]} == {"unroll"} and (c12["unroll"], c6["unroll"]) == (12, 6)
    assert c12["start"] == "sail_ft_1" and c12["seeds"] == [1] and c12["lr"] == ft["lr_sail_tail"]
    assert c12["step_offset"] == ft["steps_sail"] + ft["steps_sail_tail"]
    with pytest.raises(ValueError, match="sail_t12_0"):
        ss.checkpoint_config("sail_t16_0")
    s = ss.sample(water, eri="jk")
    model = ss.GuessModel("hamiltonian", hidden=c12["hidden"])
    with torch.no_grad():
        model.coupling[-1].bias.fill_(0.0123456789012345)  # not a float32 number
    same, hist = ss.sail_continue(model, [s], dict(c12, steps=0), 0, progress=False)
    assert hist.loss == [] and same.coupling[-1].bias[0].item() == float(
        torch.tensor(0.0123456789012345, dtype=torch.float32))
    h = {t: ss.sail_continue(model, [s], dict(c12, steps=2, warmup=0, unroll=t), 0, progress=False)[1]
         for t in (1, 3)}
    assert h[1].lr == [c12["lr"]] * 2
    assert h[3].loss[0] > h[1].loss[0]  # three cycles' gradient norms summed, not one
    for bad, err, match in (("unroll", ValueError, "unroll"), ("steps", ValueError, "steps")):
        with pytest.raises(err, match=match):
            ss.sail_continue(model, [s], {k: v for k, v in c12.items() if k != bad}, 0, progress=False)
    with pytest.raises(ValueError, match="unroll"):
        ss.sail_continue(model, [s], dict(c12, unroll=0, steps=1), 0, progress=False)
    with pytest.raises(TypeError):
        ss.sail_continue("model", [s], c12, 0)


def test_join_curves_keeps_window_means():
    a = list(np.arange(1.0, 4001.0))
    binned = {"step": list(range(8, 4001, 8)), "value": [float(np.mean(a[i:i + 8])) for i in range(0, 4000, 8)]}
    b = list(np.arange(4001.0, 8001.0))
    c = ss.join_curves(binned, b)
    assert len(c["value"]) == 500 and c["step"][-1] == 8000
    # every bin of 16 steps holds two whole stored bins of 8 or 16 raw steps: exact means
    assert np.allclose(c["value"], np.arange(1.0, 8001.0).reshape(500, 16).mean(1))
    assert ss.join_curves([1.0, 2.0], [3.0])["value"] == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="first"):
        ss.join_curves({"step": [2, 1], "value": [1.0, 2.0]}, [1.0])
    with pytest.raises(ValueError, match="second"):
        ss.join_curves([1.0], {"value": [1.0]})
    with pytest.raises(ValueError, match="second"):
        ss.join_curves([1.0], [float("nan")])
