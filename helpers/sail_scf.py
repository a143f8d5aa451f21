"""SAIL: learning SCF initial guesses by differentiating through the solver (chapter 17_sail_scf).

The pieces, at RHF level (the paper uses Kohn-Sham DFT):

* :func:`build_molecule` / :func:`g2_molecules` / :func:`rdkit_molecule`: PySCF molecules from ASE's G2 set and
  from RDKit-embedded SMILES (ETKDG, fixed seed). :class:`Integrals`: S, H_core, ERIs and X = S^{-1/2} in torch.
* :func:`occupied_projector`: the aufbau density of a symmetric matrix with a **stable backward**: the derivative
  only couples occupied with virtual orbitals (``1 / (eps_i - eps_a)``), so degenerate levels inside the occupied
  or the virtual block do not blow up the gradient.
* :func:`scf_unrolled`: a differentiable RHF SCF (Fock build, Löwdin orthogonalization, DIIS, aufbau) returning the
  trajectory of densities, energies and orbital-gradient norms ``||X^T (F P S - S P F) X||``.
* :class:`HuckelGuess`: a Hamiltonian guess model, rotation-equivariant by construction: on-site shell energies
  and overlap-scaled pair couplings, both predicted from invariant environment descriptors.
* :func:`run_pyscf`: PySCF's RHF from a given initial density, counting every Fock build (``get_veff`` call);
  ERIC = builds with the guess (+ any hidden build the guess needs) / builds with PySCF's MINAO guess.
"""

from __future__ import annotations

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
    "ScfTrace", "HuckelGuess", "Features", "features", "pyscf_guess", "run_pyscf", "ScfRun", "rotate",
]

ELEMENTS = ("H", "C", "N", "O", "F")
SHELLS = ("1s", "2s", "2p")
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

    def __post_init__(self) -> None:
        V.tensor("S", self.S, ndim=2, dtype="float", nonempty=True)
        n = self.S.shape[0]
        for name in ("S", "H", "X"):
            V.tensor(name, getattr(self, name), shape=(n, n), dtype="float")
        if V.tensor("eri", self.eri, dtype="float").numel():  # eri=False keeps an empty tensor
            V.tensor("eri", self.eri, shape=(n, n, n, n), dtype="float")
        self.n_occ = V.integer("n_occ", self.n_occ, min=1, max=max(n - 1, 1))
        self.e_nuc = V.number("e_nuc", self.e_nuc)

    @property
    def n_ao(self) -> int:
        return self.S.shape[0]


def integrals(mol: gto.Mole, eri: bool = True) -> Integrals:
    """PySCF's one- and two-electron integrals as float64 torch tensors (``eri=False``: skip the 4-index tensor,
    enough for making a guess)."""
    _mol(mol)
    V.boolean("eri", eri)
    if mol.nelectron % 2:
        raise ValueError(f"RHF needs an even number of electrons, got {mol.nelectron}")
    S = torch.from_numpy(mol.intor("int1e_ovlp"))
    H = torch.from_numpy(mol.intor("int1e_kin") + mol.intor("int1e_nuc"))
    if eri:
        eri = torch.from_numpy(ao2mo.restore(1, mol.intor("int2e", aosym="s8"), mol.nao))
    else:
        eri = torch.zeros((0,) * 4, dtype=torch.float64)
    w, U = torch.linalg.eigh(S)
    X = U @ torch.diag(w.rsqrt()) @ U.T
    return Integrals(S, H, eri, X, mol.nelectron // 2, float(mol.energy_nuc()))


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
    if ints.eri.numel() == 0:
        raise ValueError("ints must carry the two-electron integrals (built with integrals(mol, eri=True))")
    return _fock(P, ints)


def _fock(P: Tensor, ints: Integrals) -> Tensor:
    J = torch.einsum("ijkl,kl->ij", ints.eri, P)
    K = torch.einsum("ikjl,kl->ij", ints.eri, P)
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


def scf_unrolled(P0: Tensor, ints: Integrals, n_cycles: int, diis: int = 8, tol: float | None = None) -> ScfTrace:
    """Run ``n_cycles`` RHF cycles from ``P0`` with DIIS; every step stays in autograd.

    Cycle ``t`` builds ``F(P_t)``, records ``E_t`` and ``g_t = RMS(X^T (F P S - S P F) X)``, extrapolates the Fock
    matrix from the last ``diis`` cycles (Pulay: minimize ``|sum c_i e_i|`` with ``sum c_i = 1``) and occupies its
    lowest orbitals. ``tol`` stops early once ``g_t < tol`` (for converged reference runs).
    """
    _matrix("P0", P0, _ints(ints))
    if ints.eri.numel() == 0:
        raise ValueError("ints must carry the two-electron integrals (built with integrals(mol, eri=True))")
    n_cycles = V.integer("n_cycles", n_cycles, min=1)
    diis = V.integer("diis", diis, min=1)
    tol = V.optional(V.positive, "tol", tol)
    n = ints.n_ao
    P = P0
    Fs: list[Tensor] = []
    errs: list[Tensor] = []
    energies, norms = [], []
    F = None
    for _ in range(n_cycles):
        F = _fock(P, ints)
        g = _orbital_gradient(F, P, ints)
        energies.append(_energy(P, F, ints))
        norms.append(torch.sqrt(torch.sum(g * g) / n**2 + 1e-20))  # + tiny: finite gradient when g == 0 exactly
        if tol is not None and norms[-1].item() < tol:
            break
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
# The guess model: Hückel-like, equivariant by construction
# --------------------------------------------------------------------------------------------------------------
@dataclass
class Features:
    """Invariant descriptors of one molecule and the AO bookkeeping the model needs."""

    atom: Tensor  # (natm, F_atom) element one-hot + per-element radial environment
    pair_rbf: Tensor  # (natm, natm, n_rbf) radial basis of interatomic distances
    ao_atom: Tensor  # (nao,) atom of each AO
    ao_shell: Tensor  # (nao,) 0 = 1s, 1 = 2s, 2 = 2p
    pair_kind: Tensor  # (nao, nao) index of the unordered shell pair


RBF_CENTERS = torch.linspace(0.5, 4.0, 8)  # Angstrom


def _rbf(r: Tensor) -> Tensor:
    return torch.exp(-((r[..., None] - RBF_CENTERS) / 0.5) ** 2)


def features(mol: gto.Mole) -> Features:
    """Rotation-invariant features: element one-hots, per-element radial environments, pair distances."""
    _mol(mol)
    bad = sorted({mol.atom_pure_symbol(i) for i in range(mol.natm)} - set(ELEMENTS))
    if bad:
        raise ValueError(f"mol must contain only the elements {ELEMENTS}, got {bad}")
    xyz = torch.from_numpy(mol.atom_coords(unit="Angstrom"))
    r = torch.cdist(xyz, xyz)
    Z = torch.tensor([ELEMENTS.index(mol.atom_pure_symbol(i)) for i in range(mol.natm)])
    onehot = torch.nn.functional.one_hot(Z, len(ELEMENTS)).double()
    rbf = _rbf(r) * (1 - torch.eye(mol.natm, dtype=torch.float64))[..., None]  # (natm, natm, n_rbf)
    env = torch.einsum("abk,be->aek", rbf, onehot).reshape(mol.natm, -1)  # per neighbour element
    labels = mol.ao_labels(fmt=False)
    ao_atom = torch.tensor([lab[0] for lab in labels])
    ao_shell = torch.tensor([SHELLS.index(lab[2]) for lab in labels])
    a, b = torch.meshgrid(ao_shell, ao_shell, indexing="ij")
    lo, hi = torch.minimum(a, b), torch.maximum(a, b)
    pair_kind = torch.tensor([[_SHELL_PAIRS[(int(x), int(y))] for x, y in zip(rl, rh)] for rl, rh in zip(lo, hi)])
    return Features(torch.cat([onehot, env], 1), rbf, ao_atom, ao_shell, pair_kind)


class HuckelGuess(nn.Module):
    """``H_pred = H_core + diag(a_mu) + b_mu_nu * S_mu_nu`` (mu != nu), Hückel-like and equivariant.

    ``a_mu`` (per atom and shell) and ``b_mu_nu`` (per atom pair and shell pair) are scalars predicted from
    invariant descriptors, so ``H_pred`` rotates with the atomic orbitals exactly like ``S`` and ``H_core``. The
    last layers start at zero: an untrained model is the core-Hamiltonian ("1e") guess.
    """

    def __init__(self, hidden: int = 32) -> None:
        hidden = V.integer("hidden", hidden, min=1)
        super().__init__()
        n_atom = len(ELEMENTS) * (1 + len(RBF_CENTERS))
        n_pair = 2 * n_atom + len(RBF_CENTERS)
        self.onsite = nn.Sequential(nn.Linear(n_atom, hidden), nn.SiLU(), nn.Linear(hidden, len(SHELLS)))
        self.coupling = nn.Sequential(nn.Linear(n_pair, hidden), nn.SiLU(), nn.Linear(hidden, len(_SHELL_PAIRS)))
        for head in (self.onsite[-1], self.coupling[-1]):
            nn.init.zeros_(head.weight)
            nn.init.zeros_(head.bias)
        self.double()

    def forward(self, f: Features, ints: Integrals) -> Tensor:
        V.instance("f", f, Features)
        _ints(ints)
        if f.ao_atom.shape[0] != ints.n_ao:
            raise ValueError(f"f and ints must describe the same molecule: f has {f.ao_atom.shape[0]} AOs, "
                             f"ints has {ints.n_ao}")
        a = self.onsite(f.atom)  # (natm, 3)
        na = f.atom.shape[0]
        ai, bj = f.atom[:, None].expand(na, na, -1), f.atom[None].expand(na, na, -1)
        pair = torch.cat([ai + bj, ai * bj, f.pair_rbf], -1)  # symmetric in the two atoms
        b = self.coupling(pair)  # (natm, natm, 6)
        diag = a[f.ao_atom, f.ao_shell]
        B = b[f.ao_atom[:, None], f.ao_atom[None, :], f.pair_kind]
        off = B * ints.S * (1 - torch.eye(ints.n_ao, dtype=B.dtype))
        return ints.H + torch.diag(diag) + off

    def density(self, f: Features, ints: Integrals) -> Tensor:
        """The aufbau density of the predicted Hamiltonian."""
        return _density(self(f, ints), ints)


# --------------------------------------------------------------------------------------------------------------
# PySCF runs with counted Fock builds
# --------------------------------------------------------------------------------------------------------------
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
    grad_norms: list[float]


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

    def counted(*args, **kwargs):
        count[0] += 1
        return cls_veff(mf, *args, **kwargs)

    def callback(env):
        norms.append(float(env["norm_gorb"]) if "norm_gorb" in env else float("nan"))

    mf.get_veff = counted
    mf.max_cycle = max_cycle
    mf.callback = callback
    t0 = time.perf_counter()
    try:
        e = mf.kernel(dm0=dm0)
    finally:
        del mf.get_veff
        mf.callback = None
    return ScfRun(float(e), bool(mf.converged), count[0], int(mf.cycles), time.perf_counter() - t0, norms)
