"""SAIL: learning SCF initial guesses by differentiating through the solver (chapter 17_sail_scf).

The pieces, at RHF level (the paper uses Kohn-Sham DFT):

* :func:`build_molecule` / :func:`g2_molecules` / :func:`rdkit_molecule`: PySCF molecules from ASE's G2 set and
  from RDKit-embedded SMILES (ETKDG, fixed seed). :class:`Integrals`: S, H_core, ERIs and X = S^{-1/2} in torch.
* :func:`occupied_projector`: the aufbau density of a symmetric matrix with a **stable backward**: the derivative
  only couples occupied with virtual orbitals (``1 / (eps_i - eps_a)``), so degenerate levels inside the occupied
  or the virtual block do not blow up the gradient.
* :func:`scf_unrolled`: a differentiable RHF SCF (Fock build, Löwdin orthogonalization, DIIS, aufbau) returning the
  trajectory of densities, energies and orbital-gradient norms ``||X^T (F P S - S P F) X||``.
* :class:`JKEngine` / :func:`coulomb_exchange`: the Fock build through PySCF's own J/K routine as an autograd
  function (J and K are linear and self-adjoint in the density: the backward is one more J/K build), so the
  unrolled SCF needs no four-index tensor (``integrals(mol, eri="jk")``).
* :func:`random_smiles` / :func:`ft_molecules`: a few hundred random small closed-shell molecules (RDKit) for the
  ``sail_ft_<seed>`` checkpoints (SAIL started from the surrogate, :func:`train_guess` with ``init``, continued
  at the schedule's floor by :func:`sail_tail`; :func:`join_curves` joins the two loss curves).
* :class:`GuessModel`: a residual guess on a prior, rotation-equivariant by construction: a Hamiltonian head
  (``H_SAP + dH``, aufbau) or a density head (``purify(P_MINAO + dP)``); ``dM`` is built from overlap blocks with
  separate sigma and pi p-p channels and on-site shifts, hybridization and anisotropy, each times a scalar from
  invariant descriptors. :func:`sail_loss` (label-free, through the unrolled SCF) and :func:`surrogate_loss`
  (ground-state supervision) train it (:func:`train_guess`).
* :func:`dft_solver`: PySCF's Kohn-Sham solver (PBE by default) for counting builds at the paper's kind of level of
  theory; :func:`project_density` carries a minimal-basis guess into a larger basis.
* :func:`run_pyscf`: PySCF's RHF from a given initial density, counting every Fock build (``get_veff`` call);
  ERIC = builds with the guess (+ any hidden build the guess needs) / builds with PySCF's MINAO guess, summed
  over molecules (:func:`ratio_of_sums`, :func:`bootstrap_ratio`).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from pyscf import ao2mo, gto, scf
from torch import Tensor, nn

from helpers import validate as V

__all__ = [
    "ELEMENTS", "SHELLS", "build_molecule", "g2_molecules", "rdkit_molecule", "Integrals", "integrals",
    "occupied_projector", "density_from_hamiltonian", "fock", "energy", "orbital_gradient", "scf_unrolled",
    "ScfTrace", "GuessModel", "HEADS", "Features", "features", "Inputs", "inputs", "sap_hamiltonian", "purify",
    "pyscf_guess", "run_pyscf", "ScfRun", "rotate", "g2_split", "perturbed", "Sample", "sample", "target_error",
    "surrogate_loss", "sail_loss", "OBJECTIVES", "checkpoint_config", "training_samples", "train_guess",
    "ratio_of_sums", "bootstrap_ratio", "OOD_SMILES", "dft_solver", "project_density", "JKEngine",
    "coulomb_exchange", "random_smiles", "FT_NAMES", "ft_molecules", "sail_tail", "join_curves",
    "LONG_NAMES", "sail_continue",
]

ELEMENTS = ("H", "C", "N", "O", "F")
SHELLS = ("1s", "2s", "2p")
# The chapter's out-of-distribution molecules (5-14 heavy atoms), embedded by :func:`rdkit_molecule` with seed 0
OOD_SMILES = {
    "furan": "c1ccoc1", "pyrrole": "c1cc[nH]c1", "imidazole": "c1c[nH]cn1", "glycine": "NCC(=O)O",
    "benzene": "c1ccccc1", "pyridine": "c1ccncc1", "pyrimidine": "c1cncnc1", "alanine": "CC(N)C(=O)O",
    "ethyl acetate": "CCOC(C)=O", "hexane": "CCCCCC", "toluene": "Cc1ccccc1", "phenol": "Oc1ccccc1",
    "aniline": "Nc1ccccc1", "fluorobenzene": "Fc1ccccc1", "cyclohexanone": "O=C1CCCCC1", "benzaldehyde": "O=Cc1ccccc1",
    "anisole": "COc1ccccc1", "uracil": "O=c1cc[nH]c(=O)[nH]1", "octane": "CCCCCCCC", "benzoic acid": "OC(=O)c1ccccc1",
    "thymine": "Cc1c[nH]c(=O)[nH]c1=O", "indole": "c1ccc2[nH]ccc2c1", "naphthalene": "c1ccc2ccccc2c1",
    "adenine": "Nc1ncnc2[nH]cnc12", "aspirin": "CC(=O)Oc1ccccc1C(=O)O", "caffeine": "Cn1cnc2c1c(=O)n(C)c(=O)n2C",
}
_SHELL_PAIRS = {(a, b): i for i, (a, b) in enumerate([(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)])}


# --------------------------------------------------------------------------------------------------------------
# Molecules
# --------------------------------------------------------------------------------------------------------------
def build_molecule(symbols: Sequence[str], coords: np.ndarray, basis: str = "sto-3g") -> gto.Mole:
    """A closed-shell PySCF molecule (coordinates in Angstrom); raise ``ValueError`` for an odd electron count."""
    symbols = V.sequence("symbols", symbols, min_len=1)
    coords = V.array("coords", coords, dtype="float").astype(np.float64)  # NaN/inf refused
    if coords.shape != (len(symbols), 3):
        raise ValueError(f"coords must have shape (len(symbols)={len(symbols)}, 3), got {coords.shape}")
    if len(coords) > 1:
        d = np.sqrt(((coords[:, None] - coords[None]) ** 2).sum(-1))
        d[np.diag_indices(len(coords))] = np.inf
        i, j = np.unravel_index(np.argmin(d), d.shape)
        if not (d[i, j] >= 0.1):
            raise ValueError(f"coords must keep atoms apart (>= 0.1 Angstrom), but atoms {i} and {j} are "
                             f"{d[i, j]:.3g} Angstrom apart")
    V.instance("basis", basis, str)
    bad = [s for s in symbols if s not in ELEMENTS]
    if bad:
        raise ValueError(f"symbols must be elements among {ELEMENTS}, got {bad}")
    n_elec = sum(gto.charge(s) for s in symbols)
    if n_elec % 2:
        raise ValueError(f"symbols must give an even number of electrons (closed-shell RHF), got {n_elec}")
    mol = gto.M(atom=list(zip(symbols, coords.tolist())), basis=basis, unit="Angstrom", verbose=0,
                symmetry=False)
    return mol


def g2_molecules(max_heavy: int = 4, min_atoms: int = 2) -> dict[str, gto.Mole]:
    """Closed-shell molecules of ASE's bundled G2 set made of H, C, N, O, F with at most ``max_heavy`` heavy atoms."""
    max_heavy = V.integer("max_heavy", max_heavy, min=0)
    min_atoms = V.integer("min_atoms", min_atoms, min=1)
    from ase.collections import g2

    out = {}
    for name in sorted(g2.names):
        atoms = g2[name]
        sym = atoms.get_chemical_symbols()
        heavy = sum(s != "H" for s in sym)
        if len(sym) < min_atoms or heavy > max_heavy or any(s not in ELEMENTS for s in sym):
            continue
        if abs(atoms.get_initial_magnetic_moments()).sum() > 0 or sum(gto.charge(s) for s in sym) % 2:
            continue
        out[name] = build_molecule(sym, atoms.get_positions())
    return out


def rdkit_molecule(smiles: str, seed: int = 0, basis: str = "sto-3g") -> gto.Mole:
    """A 3D geometry from RDKit (ETKDG embedding with a fixed seed, then MMFF), as a PySCF molecule."""
    V.instance("smiles", smiles, str)
    seed = V.integer("seed", seed, min=0, max=2**31 - 1)  # RDKit's randomSeed is a signed 32-bit int
    V.instance("basis", basis, str)
    from rdkit import Chem
    from rdkit.Chem import AllChem, rdBase

    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles) if smiles.strip() else None
    if mol is None:
        raise ValueError(f"smiles must be a valid SMILES string, got {smiles!r}")
    mol = Chem.AddHs(mol)
    params = AllChem.ETKDGv3()
    params.randomSeed = int(seed)
    sym = [a.GetSymbol() for a in mol.GetAtoms()]
    if set(sym) - set(ELEMENTS):
        raise ValueError(f"smiles must contain only the elements {ELEMENTS}, got {sorted(set(sym) - set(ELEMENTS))}"
                         f" in {smiles!r}")
    if AllChem.EmbedMolecule(mol, params) != 0:
        raise ValueError(f"smiles {smiles!r}: RDKit could not embed the molecule in 3D")
    AllChem.MMFFOptimizeMolecule(mol)
    try:
        return build_molecule(sym, mol.GetConformer().GetPositions(), basis)
    except ValueError as e:
        raise ValueError(f"smiles {smiles!r} gives no valid molecule: {e}") from None


def rotate(mol: gto.Mole, R: np.ndarray) -> gto.Mole:
    """The same molecule with every coordinate rotated by the 3x3 matrix ``R``."""
    _mol(mol)
    R = V.array("R", R, shape=(3, 3), dtype="float").astype(np.float64)
    if not (np.allclose(R @ R.T, np.eye(3), atol=1e-10) and np.linalg.det(R) > 0):
        raise ValueError(f"R must be a 3x3 rotation matrix (R R^T = I, det R = +1), got {R.tolist()}")
    coords = mol.atom_coords(unit="Angstrom") @ R.T
    return build_molecule([mol.atom_symbol(i) for i in range(mol.natm)], coords, mol.basis)


def _mol(mol: object) -> gto.Mole:
    if not isinstance(mol, gto.Mole):
        raise TypeError(f"mol must be a pyscf Mole, got {V.describe(mol)}")
    return mol


# --------------------------------------------------------------------------------------------------------------
# Integrals and the differentiable SCF
# --------------------------------------------------------------------------------------------------------------
@dataclass
class Integrals:
    S: Tensor
    H: Tensor
    eri: Tensor  # (n, n, n, n), chemists' notation (mu nu | lambda sigma)
    X: Tensor  # S^{-1/2} (Löwdin)
    n_occ: int
    e_nuc: float
    jk: JKEngine | None = None  # PySCF's J/K builder (``integrals(mol, eri="jk")``), used instead of ``eri``

    def __post_init__(self) -> None:
        V.tensor("S", self.S, ndim=2, dtype="float", nonempty=True)
        n = self.S.shape[0]
        for name in ("S", "H", "X"):
            V.tensor(name, getattr(self, name), shape=(n, n), dtype="float")
        if V.tensor("eri", self.eri, dtype="float").numel():  # eri=False keeps an empty tensor
            V.tensor("eri", self.eri, shape=(n, n, n, n), dtype="float")
        self.n_occ = V.integer("n_occ", self.n_occ, min=1, max=max(n - 1, 1))
        self.e_nuc = V.number("e_nuc", self.e_nuc)
        V.optional(V.instance, "jk", self.jk, JKEngine)
        if self.jk is not None and self.jk.n_ao != n:
            raise ValueError(f"jk must build {n}x{n} matrices, got an engine for {self.jk.n_ao} AOs")

    @property
    def n_ao(self) -> int:
        return self.S.shape[0]

    @property
    def has_two_electron(self) -> bool:
        return self.jk is not None or self.eri.numel() > 0


class JKEngine:
    """PySCF's Coulomb and exchange builds for one molecule, from its 8-fold symmetric ERIs held in memory
    (``n^4 / 8`` numbers instead of the ``n^4`` of a full tensor): ``engine(D) -> (J, K)`` with
    ``J_ij = sum_kl (ij|kl) D_kl`` and ``K_ij = sum_kl (ik|jl) D_kl`` for any real ``D`` (symmetric or not), or a
    stack of them. This is the call PySCF's solver makes (``scf.hf.dot_eri_dm``)."""

    def __init__(self, mol: gto.Mole) -> None:
        _mol(mol)
        self.n_ao = int(mol.nao)
        self._eri = mol.intor("int2e", aosym="s8")
        self.calls = 0

    def __call__(self, D: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        D = np.asarray(D, dtype=np.float64)
        if D.shape[-2:] != (self.n_ao, self.n_ao) or D.ndim not in (2, 3):
            raise ValueError(f"D must have shape ({self.n_ao}, {self.n_ao}) or (m, {self.n_ao}, {self.n_ao}), "
                             f"got {D.shape}")
        self.calls += 1
        hermi = 1 if np.array_equal(D, np.swapaxes(D, -1, -2)) else 0
        J, K = scf.hf.dot_eri_dm(self._eri, D, hermi=hermi)
        return np.asarray(J), np.asarray(K)


class _JK(torch.autograd.Function):
    """(J(P), K(P)) through PySCF; J and K are linear in P and self-adjoint: the backward is one more build."""

    @staticmethod
    def forward(ctx, P: Tensor, engine: JKEngine) -> tuple[Tensor, Tensor]:
        ctx.engine = engine
        J, K = engine(P.detach().numpy())
        return torch.from_numpy(J), torch.from_numpy(K)

    @staticmethod
    def backward(ctx, gJ: Tensor | None, gK: Tensor | None):
        # dL/dP_kl = sum_ij gJ_ij (ij|kl) + gK_ij (ik|jl) = J(gJ)_kl + K(gK)_kl  (real orbitals)
        n = ctx.engine.n_ao
        gJ = torch.zeros(n, n, dtype=torch.float64) if gJ is None else gJ
        gK = torch.zeros(n, n, dtype=torch.float64) if gK is None else gK
        J, K = ctx.engine(np.stack([gJ.detach().numpy(), gK.detach().numpy()]))
        return torch.from_numpy(J[0] + K[1]), None


def coulomb_exchange(P: Tensor, ints: Integrals) -> tuple[Tensor, Tensor]:
    """``(J(P), K(P))``, differentiable in ``P``: through PySCF's J/K build when ``ints`` carries one (backward =
    one more build on the incoming gradient), else through the four-index tensor (``einsum``)."""
    _matrix("P", P, _ints(ints))
    if not ints.has_two_electron:
        raise ValueError("ints must carry the two-electron integrals (integrals(mol, eri=True) or eri='jk')")
    return _coulomb_exchange(P, ints)


def _coulomb_exchange(P: Tensor, ints: Integrals) -> tuple[Tensor, Tensor]:
    if ints.jk is not None:
        return _JK.apply(P, ints.jk)
    return torch.einsum("ijkl,kl->ij", ints.eri, P), torch.einsum("ikjl,kl->ij", ints.eri, P)


def integrals(mol: gto.Mole, eri: bool | str = True) -> Integrals:
    """PySCF's one- and two-electron integrals as float64 torch tensors (``eri=False``: skip the 4-index tensor,
    enough for making a guess; ``eri="jk"``: no 4-index tensor but a :class:`JKEngine`, PySCF's own J/K build)."""
    _mol(mol)
    if not isinstance(eri, (bool, str)):  # 1 == True: a bare membership test would accept 1 and 0
        raise TypeError(f"eri must be True, False or 'jk', got {type(eri).__name__} {eri!r}")
    if isinstance(eri, str) and eri != "jk":
        raise ValueError(f"eri must be True, False or 'jk', got {eri!r}")
    if mol.nelectron % 2:
        raise ValueError(f"RHF needs an even number of electrons, got {mol.nelectron}")
    S = torch.from_numpy(mol.intor("int1e_ovlp"))
    H = torch.from_numpy(mol.intor("int1e_kin") + mol.intor("int1e_nuc"))
    jk = JKEngine(mol) if eri == "jk" else None
    if eri is True:
        eri = torch.from_numpy(ao2mo.restore(1, mol.intor("int2e", aosym="s8"), mol.nao))
    else:
        eri = torch.zeros((0,) * 4, dtype=torch.float64)
    w, U = torch.linalg.eigh(S)
    X = U @ torch.diag(w.rsqrt()) @ U.T
    return Integrals(S, H, eri, X, mol.nelectron // 2, float(mol.energy_nuc()), jk)


MIN_GAP = 1e-3  # Hartree: occupied-virtual gaps below this are clamped in the backward pass (a closing gap)


class _OccProjector(torch.autograd.Function):
    """Q = C_occ C_occ^T of a symmetric matrix; backward couples only occupied with virtual orbitals."""

    @staticmethod
    def forward(ctx, A: Tensor, n_occ: int) -> Tensor:
        eps, C = torch.linalg.eigh(A)
        Co = C[:, :n_occ]
        ctx.save_for_backward(eps, C)
        ctx.n_occ = n_occ
        return Co @ Co.T

    @staticmethod
    def backward(ctx, G: Tensor):
        eps, C = ctx.saved_tensors
        o = ctx.n_occ
        M = C.T @ (0.5 * (G + G.T)) @ C
        W = torch.zeros_like(M)
        gap = (eps[:o, None] - eps[None, o:]).clamp(max=-MIN_GAP)  # only occupied-virtual pairs (all < 0)
        W_ov = M[:o, o:] / gap
        W[:o, o:] = W_ov
        W[o:, :o] = W_ov.T
        return C @ W @ C.T, None


def occupied_projector(A: Tensor, n_occ: int) -> Tensor:
    """Projector on the ``n_occ`` lowest eigenvectors of the symmetric matrix ``A`` (differentiable, stable)."""
    V.tensor("A", A, ndim=2, dtype="float")
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix, got shape {tuple(A.shape)}")
    n_occ = V.integer("n_occ", n_occ, min=1, max=A.shape[0] - 1)
    return _OccProjector.apply(A, n_occ)


def _ints(ints: object) -> Integrals:
    return V.instance("ints", ints, Integrals)


def _matrix(name: str, M: object, ints: Integrals) -> Tensor:
    """An (n_ao, n_ao) finite float tensor (checked at the door of the public functions, not in the SCF loop)."""
    return V.tensor(name, M, shape=(ints.n_ao, ints.n_ao), dtype="float")


def density_from_hamiltonian(H: Tensor, ints: Integrals) -> Tensor:
    """Aufbau: occupy the lowest ``n_occ`` solutions of ``H C = S C eps``; returns ``P = 2 C_occ C_occ^T``."""
    _matrix("H", H, _ints(ints))
    return _density(H, ints)


def _density(H: Tensor, ints: Integrals) -> Tensor:
    Q = _OccProjector.apply(ints.X.T @ H @ ints.X, ints.n_occ)
    return 2 * ints.X @ Q @ ints.X.T


def fock(P: Tensor, ints: Integrals) -> Tensor:
    """``F = H + J(P) - K(P) / 2``."""
    _matrix("P", P, _ints(ints))
    if not ints.has_two_electron:
        raise ValueError("ints must carry the two-electron integrals (integrals(mol, eri=True) or eri='jk')")
    return _fock(P, ints)


def _fock(P: Tensor, ints: Integrals) -> Tensor:
    J, K = _coulomb_exchange(P, ints)
    return ints.H + J - 0.5 * K


def energy(P: Tensor, F: Tensor, ints: Integrals) -> Tensor:
    """RHF energy ``E = Tr[P (H + F)] / 2 + E_nuc``."""
    _matrix("P", P, _ints(ints))
    _matrix("F", F, ints)
    return _energy(P, F, ints)


def _energy(P: Tensor, F: Tensor, ints: Integrals) -> Tensor:
    return 0.5 * torch.sum(P * (ints.H + F)) + ints.e_nuc


def orbital_gradient(F: Tensor, P: Tensor, ints: Integrals) -> Tensor:
    """The orthogonalized commutator ``X^T (F P S - S P F) X`` (zero at self-consistency)."""
    _matrix("F", F, _ints(ints))
    _matrix("P", P, ints)
    return _orbital_gradient(F, P, ints)


def _orbital_gradient(F: Tensor, P: Tensor, ints: Integrals) -> Tensor:
    FPS = F @ P @ ints.S
    return ints.X.T @ (FPS - FPS.T) @ ints.X


@dataclass
class ScfTrace:
    energies: list[Tensor]
    grad_norms: list[Tensor]  # RMS of the orbital gradient at each cycle (differentiable)
    P: Tensor
    F: Tensor


def scf_unrolled(P0: Tensor, ints: Integrals, n_cycles: int, diis: int = 8, tol: float | None = None,
                 diis_start: int = 1) -> ScfTrace:
    """Run ``n_cycles`` RHF cycles from ``P0`` with DIIS; every step stays in autograd.

    Cycle ``t`` builds ``F(P_t)``, records ``E_t`` and ``g_t = RMS(X^T (F P S - S P F) X)``, extrapolates the Fock
    matrix from the last ``diis`` cycles (Pulay: minimize ``|sum c_i e_i|`` with ``sum c_i = 1``) and occupies its
    lowest orbitals. ``tol`` stops early once ``g_t < tol`` (for converged reference runs). As in PySCF
    (``diis_start_cycle = 1``, ``diis_space = 8``), the Fock matrix of the starting density is not extrapolated
    and enters no DIIS history (``diis_start=1``): from the same ``P0``, the trajectory is PySCF's.
    """
    _matrix("P0", P0, _ints(ints))
    if not ints.has_two_electron:
        raise ValueError("ints must carry the two-electron integrals (integrals(mol, eri=True) or eri='jk')")
    n_cycles = V.integer("n_cycles", n_cycles, min=1)
    diis = V.integer("diis", diis, min=1)
    tol = V.optional(V.positive, "tol", tol)
    diis_start = V.integer("diis_start", diis_start, min=0)
    n = ints.n_ao
    P = P0
    Fs: list[Tensor] = []
    errs: list[Tensor] = []
    energies, norms = [], []
    F = None
    for t in range(n_cycles):
        F = _fock(P, ints)
        g = _orbital_gradient(F, P, ints)
        energies.append(_energy(P, F, ints))
        norms.append(torch.sqrt(torch.sum(g * g) / n**2 + 1e-20))  # + tiny: finite gradient when g == 0 exactly
        if tol is not None and norms[-1].item() < tol:
            break
        if t >= diis_start:
            Fs, errs = (Fs + [F])[-diis:], (errs + [g])[-diis:]
        m = len(Fs)
        if m > 1:
            E = torch.stack(errs).reshape(m, -1)
            B = torch.zeros(m + 1, m + 1, dtype=F.dtype)
            EE = E @ E.T
            B[:m, :m] = EE / EE.diagonal().max().clamp(min=1e-30) + 1e-12 * torch.eye(m, dtype=F.dtype)
            B[:m, m] = B[m, :m] = -1.0
            rhs = torch.zeros(m + 1, dtype=F.dtype)
            rhs[m] = -1.0
            c = torch.linalg.solve(B, rhs)[:m]
            F_ext = torch.einsum("i,ijk->jk", c, torch.stack(Fs))
        else:
            F_ext = F
        P = _density(F_ext, ints)
    return ScfTrace(energies, norms, P, F)


# --------------------------------------------------------------------------------------------------------------
# Priors, purification and the guess model (equivariant blocks that separate sigma from pi couplings)
# --------------------------------------------------------------------------------------------------------------
def sap_hamiltonian(mol: gto.Mole, sap_basis: str = "sapgrasplarge") -> Tensor:
    """``H_core + V_SAP``: the core Hamiltonian plus PySCF's superposition of atomic potentials (no Fock build)."""
    _mol(mol)
    V.instance("sap_basis", sap_basis, str)
    from pyscf.gto.basis import load

    basis = {}
    for a in {mol.atom_symbol(i) for i in range(mol.natm)}:
        b = load(sap_basis, a)
        b = b[a] if isinstance(b, dict) else b
        basis[a] = np.asarray(b[0][1:], dtype=float)
    H = mol.intor("int1e_kin") + mol.intor("int1e_nuc") + scf.hf.make_sap(mol, sap_basis=basis)
    return torch.from_numpy(H)


def purify(P: Tensor, ints: Integrals) -> Tensor:
    """The idempotent density closest in spirit to ``P``: occupy its ``n_occ`` strongest natural orbitals.

    ``S^{1/2} P S^{1/2}`` is diagonalized in the orthonormal (Löwdin) basis and the projector on its ``n_occ``
    largest eigenvectors is mapped back, ``2 X Q X^T``: exactly ``N`` electrons, ``P S P = 2 P``. Differentiable
    with the stable projector backward.
    """
    _matrix("P", P, _ints(ints))
    return _purify(P, ints)


def _purify(P: Tensor, ints: Integrals) -> Tensor:
    Sh = ints.S @ ints.X  # S^{1/2}
    Q = _OccProjector.apply(-(Sh @ P @ Sh), ints.n_occ)
    return 2 * ints.X @ Q @ ints.X.T


@dataclass
class Features:
    """Invariant descriptors of one molecule, bond directions, and the AO bookkeeping the model needs."""

    atom: Tensor  # (natm, F_atom) element one-hot + per-element radial environment
    pair_rbf: Tensor  # (natm, natm, n_rbf) radial basis of interatomic distances
    unit: Tensor  # (natm, natm, 3) unit vector from atom A to atom B (zero on the diagonal)
    cutoff: Tensor  # (natm, natm) smooth cosine cutoff of the distance (zero on the diagonal)
    ao_slot: Tensor  # (nao,) index into the padded layout atom * 5 + slot (1s, 2s, 2px, 2py, 2pz)


RBF_CENTERS = torch.linspace(0.5, 4.0, 8)  # Angstrom
CUTOFF = 4.5  # Angstrom
_SLOTS = {("1s", ""): 0, ("2s", ""): 1, ("2p", "x"): 2, ("2p", "y"): 3, ("2p", "z"): 4}


def _rbf(r: Tensor) -> Tensor:
    return torch.exp(-((r[..., None] - RBF_CENTERS) / 0.5) ** 2)


def features(mol: gto.Mole) -> Features:
    """Rotation-invariant descriptors (element one-hots, per-element radial environments, pair distances) and the
    bond unit vectors the equivariant blocks are built from. Minimal basis only (STO-3G: 1s, 2s, 2p shells)."""
    _mol(mol)
    bad = sorted({mol.atom_pure_symbol(i) for i in range(mol.natm)} - set(ELEMENTS))
    if bad:
        raise ValueError(f"mol must contain only the elements {ELEMENTS}, got {bad}")
    labels = mol.ao_labels(fmt=False)
    shells = sorted({(lab[2], lab[3]) for lab in labels} - set(_SLOTS))
    if shells:
        raise ValueError(f"mol must use a minimal basis (1s, 2s, 2p shells, e.g. sto-3g), got shells {shells}")
    xyz = torch.from_numpy(mol.atom_coords(unit="Angstrom"))
    diff = xyz[None, :] - xyz[:, None]  # (A, B, 3): B - A
    r = diff.norm(dim=-1)
    off = 1 - torch.eye(mol.natm, dtype=torch.float64)
    unit = diff / (r + torch.eye(mol.natm, dtype=torch.float64))[..., None]
    cutoff = 0.5 * (torch.cos(torch.pi * (r / CUTOFF).clamp(max=1)) + 1) * off
    Z = torch.tensor([ELEMENTS.index(mol.atom_pure_symbol(i)) for i in range(mol.natm)])
    onehot = torch.nn.functional.one_hot(Z, len(ELEMENTS)).double()
    rbf = _rbf(r) * off[..., None]
    env = torch.einsum("abk,be->aek", rbf, onehot).reshape(mol.natm, -1)  # per neighbour element
    ao_slot = torch.tensor([lab[0] * 5 + _SLOTS[(lab[2], lab[3])] for lab in labels])
    return Features(torch.cat([onehot, env], 1), rbf, unit, cutoff, ao_slot)


@dataclass
class Inputs:
    """What a guess model reads for one molecule: descriptors, integrals and the two priors."""

    f: Features
    ints: Integrals
    H_sap: Tensor  # Hamiltonian prior: H_core + V_SAP
    P_minao: Tensor  # density prior: PySCF's MINAO density

    def __post_init__(self) -> None:
        V.instance("f", self.f, Features)
        _ints(self.ints)
        if self.f.ao_slot.shape[0] != self.ints.n_ao:
            raise ValueError(f"f and ints must describe the same molecule: f has {self.f.ao_slot.shape[0]} AOs, "
                             f"ints has {self.ints.n_ao}")
        _matrix("H_sap", self.H_sap, self.ints)
        _matrix("P_minao", self.P_minao, self.ints)


def inputs(mol: gto.Mole, eri: bool | str = True, head: str | None = None) -> Inputs:
    """Features, integrals (``eri=False``: no four-index tensor) and the priors of ``mol``. ``head`` computes only
    the prior that head reads (the other is left as ``H_core`` or MINAO's density's shape-compatible zero), so
    timing a guess counts no work it does not need; ``None`` computes both."""
    _mol(mol)
    V.optional(V.one_of, "head", head, HEADS)
    ints = integrals(mol, eri=eri)
    H_sap = sap_hamiltonian(mol) if head in (None, "hamiltonian") else ints.H
    P_minao = torch.from_numpy(pyscf_guess(mol, "minao")) if head in (None, "density") else torch.zeros_like(ints.H)
    return Inputs(features(mol), ints, H_sap, P_minao)


HEADS = ("hamiltonian", "density")
N_PAIR_OUT = 13  # ss (2x2), sp (2), ps (2), pp sigma, pp pi, on-site s-p (2), on-site p anisotropy
N_ATOM_OUT = 4  # on-site shifts 1s, 2s, 2p and the 1s-2s coupling


class GuessModel(nn.Module):
    """A residual guess on a prior: ``H = H_SAP + dH`` (Hamiltonian head) or ``P = purify(P_MINAO + dP)`` (density).

    The correction ``dM`` is assembled from rotation-covariant blocks times scalars predicted from invariants:

    * between atoms A != B (``u`` the unit vector A->B): every s-s, s-p and p-s block of the overlap ``S`` times its
      own scalar, and the p-p block split into its sigma part ``u u^T S_pp u u^T`` and its pi part (the rest),
      each with its own scalar (a Hückel form with one scalar cannot tell sigma from pi bonds);
    * on atom A: shifts of the 1s, 2s and 2p levels, a 1s-2s coupling, s-p hybridization along
      ``sum_B w_AB u_AB`` and a p anisotropy ``sum_B w'_AB (u u^T - I/3)`` (smooth cutoff in ``r_AB``).

    Scalars for ordered pairs come from one MLP on ``(h_A, h_B, rbf(r_AB))``, on-site ones from an MLP on ``h_A``;
    ``dM`` is symmetrized. The last layers start at zero: an untrained model returns its prior.
    """

    def __init__(self, head: str = "hamiltonian", hidden: int = 32) -> None:
        head = V.one_of("head", head, HEADS)
        hidden = V.integer("hidden", hidden, min=1)
        super().__init__()
        self.head = head
        n_atom = len(ELEMENTS) * (1 + len(RBF_CENTERS))
        n_pair = 2 * n_atom + len(RBF_CENTERS)
        self.onsite = nn.Sequential(nn.Linear(n_atom, hidden), nn.SiLU(), nn.Linear(hidden, N_ATOM_OUT))
        self.coupling = nn.Sequential(nn.Linear(n_pair, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                      nn.Linear(hidden, N_PAIR_OUT))
        for last in (self.onsite[-1], self.coupling[-1]):
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)
        self.double()

    def correction(self, x: Inputs) -> Tensor:
        """The symmetric, rotation-covariant correction ``dM`` (n_ao x n_ao) added to the prior."""
        V.instance("x", x, Inputs)
        return _correction(self, x)

    def forward(self, x: Inputs) -> Tensor:
        """The predicted matrix: ``H_SAP + dH`` or (before purification) ``P_MINAO + dP``."""
        V.instance("x", x, Inputs)
        prior = x.H_sap if self.head == "hamiltonian" else x.P_minao
        return prior + _correction(self, x)

    def density(self, x: Inputs) -> Tensor:
        """The initial density ``P0``: aufbau of ``H`` (Hamiltonian head) or purification (density head)."""
        M = self(x)
        return _density(M, x.ints) if self.head == "hamiltonian" else _purify(M, x.ints)


def _correction(model: GuessModel, x: Inputs) -> Tensor:
    f, S = x.f, x.ints.S
    na = f.atom.shape[0]
    h = f.atom
    pair = torch.cat([h[:, None].expand(na, na, -1), h[None].expand(na, na, -1), f.pair_rbf], -1)
    c = model.coupling(pair)  # (A, B, 13): ordered pairs
    a = model.onsite(h)  # (A, 4)
    # the overlap in the padded layout (A, 5, B, 5); absent slots (H has 1s only) stay zero
    Sp = torch.zeros(na * 5, na * 5, dtype=S.dtype)
    Sp[f.ao_slot[:, None], f.ao_slot[None, :]] = S
    Sp = Sp.reshape(na, 5, na, 5)
    off = (1 - torch.eye(na, dtype=S.dtype))[:, None, :, None]
    u = f.unit
    M = torch.zeros(na, 5, na, 5, dtype=S.dtype)
    M[:, :2, :, :2] = c[..., 0:4].reshape(na, na, 2, 2).permute(0, 2, 1, 3) * Sp[:, :2, :, :2]
    M[:, :2, :, 2:] = c[..., 4:6].permute(0, 2, 1)[..., None] * Sp[:, :2, :, 2:]
    M[:, 2:, :, :2] = c[..., 6:8][:, None] * Sp[:, 2:, :, :2]
    Spp = Sp[:, 2:, :, 2:]
    s_sigma = torch.einsum("abi,aibj,abj->ab", u, Spp, u)
    sigma = torch.einsum("ab,abi,abj->aibj", s_sigma, u, u)  # u u^T S_pp u u^T
    M[:, 2:, :, 2:] = (c[..., 8] - c[..., 9])[:, None, :, None] * sigma + c[..., 9][:, None, :, None] * Spp
    M = M * off
    # on-site blocks
    w = c * f.cutoff[..., None]
    idx = torch.arange(na)
    diag = torch.stack([a[:, 0], a[:, 1], a[:, 2], a[:, 2], a[:, 2]], 1)  # (A, 5)
    onsite = torch.diag_embed(diag)
    onsite[:, 0, 1] = onsite[:, 1, 0] = a[:, 3]
    hyb = torch.einsum("abk,abi->aki", w[..., 10:12], u)  # (A, 2, 3)
    onsite[:, :2, 2:] = hyb
    onsite[:, 2:, :2] = hyb.transpose(1, 2)
    aniso = torch.einsum("ab,abi,abj->aij", w[..., 12], u, u) - w[..., 12].sum(1)[:, None, None] * torch.eye(
        3, dtype=S.dtype) / 3
    onsite[:, 2:, 2:] = onsite[:, 2:, 2:] + aniso
    M[idx, :, idx, :] = M[idx, :, idx, :] + onsite
    M = M.reshape(na * 5, na * 5)
    M = 0.5 * (M + M.T)
    return M[f.ao_slot[:, None], f.ao_slot[None, :]]


# --------------------------------------------------------------------------------------------------------------
# PySCF runs with counted Fock builds
# --------------------------------------------------------------------------------------------------------------
def dft_solver(mol: gto.Mole, xc: str = "pbe", grid_level: int = 1) -> scf.hf.RHF:
    """PySCF's restricted Kohn-Sham solver (``dft.RKS``) for ``mol`` with functional ``xc`` on an integration grid of
    PySCF level ``grid_level`` (0-9), default convergence settings: the paper's kind of solver, for counting Fock
    builds with :func:`run_pyscf` (an ``RKS`` is a PySCF ``RHF``; one ``get_veff`` call = one Kohn-Sham build)."""
    from pyscf import dft

    _mol(mol)
    V.instance("xc", xc, str)
    grid_level = V.integer("grid_level", grid_level, min=0, max=9)
    if mol.nelectron % 2:
        raise ValueError(f"mol must have an even number of electrons (closed-shell RKS), got {mol.nelectron}")
    mf = dft.RKS(mol)
    try:
        mf.xc = xc
        mf._numint.libxc.parse_xc(xc)
    except (KeyError, ValueError, RuntimeError) as e:
        raise ValueError(f"xc must be a functional PySCF knows, got {xc!r} ({e})") from None
    mf.grids.level = grid_level
    mf.verbose = 0
    return mf


def project_density(dm: np.ndarray, mol_from: gto.Mole, mol_to: gto.Mole) -> np.ndarray:
    """A density of ``mol_from`` (e.g. in STO-3G) carried into the basis of ``mol_to`` (e.g. 6-31G, same atoms):
    ``P' = T P T^T`` with ``T = S_to^{-1} S_(to,from)`` (PySCF's ``project_dm_nr2nr``). The electron count is kept
    only as far as the larger basis spans the smaller one's functions (STO-3G -> 6-31G: within ~2%)."""
    from pyscf.scf import addons

    V.instance("mol_from", mol_from, gto.Mole)
    V.instance("mol_to", mol_to, gto.Mole)
    dm = V.array("dm", dm, shape=(mol_from.nao, mol_from.nao), dtype="float").astype(np.float64)
    same = mol_from.natm == mol_to.natm and all(
        mol_from.atom_pure_symbol(i) == mol_to.atom_pure_symbol(i) for i in range(mol_from.natm)
    ) and np.allclose(mol_from.atom_coords(), mol_to.atom_coords(), atol=1e-8)
    if not same:
        raise ValueError("mol_to must hold the same atoms at the same positions as mol_from (only the basis differs)")
    return np.asarray(addons.project_dm_nr2nr(mol_from, dm, mol_to))


def pyscf_guess(mol: gto.Mole, kind: str) -> np.ndarray:
    """PySCF's own initial density: ``minao``, ``atom``, ``huckel``, ``sap`` or ``1e``."""
    _mol(mol)
    kind = V.one_of("kind", kind, ("minao", "atom", "huckel", "sap", "1e"))
    return np.asarray(scf.RHF(mol).get_init_guess(mol, key=kind))


@dataclass
class ScfRun:
    energy: float
    converged: bool
    fock_builds: int
    cycles: int
    seconds: float
    grad_norms: list[float]  # PySCF's |g| after each cycle (norm of 2 F_vo in the MO basis)
    energies: list[float]  # PySCF's total energy after each cycle


def run_pyscf(mf: scf.hf.RHF, dm0: np.ndarray | None, max_cycle: int = 100) -> ScfRun:
    """Run PySCF's RHF from ``dm0``, counting Fock builds (calls of ``get_veff``) and orbital-gradient norms.

    ``dm0=None`` lets PySCF build its own guess (``mf.init_guess``) inside ``kernel``.
    """
    if not isinstance(mf, scf.hf.RHF):
        raise TypeError(f"mf must be a pyscf RHF object, got {V.describe(mf)}")
    n = mf.mol.nao
    if dm0 is not None:
        dm0 = V.array("dm0", dm0, shape=(n, n), dtype="float")
    max_cycle = V.integer("max_cycle", max_cycle, min=0)
    count = [0]
    cls_veff = type(mf).get_veff
    norms: list[float] = []
    energies: list[float] = []

    def counted(*args, **kwargs):
        count[0] += 1
        return cls_veff(mf, *args, **kwargs)

    def callback(env):
        norms.append(float(env["norm_gorb"]) if "norm_gorb" in env else float("nan"))
        energies.append(float(env["e_tot"]) if "e_tot" in env else float("nan"))

    mf.get_veff = counted
    mf.max_cycle = max_cycle
    mf.callback = callback
    t0 = time.perf_counter()
    try:
        e = mf.kernel(dm0=dm0)
    finally:
        del mf.get_veff
        mf.callback = None
    return ScfRun(float(e), bool(mf.converged), count[0], int(mf.cycles), time.perf_counter() - t0, norms,
                  energies)


# --------------------------------------------------------------------------------------------------------------
# Data, the two objectives, training, and the statistics of ERIC / RIC
# --------------------------------------------------------------------------------------------------------------
def g2_split(max_heavy: int = 4, n_test: int = 12, seed: int = 0) -> tuple[list[str], list[str]]:
    """(training names, held-out names) of the G2 molecules with at most ``max_heavy`` heavy atoms."""
    names = list(g2_molecules(max_heavy))
    n_test = V.integer("n_test", n_test, min=0, max=len(names) - 1)
    seed = V.seed("seed", seed)
    np.random.default_rng([seed, 1]).shuffle(names)
    return names[n_test:], names[:n_test]


def perturbed(mol: gto.Mole, n: int, sigma: float, seed: int) -> list[gto.Mole]:
    """``mol`` followed by ``n`` copies with every coordinate displaced by N(0, sigma^2) Angstrom."""
    _mol(mol)
    n = V.integer("n", n, min=0)
    sigma = V.nonnegative("sigma", sigma)
    rng = np.random.default_rng(V.seed("seed", seed))
    sym = [mol.atom_symbol(i) for i in range(mol.natm)]
    xyz = mol.atom_coords(unit="Angstrom")
    return [mol] + [build_molecule(sym, xyz + rng.normal(0, sigma, xyz.shape), mol.basis) for _ in range(n)]


@dataclass
class Sample:
    """A training molecule: model inputs with the converged targets of ground-state supervision."""

    x: Inputs
    F_star: Tensor  # converged Fock matrix
    P_star: Tensor  # converged density


def sample(mol: gto.Mole, conv_tol: float = 1e-10, eri: bool | str = True) -> Sample:
    """Inputs (with ERIs, for the unrolled SCF; ``eri="jk"``: PySCF's J/K build instead of the four-index tensor)
    and PySCF's converged Fock matrix and density."""
    _mol(mol)
    conv_tol = V.positive("conv_tol", conv_tol)
    if eri not in (True, "jk"):
        raise ValueError(f"eri must be True or 'jk' (the unrolled SCF needs two-electron integrals), got {eri!r}")
    mf = scf.RHF(mol)
    mf.conv_tol = conv_tol
    mf.kernel()
    if not mf.converged:
        raise ValueError(f"mol: the reference RHF did not converge ({mol.atom})")
    return Sample(inputs(mol, eri=eri), torch.from_numpy(mf.get_fock()), torch.from_numpy(mf.make_rdm1()))


def target_error(model: GuessModel, s: Sample) -> Tensor:
    """Relative error on the surrogate's target: ``||H - F*|| / ||F*||`` or ``||P0 - P*|| / ||P*||``."""
    V.instance("model", model, GuessModel)
    V.instance("s", s, Sample)
    if model.head == "hamiltonian":
        return (model(s.x) - s.F_star).norm() / s.F_star.norm()
    return (model.density(s.x) - s.P_star).norm() / s.P_star.norm()


def surrogate_loss(model: GuessModel, batch: Sequence[Sample]) -> Tensor:
    """Ground-state supervision: mean squared entry error against the converged Fock matrix (Hamiltonian head) or
    the converged density (density head, after purification)."""
    total = 0.0
    for s in batch:
        if model.head == "hamiltonian":
            total = total + ((model(s.x) - s.F_star) ** 2).mean()
        else:
            total = total + ((model.density(s.x) - s.P_star) ** 2).mean()
    return total / len(batch)


def sail_loss(model: GuessModel, batch: Sequence[Sample], unroll: int = 6) -> Tensor:
    """SAIL, label-free: unroll ``unroll`` SCF cycles (DIIS as in PySCF) from the model's ``P0`` and sum the RMS
    orbital gradients along the trajectory, ``sum_t ||X^T (F_t P_t S - S P_t F_t) X|| / n``."""
    unroll = V.integer("unroll", unroll, min=1)
    total = 0.0
    for s in batch:
        trace = scf_unrolled(model.density(s.x), s.x.ints, unroll)
        total = total + torch.stack(trace.grad_norms).sum()
    return total / len(batch)


OBJECTIVES = ("surrogate", "sail")


FT_NAMES = ("sail_ft_0", "sail_ft_1", "sail_ft_2")
# continuations of each seed's sail_ft model: unrolled 12 cycles (sail_t12_<seed>) and, as the control
# for "more steps", the same steps at the same 6 cycles (sail_t6c_<seed>)
LONG_NAMES = tuple(f"sail_{k}_{s}" for k in ("t12", "t6c") for s in (0, 1, 2))
LONG_STEPS = 1500  # the same for every seed and both unrolls, sized from a timing probe alone


def checkpoint_config(name: str = "guesses") -> dict:
    """The config of a checkpoint of the chapter. ``guesses``: both heads trained with both objectives, three
    seeds, on G2 molecules. ``sail_ft_<seed>``: the Hamiltonian head of ``guesses``' surrogate of that seed,
    fine-tuned (ground-state supervision) on random RDKit molecules with at most 6 heavy atoms, then SAIL started
    from it on the same molecules, trained through PySCF's J/K build: ``steps_sail`` steps of warm-up and cosine
    decay to the schedule's floor (a tenth of ``lr_sail``), then ``steps_sail_tail`` more at that floor
    (:func:`sail_tail`). ``sail_t12_<seed>`` / ``sail_t6c_<seed>``: that seed's ``sail_ft`` model continued
    ``steps`` steps at the floor learning rate with 12 / 6 unrolled cycles (:func:`sail_continue`)."""
    if name == "guesses":
        return dict(max_heavy=4, n_test=12, split_seed=0, n_perturb=2, sigma=0.03, hidden=32, heads=list(HEADS),
                    objectives=list(OBJECTIVES), seeds=[0, 1, 2], steps_surrogate=600, steps_sail=600, batch=4,
                    unroll=6, lr_surrogate=1e-2, lr_sail=3e-3, warmup=20, basis="sto-3g")
    if name in FT_NAMES:
        return dict(n_mols=500, n_held=40, max_heavy=6, smiles_seed=0, embed_seed=0, hidden=32,
                    head="hamiltonian", seeds=[int(name[-1])], init="guesses", steps_surrogate=600,
                    steps_sail=4000, batch=4, unroll=6, lr_surrogate=1e-3, lr_sail=1e-3, warmup=100,
                    steps_sail_tail=4000, lr_sail_tail=1e-4, warmup_tail=100, basis="sto-3g")
    if name in LONG_NAMES:
        start = checkpoint_config(f"sail_ft_{name[-1]}")
        return dict(start=f"sail_ft_{name[-1]}", seeds=start["seeds"], head=start["head"],
                    hidden=start["hidden"], batch=start["batch"], unroll=12 if "_t12_" in name else 6,
                    steps=LONG_STEPS, lr=start["lr_sail_tail"], warmup=start["warmup_tail"],
                    step_offset=start["steps_sail"] + start["steps_sail_tail"], basis=start["basis"])
    raise ValueError(f"name must be 'guesses' or one of {FT_NAMES + LONG_NAMES}, got {name!r}")


def ft_molecules(cfg: dict) -> tuple[dict[str, gto.Mole], list[str], list[str]]:
    """The molecules of a ``sail_ft_*`` config: ``{smiles: molecule}`` (RDKit ETKDG + MMFF, seed
    ``embed_seed``), the training SMILES and the held-out ones (the first ``n_held`` of a seeded shuffle). None
    of them is one of the chapter's OOD molecules; SMILES RDKit cannot embed are skipped."""
    V.instance("cfg", cfg, dict)
    for key in ("n_mols", "n_held", "max_heavy", "smiles_seed", "embed_seed"):
        if key not in cfg:
            raise ValueError(f"cfg must have key {key!r}; got keys {sorted(cfg)}")
    smiles = random_smiles(cfg["n_mols"], cfg["max_heavy"], cfg["smiles_seed"], exclude=list(OOD_SMILES.values()))
    mols = {}
    for smi in smiles:
        try:
            mols[smi] = rdkit_molecule(smi, seed=cfg["embed_seed"])
        except ValueError:
            continue
    names = list(mols)
    np.random.default_rng([cfg["smiles_seed"], 2]).shuffle(names)
    return mols, names[cfg["n_held"]:], names[: cfg["n_held"]]


def training_samples(cfg: dict, progress: bool = False) -> tuple[list[Sample], list[str], list[str]]:
    """The training samples (G2 training molecules and their perturbed copies) and the split's names."""
    V.instance("cfg", cfg, dict)
    for key in ("max_heavy", "n_test", "split_seed", "n_perturb", "sigma"):
        if key not in cfg:
            raise ValueError(f"cfg must have key {key!r}; got keys {sorted(cfg)}")
    g2 = g2_molecules(cfg["max_heavy"])
    train_names, test_names = g2_split(cfg["max_heavy"], cfg["n_test"], cfg["split_seed"])
    if "n_train" in cfg:
        train_names = train_names[: cfg["n_train"]]
    mols = [m for i, n in enumerate(train_names)
            for m in perturbed(g2[n], cfg["n_perturb"], cfg["sigma"], cfg["split_seed"] * 1000 + i)]
    it = mols
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(mols, desc="training targets")
    return [sample(m) for m in it], train_names, test_names


def train_guess(head: str, objective: str, samples: Sequence[Sample], cfg: dict, seed: int,
                steps: int | None = None, progress: bool = True, init: GuessModel | None = None, *,
                lr: float | None = None, warmup: int | None = None, schedule: str = "cosine",
                step_offset: int = 0):
    """Train one :class:`GuessModel` (``head``) with ``objective`` (``surrogate`` or ``sail``) under ``seed``;
    returns ``(model, history)``. Batches of ``cfg['batch']`` samples, AdamW, warm-up, cosine decay. ``init``: start
    from a copy of this model's weights (same head and width) instead of the prior. ``lr``, ``warmup`` and
    ``schedule`` (``cosine`` or ``constant``) override the config's; ``step_offset`` shifts the batch draws (a
    continued run draws the batches of steps ``step_offset, step_offset + 1, ...``)."""
    from helpers import repro, train

    head = V.one_of("head", head, HEADS)
    objective = V.one_of("objective", objective, OBJECTIVES)
    samples = V.sequence("samples", samples, min_len=1, of=lambda n, x: V.instance(n, x, Sample))
    seed = V.seed("seed", seed)
    steps = V.integer("steps", cfg[f"steps_{objective}"] if steps is None else steps, min=0)
    lr = V.positive("lr", float(cfg[f"lr_{objective}"]) if lr is None else lr)
    warmup = V.integer("warmup", int(cfg["warmup"]) if warmup is None else warmup, min=0)
    schedule = V.one_of("schedule", schedule, ("cosine", "constant"))
    step_offset = V.integer("step_offset", step_offset, min=0)
    batch = min(int(cfg["batch"]), len(samples))

    def batches(step: int) -> list[Sample]:
        idx = np.random.default_rng([seed, 3, step + step_offset]).choice(len(samples), size=batch,
                                                                          replace=False)
        return [samples[i] for i in idx]

    def loss(model: GuessModel, b: list[Sample]) -> Tensor:
        return surrogate_loss(model, b) if objective == "surrogate" else sail_loss(model, b, int(cfg["unroll"]))

    V.optional(V.instance, "init", init, GuessModel)
    if init is not None and (init.head != head or init.onsite[0].out_features != int(cfg["hidden"])):
        raise ValueError(f"init must be a {head} model of width {cfg['hidden']}, got a {init.head} model of width "
                         f"{init.onsite[0].out_features}")
    with repro.seeded(seed):
        model = GuessModel(head, hidden=int(cfg["hidden"]))
        if init is not None:
            model.load_state_dict(init.state_dict())
        hist = train.fit(model, loss, batches, steps, lr=lr, warmup=min(warmup, steps), schedule=schedule,
                         seed=seed, progress=progress, desc=f"{head} / {objective} / seed {seed}")
    return model, hist


def sail_tail(model: GuessModel, samples: Sequence[Sample], cfg: dict, seed: int, progress: bool = True):
    """Continue a SAIL model of a ``sail_ft_*`` config past its cosine schedule: ``cfg['steps_sail_tail']``
    more steps at the schedule's floor, the constant ``cfg['lr_sail_tail']`` (fresh AdamW moments, a warm-up of
    ``cfg['warmup_tail']`` steps), drawing the batches of steps ``steps_sail, steps_sail + 1, ...``. The model's
    weights are first rounded to float32, as a checkpoint stores them, so continuing a stored checkpoint and
    continuing in the same process give the same model. Returns ``(model, history)``."""
    V.instance("model", model, GuessModel)
    V.instance("cfg", cfg, dict)
    for key in ("steps_sail", "steps_sail_tail", "lr_sail_tail", "warmup_tail"):
        if key not in cfg:
            raise ValueError(f"cfg must have key {key!r} (a sail_ft config); got keys {sorted(cfg)}")
    start = copy.deepcopy(model)
    with torch.no_grad():
        for p in start.parameters():
            p.copy_(p.float().double())
    return train_guess(model.head, "sail", samples, cfg, seed, steps=int(cfg["steps_sail_tail"]),
                       progress=progress, init=start, lr=float(cfg["lr_sail_tail"]),
                       warmup=int(cfg["warmup_tail"]), schedule="constant", step_offset=int(cfg["steps_sail"]))


def sail_continue(model: GuessModel, samples: Sequence[Sample], cfg: dict, seed: int, progress: bool = True):
    """Continue a stored SAIL model (config of a ``sail_t12_*`` / ``sail_t6c_*`` checkpoint) for ``cfg['steps']``
    steps at the constant ``cfg['lr']`` (fresh AdamW moments, ``cfg['warmup']`` warm-up steps) with
    ``cfg['unroll']`` unrolled SCF cycles in the loss, drawing the batches of steps ``step_offset, ...`` (both
    unrolls of a seed see the same batches). Weights are rounded to float32 first, as a checkpoint stores them.
    Returns ``(model, history)``."""
    V.instance("model", model, GuessModel)
    V.instance("cfg", cfg, dict)
    for key in ("unroll", "steps", "lr", "warmup", "step_offset", "batch", "hidden"):
        if key not in cfg:
            raise ValueError(f"cfg must have key {key!r} (a sail_t12 / sail_t6c config); got keys {sorted(cfg)}")
    start = copy.deepcopy(model)
    with torch.no_grad():
        for p in start.parameters():
            p.copy_(p.float().double())
    tcfg = dict(hidden=cfg["hidden"], batch=cfg["batch"], unroll=V.integer("unroll", cfg["unroll"], min=1),
                steps_sail=cfg["steps"], lr_sail=cfg["lr"], warmup=cfg["warmup"])
    return train_guess(model.head, "sail", samples, tcfg, seed, progress=progress, init=start,
                       schedule="constant", step_offset=int(cfg["step_offset"]))


def join_curves(first, second) -> dict[str, list[float]]:
    """Two training curves of consecutive runs as one, at most 500 points, binned by steps: each is a list of
    per-step values or a checkpoint manifest's curve ``{"step": [...], "value": [...]}`` (bin means at each
    bin's last step, steps from 1). Bins are spread back over their steps before the joined curve is binned
    again, so a mean over any window of whole bins is the mean over its steps."""
    from helpers import checkpoints

    parts = []
    for what, c in (("first", first), ("second", second)):
        if isinstance(c, dict):
            if not {"step", "value"} <= set(c):
                raise ValueError(f"{what} must be a list of values or a curve with 'step' and 'value', got "
                                 f"keys {sorted(c)}")
            st = np.asarray(c["step"], dtype=np.int64)
            val = np.asarray(c["value"], dtype=np.float64)
            if st.ndim != 1 or st.shape != val.shape or not len(st) or st[0] < 1 or np.any(np.diff(st) < 1):
                raise ValueError(f"{what}: 'step' must rise from >= 1 and match 'value' in length, got "
                                 f"{len(st)} steps for {len(val)} values")
            parts.append(np.repeat(val, np.diff(np.concatenate([[0], st]))))
        else:
            parts.append(V.array(what, c, ndim=1, dtype="float").astype(np.float64))
        if not len(parts[-1]) or not np.all(np.isfinite(parts[-1])):
            raise ValueError(f"{what} must be a non-empty curve of finite values")
    out = checkpoints.subsample(np.concatenate(parts))
    return {"step": out["step"], "value": out["value"]}


def ratio_of_sums(num: Sequence[float], den: Sequence[float]) -> float:
    """``sum(num) / sum(den)`` over paired per-molecule counts (ERIC or RIC over a set of molecules)."""
    num = V.array("num", num, ndim=1, dtype="float")
    den = V.array("den", den, shape=num.shape, dtype="float")
    if not (den.sum() > 0):
        raise ValueError(f"den must have a positive sum, got {den.sum()}")
    return float(num.sum() / den.sum())


def bootstrap_ratio(num: Sequence[float], den: Sequence[float], n_boot: int = 2000, seed: int = 0,
                    level: float = 0.9) -> tuple[float, float]:
    """A percentile bootstrap interval (resampling molecules, pairs kept together) of :func:`ratio_of_sums`."""
    num = V.array("num", num, ndim=1, dtype="float")
    den = V.array("den", den, shape=num.shape, dtype="float")
    n_boot = V.integer("n_boot", n_boot, min=1)
    level = V.probability("level", level)
    rng = np.random.default_rng(V.seed("seed", seed))
    idx = rng.integers(0, len(num), size=(n_boot, len(num)))
    r = num[idx].sum(1) / np.maximum(den[idx].sum(1), 1e-300)
    return float(np.quantile(r, (1 - level) / 2)), float(np.quantile(r, (1 + level) / 2))


# --------------------------------------------------------------------------------------------------------------
# A larger training set: random small closed-shell molecules, embedded by RDKit
# --------------------------------------------------------------------------------------------------------------
_VALENCE = {"C": 4, "N": 3, "O": 2, "F": 1}
_ELEMENT_P = {"C": 0.6, "N": 0.15, "O": 0.17, "F": 0.08}


def _aromatic_core(rng: np.random.Generator) -> tuple[list[str], dict[tuple[int, int], int]]:
    """A Kekulé 5- or 6-ring: benzene with some N, or a 5-ring with one O/N(H) and C=C-C=C (some C -> N)."""
    if rng.random() < 0.5:
        sym = ["N" if rng.random() < 0.2 else "C" for _ in range(6)]
        bonds = {(i, (i + 1) % 6): 2 if i % 2 == 0 else 1 for i in range(6)}
    else:
        sym = [str(rng.choice(["O", "N"])), "C", "C", "C", "C"]
        for i in (2, 3):
            if rng.random() < 0.25:
                sym[i] = "N"
        bonds = {(0, 1): 1, (1, 2): 2, (2, 3): 1, (3, 4): 2, (0, 4): 1}
    return sym, {tuple(sorted(k)): v for k, v in bonds.items()}


def _random_graph(rng: np.random.Generator, n_heavy: int) -> str | None:
    """One random heavy-atom graph as SMILES (an aromatic core or a tree with at most one ring closure, some double
    bonds), or None when the draw is not a valid molecule."""
    from rdkit import Chem

    el = list(_ELEMENT_P)
    sym: list[str] = []
    bonds: dict[tuple[int, int], int] = {}
    if n_heavy >= 5 and rng.random() < 0.3:
        sym, bonds = _aromatic_core(rng)
    n_core = len(sym)
    sym += [str(rng.choice(el, p=list(_ELEMENT_P.values()))) for _ in range(max(n_heavy - n_core, 0))]
    if "C" not in sym:
        sym[0] = "C"
    free = [_VALENCE[a] for a in sym]
    for (a, b), o in bonds.items():
        free[a] -= o
        free[b] -= o

    def hetero_pair(a: int, b: int) -> bool:  # no O-O, O-F, N-F, F-F (or O-N outside a ring)
        return (sym[a] in "OF" and sym[b] in "NOF") or (sym[b] in "OF" and sym[a] in "NOF")

    for i in range(max(n_core, 1), len(sym)):
        cand = [j for j in range(i) if free[j] > 0 and not hetero_pair(i, j)]
        if not cand or free[i] == 0:
            return None
        j = int(rng.choice(cand))
        bonds[(j, i)] = 1
        free[i] -= 1
        free[j] -= 1
    rw = Chem.RWMol()
    for a in sym:
        rw.AddAtom(Chem.Atom(a))
    for (a, b), o in bonds.items():
        rw.AddBond(a, b, Chem.BondType.DOUBLE if o == 2 else Chem.BondType.SINGLE)
    if n_core == 0 and len(sym) >= 5 and rng.random() < 0.4:  # one ring closure into a 5- or 6-ring
        dist = Chem.GetDistanceMatrix(rw)
        pairs = [(a, b) for a in range(len(sym)) for b in range(a + 1, len(sym))
                 if 4 <= dist[a, b] <= 5 and free[a] > 0 and free[b] > 0 and not hetero_pair(a, b)]
        if pairs:
            a, b = pairs[int(rng.integers(len(pairs)))]
            rw.AddBond(a, b, Chem.BondType.SINGLE)
            bonds[(a, b)] = 1
            free[a] -= 1
            free[b] -= 1
    for (a, b), o in list(bonds.items()):  # promote some single bonds to double where both atoms have room
        if o == 1 and free[a] > 0 and free[b] > 0 and rng.random() < 0.3 and not hetero_pair(a, b):
            rw.GetBondBetweenAtoms(a, b).SetBondType(Chem.BondType.DOUBLE)
            free[a] -= 1
            free[b] -= 1
    try:
        mol = rw.GetMol()
        Chem.SanitizeMol(mol)
    except Exception:  # noqa: BLE001 - RDKit raises several kinds for invalid graphs
        return None
    return Chem.MolToSmiles(mol)


def random_smiles(n: int, max_heavy: int = 6, seed: int = 0, min_heavy: int = 2,
                  exclude: Sequence[str] = ()) -> list[str]:
    """``n`` distinct canonical SMILES of random neutral closed-shell molecules of H, C, N, O, F with
    ``min_heavy``-``max_heavy`` heavy atoms (a Kekulé 5- or 6-ring with substituents in about a third of the
    draws with 5 or more heavy atoms, else a random tree with at most one 5- or 6-ring; some double bonds; no O-O,
    O-F, N-F or F-F bonds), none of them in ``exclude`` (compared as canonical SMILES); deterministic in ``seed``.
    Raises ``ValueError`` when ``n`` distinct molecules are not found in ``200 n`` draws."""
    n = V.integer("n", n, min=1)
    max_heavy = V.integer("max_heavy", max_heavy, min=1)
    min_heavy = V.integer("min_heavy", min_heavy, min=1, max=max_heavy)
    seed = V.seed("seed", seed)
    exclude = V.sequence("exclude", exclude, of=lambda k, x: V.instance(k, x, str))
    from rdkit import Chem

    banned = set()
    for smi in exclude:
        m = Chem.MolFromSmiles(smi)
        if m is None:
            raise ValueError(f"exclude must hold valid SMILES, got {smi!r}")
        banned.add(Chem.MolToSmiles(m))
    rng = np.random.default_rng([seed, 17])
    out: list[str] = []
    seen = set(banned)
    for _ in range(200 * n):
        smi = _random_graph(rng, int(rng.integers(min_heavy, max_heavy + 1)))
        if smi is None or smi in seen:
            continue
        seen.add(smi)
        out.append(smi)
        if len(out) == n:
            return out
    raise ValueError(f"n={n}: only {len(out)} distinct molecules with {min_heavy}-{max_heavy} heavy atoms found")
