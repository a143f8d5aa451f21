"""An explainability vector moved across image domains by task arithmetic (chapter ``15_explainability_vector``).

* Synthetic image domains with ground-truth relevance: objects (sklearn digits, ``skimage.draw`` shapes, letters from
  Pillow's built-in font) on textures (scikit-image's bundled brick/grass/gravel or procedural noise), with the
  object mask pooled per patch (:func:`make_domain`).
* :class:`TinyViT` -- a small ViT with a CLIP-style head: logits are scaled cosines between a projection of the CLS
  token and *frozen* class-name embeddings; the same projection applied to each patch token is the patch-level
  explanation (the self-explaining model, one inference).
* Task arithmetic on state dicts (:func:`task_vector`, :func:`add_vector`, :func:`flat`).
* Explanation metrics (:func:`patch_auroc`, :func:`pointing_game`, :func:`deletion_insertion`) and Kernel SHAP over
  patches (:func:`kernel_shap`) as the many-inference reference; :func:`linear_cka`, :func:`spearman_perm`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from helpers import nn as hnn
from helpers import validate as V

__all__ = [
    "IMG", "PATCH", "CLASS_NAMES", "Domain", "make_domain", "TinyViT", "class_embeddings", "explanation_loss",
    "task_vector", "add_vector", "flat", "patch_auroc", "pointing_game", "deletion_insertion", "kernel_shap",
    "linear_cka", "spearman_perm", "map_entropy",
]

IMG, PATCH = 24, 4
N_PATCH = (IMG // PATCH) ** 2
DIGITS = [str(i) for i in range(10)]
SHAPES = ["circle", "square", "triangle", "cross"]
LETTERS = ["A", "E", "H", "K", "T"]
TEXTURES = ["brick", "grass", "gravel", "noise"]
CLASS_NAMES = DIGITS + SHAPES + LETTERS + [f"texture:{t}" for t in TEXTURES]


# ----------------------------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------------------------
def _texture_bank() -> dict[str, np.ndarray]:
    import skimage.data

    bank = {}
    for name in ("brick", "grass", "gravel"):
        try:
            bank[name] = getattr(skimage.data, name)().astype(np.float32) / 255.0
        except Exception:  # pragma: no cover - a stripped scikit-image: fall back to noise
            bank[name] = np.random.default_rng(len(name)).random((512, 512)).astype(np.float32)
    return bank


_BANK: dict[str, np.ndarray] | None = None
_DIGITS: tuple[np.ndarray, np.ndarray] | None = None


def _texture(name: str, rng: np.random.Generator) -> np.ndarray:
    global _BANK
    if name == "noise":
        from scipy.ndimage import gaussian_filter

        return np.clip(0.5 + 0.6 * gaussian_filter(rng.normal(size=(IMG, IMG)), 1.2), 0, 1).astype(np.float32)
    if _BANK is None:
        _BANK = _texture_bank()
    t = _BANK[name]
    s = int(rng.integers(0, t.shape[0] // 2))  # a 2x-downsampled random crop
    c = t[s:s + 2 * IMG:2, s:s + 2 * IMG:2] if s + 2 * IMG <= t.shape[0] else t[:2 * IMG:2, :2 * IMG:2]
    return (0.25 + 0.5 * (c - c.min()) / (np.ptp(c) + 1e-6)).astype(np.float32)


def _object(kind: str, label: str, size: int, rng: np.random.Generator) -> np.ndarray:
    """An object's alpha mask in [0, 1] of shape (size, size)."""
    global _DIGITS
    from skimage.transform import resize

    if kind == "digit":
        if _DIGITS is None:
            from sklearn.datasets import load_digits

            d = load_digits()
            _DIGITS = (d.images / 16.0, d.target)
        imgs, tg = _DIGITS
        idx = rng.choice(np.nonzero(tg == int(label))[0])
        return np.clip(resize(imgs[idx], (size, size), order=1, anti_aliasing=False) * 1.3, 0, 1)
    if kind == "shape":
        from skimage import draw

        m = np.zeros((size, size), np.float32)
        r = size / 2 - 0.5
        if label == "circle":
            rr, cc = draw.disk((r, r), r * 0.95, shape=m.shape)
        elif label == "square":
            rr, cc = draw.rectangle((1, 1), (size - 2, size - 2), shape=m.shape)
        elif label == "triangle":
            rr, cc = draw.polygon([size - 1, size - 1, 0], [0, size - 1, size // 2], shape=m.shape)
        else:  # cross
            w = max(1, size // 4)
            m[size // 2 - w // 2:size // 2 - w // 2 + w, :] = 1
            m[:, size // 2 - w // 2:size // 2 - w // 2 + w] = 1
            return m
        m[rr, cc] = 1
        return m
    if kind == "letter":
        from PIL import Image, ImageDraw, ImageFont

        im = Image.new("L", (16, 16))
        ImageDraw.Draw(im).text((4, 1), label, fill=255, font=ImageFont.load_default())
        a = np.asarray(im, dtype=np.float32) / 255.0
        ys, xs = np.nonzero(a > 0.2)
        a = a[ys.min():ys.max() + 1, xs.min():xs.max() + 1]
        return np.clip(resize(a, (size, size), order=1) * 1.5, 0, 1)
    raise ValueError(f"unknown object kind {kind!r}")


@dataclass
class Domain:
    """A labelled image domain: images (n, 3, IMG, IMG), labels (n,) indexing ``classes`` (global class ids),
    ``mask`` (n, N_PATCH) patch relevance in [0, 1] (the fraction of the patch covered by what decides the label)."""

    name: str
    images: Tensor
    labels: Tensor
    mask: Tensor
    classes: list[int]

    def __post_init__(self) -> None:
        V.instance("name", self.name, str)
        V.tensor("images", self.images, dtype="float")
        n = len(self.images)
        if tuple(self.images.shape[1:]) != (3, IMG, IMG):
            raise ValueError(f"images must have shape (n, 3, {IMG}, {IMG}), got {tuple(self.images.shape)}")
        self.classes = V.sequence("classes", self.classes, min_len=1,
                                  of=lambda k, c: V.index(k, c, len(CLASS_NAMES)))
        V.tensor("labels", self.labels, shape=(n,), dtype="int", min=0, max=len(self.classes) - 1)
        V.tensor("mask", self.mask, shape=(n, N_PATCH), dtype="float", min=0, max=1)

    def __len__(self) -> int:
        return len(self.labels)


DOMAINS = {
    # name: (object kind, label names, textures, options)
    "pretrain": ("mixed", DIGITS + SHAPES + LETTERS, ["noise", "brick", "grass", "gravel"], {}),
    "source": ("mixed", DIGITS[:5] + SHAPES[:2] + LETTERS[:3], ["brick", "gravel"], {}),
    "digits 5-9": ("digit", DIGITS[5:], ["grass"], {}),
    "inverted": ("digit", DIGITS[:5], ["gravel"], {"invert": True}),
    "rotated": ("digit", DIGITS[:5], ["brick"], {"rotate": True}),
    "small digits": ("digit", DIGITS, ["noise"], {"size": (8, 10)}),
    "shapes": ("shape", SHAPES, ["grass"], {}),
    "cluttered": ("digit", DIGITS[:5], ["brick"], {"distractor": True}),
    "coloured": ("digit", DIGITS[5:], ["gravel"], {"colour": True}),
    "letters": ("letter", LETTERS, ["grass", "noise"], {}),
    "background label": ("digit", TEXTURES[:3], ["brick", "grass", "gravel"], {"label_is_texture": True}),
}


def make_domain(name: str, n: int, seed: int) -> Domain:
    """``n`` images of domain ``name`` (see ``DOMAINS``), deterministic for a seed."""
    V.instance("name", name, str)
    if name not in DOMAINS:
        raise ValueError(f"name: unknown domain {name!r}; expected one of {sorted(DOMAINS)}")
    n, seed = V.integer("n", n, min=1), V.seed("seed", seed)
    kind, names, textures, opt = DOMAINS[name]
    rng = np.random.default_rng([seed, sum(map(ord, name))])
    imgs = np.zeros((n, 3, IMG, IMG), np.float32)
    masks = np.zeros((n, IMG, IMG), np.float32)
    labels = np.zeros(n, np.int64)
    for i in range(n):
        y = int(rng.integers(len(names)))
        labels[i] = y
        tex_name = names[y].split(":")[-1] if opt.get("label_is_texture") else textures[rng.integers(len(textures))]
        bg = _texture(tex_name, rng)
        if opt.get("label_is_texture"):
            obj_kind, obj_label = "digit", str(rng.integers(10))
        elif kind == "mixed":
            lab = names[y]
            obj_kind = "digit" if lab in DIGITS else "shape" if lab in SHAPES else "letter"
            obj_label = lab
        else:
            obj_kind, obj_label = kind, names[y]
        lo, hi = opt.get("size", (11, 15))
        size = int(rng.integers(lo, hi + 1))
        a = _object(obj_kind, obj_label, size, rng)
        if opt.get("rotate"):
            a = np.rot90(a, int(rng.integers(1, 4))).copy()
        r, c = rng.integers(0, IMG - size + 1, 2)
        alpha = np.zeros((IMG, IMG), np.float32)
        alpha[r:r + size, c:c + size] = a
        ink = 0.0 if opt.get("invert") else 1.0
        colour = rng.uniform(0.3, 1.0, 3) if opt.get("colour") else np.full(3, ink)
        img = bg[None] * (1 - alpha[None]) + colour[:, None, None] * alpha[None]
        if opt.get("distractor"):  # a shape elsewhere, irrelevant to the label
            s2 = 8
            d = _object("shape", SHAPES[rng.integers(4)], s2, rng)
            r2, c2 = rng.integers(0, IMG - s2 + 1, 2)
            dal = np.zeros((IMG, IMG), np.float32)
            dal[r2:r2 + s2, c2:c2 + s2] = d * (alpha[r2:r2 + s2, c2:c2 + s2] < 0.1)
            img = img * (1 - dal[None]) + 0.8 * dal[None]
        imgs[i] = img
        masks[i] = 1.0 - (alpha > 0.3) if opt.get("label_is_texture") else (alpha > 0.3)
    pooled = torch.as_tensor(masks).view(n, IMG // PATCH, PATCH, IMG // PATCH, PATCH).mean((2, 4)).reshape(n, -1)
    return Domain(name, torch.as_tensor(imgs), torch.as_tensor(labels), pooled,
                  [CLASS_NAMES.index(nm if nm in CLASS_NAMES else f"texture:{nm}") for nm in names])


# ----------------------------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------------------------
def class_embeddings(dim: int, seed: int = 1234) -> Tensor:
    """Frozen unit "class-name" embeddings for all of ``CLASS_NAMES`` (a stand-in for a VLM's text tower)."""
    dim, seed = V.integer("dim", dim, min=1), V.seed("seed", seed)
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(len(CLASS_NAMES), dim, generator=g), dim=-1)


def _images(x: object, name: str = "x") -> Tensor:
    V.tensor(name, x, ndim=4, dtype="float")
    if tuple(x.shape[1:]) != (3, IMG, IMG):
        raise ValueError(f"{name} must be (B, 3, {IMG}, {IMG}), got {tuple(x.shape)}")
    return x


class TinyViT(nn.Module):
    """ViT (patch 4, learned positions, CLS token, ``helpers.nn.Block`` with full attention) and a CLIP-style head.

    ``forward(x, classes)`` returns ``(logits, patch_scores)``: ``logits[b, c] = s * cos(W h_cls, t_c)`` and
    ``patch_scores[b, j, c] = cos(W h_j, t_c)`` for the given global class ids: one inference, both outputs.
    """

    def __init__(self, d_model: int = 64, depth: int = 3, n_head: int = 4, emb_dim: int = 32, scale: float = 10.0):
        for name, v in dict(d_model=d_model, depth=depth, n_head=n_head, emb_dim=emb_dim).items():
            V.integer(name, v, min=1)
        scale = V.positive("scale", scale)
        super().__init__()
        cfg = hnn.TransformerConfig(vocab_size=1, n_layer=depth, n_head=n_head, d_model=d_model, pos="none")
        self.patch = nn.Linear(3 * PATCH * PATCH, d_model)
        self.cls = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos = nn.Parameter(0.02 * torch.randn(1, N_PATCH + 1, d_model))
        self.blocks = nn.ModuleList([hnn.Block(cfg) for _ in range(depth)])
        self.ln = nn.LayerNorm(d_model)
        self.proj = nn.Linear(d_model, emb_dim, bias=False)
        self.register_buffer("text", class_embeddings(emb_dim))  # frozen: not a parameter, never moved
        self.scale = scale
        self._mask = torch.ones(N_PATCH + 1, N_PATCH + 1, dtype=torch.bool)

    def tokens(self, x: Tensor) -> Tensor:
        """Final hidden states (B, 1 + N_PATCH, d_model) of images (B, 3, IMG, IMG): CLS first."""
        _images(x)
        B = x.shape[0]
        p = x.unfold(2, PATCH, PATCH).unfold(3, PATCH, PATCH)  # (B, 3, 6, 6, 4, 4)
        p = p.permute(0, 2, 3, 1, 4, 5).reshape(B, N_PATCH, -1)
        h = torch.cat([self.cls.expand(B, -1, -1), self.patch(p)], 1) + self.pos
        for blk in self.blocks:
            h = blk(h, self._mask)
        return self.ln(h)

    def forward(self, x: Tensor, classes: Sequence[int]) -> tuple[Tensor, Tensor]:
        _images(x)
        if isinstance(classes, Tensor):
            classes = classes.tolist()
        classes = V.sequence("classes", classes, min_len=1, of=lambda k, c: V.index(k, c, len(CLASS_NAMES)))
        z = F.normalize(self.proj(self.tokens(x)), dim=-1)
        t = self.text[list(classes)]
        sims = z @ t.T  # (B, 1 + P, C)
        return self.scale * sims[:, 0], sims[:, 1:]


def explanation_loss(patch_scores: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    """MSE between the per-image standardized explanation for the true class and the standardized mask."""
    V.tensor("patch_scores", patch_scores, ndim=3, dtype="float", finite=False)  # the model's output (hot path)
    B, P, C = patch_scores.shape
    V.tensor("labels", labels, shape=(B,), dtype="int", min=0, max=C - 1)
    V.tensor("mask", mask, shape=(B, P), dtype="float")
    e = patch_scores[torch.arange(len(labels)), :, labels]  # (B, P)

    def z(v):
        return (v - v.mean(1, keepdim=True)) / (v.std(1, keepdim=True) + 1e-6)

    return F.mse_loss(z(e), z(mask))


# ----------------------------------------------------------------------------------------------------------------
# Task arithmetic
# ----------------------------------------------------------------------------------------------------------------
def _state(name: str, sd: object) -> Mapping[str, Tensor]:
    """A state dict: a mapping of str -> tensor (floating entries finite)."""
    if not isinstance(sd, Mapping):
        raise TypeError(f"{name} must be a state dict (a mapping of name -> tensor), got {V.describe(sd)}")
    for k, v in sd.items():
        if not isinstance(v, Tensor):
            raise TypeError(f"{name}[{k!r}] must be a tensor, got {V.describe(v)}")
        if v.is_floating_point() and not bool(torch.isfinite(v).all()):
            raise ValueError(f"{name}[{k!r}] must be finite, got NaN/inf entries")
    return sd


def _check_pair(a: Mapping[str, Tensor], b: Mapping[str, Tensor]) -> None:
    _state("finetuned", a)
    _state("base", b)
    if set(a) != set(b):
        raise ValueError(f"finetuned and base have different keys: {sorted(set(a) ^ set(b))[:5]}")
    for k in a:
        if a[k].shape != b[k].shape:
            raise ValueError(f"finetuned and base: parameter {k!r} shapes {tuple(a[k].shape)} and "
                             f"{tuple(b[k].shape)} differ")


def task_vector(finetuned: Mapping[str, Tensor], base: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """tau = theta_ft - theta_base, for floating-point entries."""
    _check_pair(finetuned, base)
    return {k: finetuned[k] - base[k] for k in base if base[k].is_floating_point()}


def add_vector(base: Mapping[str, Tensor], tau: Mapping[str, Tensor], lam: float) -> dict[str, Tensor]:
    """theta = theta_base + lam * tau (entries without a task vector are copied)."""
    _state("base", base)
    _state("tau", tau)
    lam = V.number("lam", lam)
    missing = set(tau) - set(base)
    if missing:
        raise ValueError(f"tau has keys the base model lacks: {sorted(missing)[:5]}")
    for k in tau:
        if tau[k].shape != base[k].shape:
            raise ValueError(f"tau[{k!r}] has shape {tuple(tau[k].shape)}, base has {tuple(base[k].shape)}")
    return {k: (base[k] + lam * tau[k]) if k in tau else base[k].clone() for k in base}


def flat(tau: Mapping[str, Tensor]) -> Tensor:
    """All entries of a task vector as one vector (sorted by name)."""
    if not _state("tau", tau):
        raise ValueError("tau must hold at least one entry")
    return torch.cat([tau[k].reshape(-1).float() for k in sorted(tau)])


# ----------------------------------------------------------------------------------------------------------------
# Explanation metrics
# ----------------------------------------------------------------------------------------------------------------
def _check_maps(maps: Tensor, mask: Tensor, thresh: float) -> None:
    V.tensor("maps", maps, ndim=2, dtype="float", nonempty=True)
    V.tensor("mask", mask, dtype="float")
    if maps.shape != mask.shape:
        raise ValueError(f"maps and mask must both be (n, patches), got {tuple(maps.shape)} and {tuple(mask.shape)}")
    V.number("thresh", thresh)


def patch_auroc(maps: Tensor, mask: Tensor, thresh: float = 0.25) -> float:
    """Mean over images of the AUROC of patch scores against the binarized relevance mask (images with both
    relevant and irrelevant patches only)."""
    from sklearn.metrics import roc_auc_score

    _check_maps(maps, mask, thresh)
    pos = (mask > thresh).numpy()
    m = maps.detach().numpy()
    vals = [roc_auc_score(p, s) for p, s in zip(pos, m) if 0 < p.sum() < len(p)]
    if not vals:
        raise ValueError("no image has both relevant and irrelevant patches")
    return float(np.mean(vals))


def pointing_game(maps: Tensor, mask: Tensor, thresh: float = 0.25) -> float:
    """Fraction of images whose highest-scoring patch is relevant."""
    _check_maps(maps, mask, thresh)
    top = maps.argmax(1)
    return float((mask[torch.arange(len(mask)), top] > thresh).float().mean())


def _patch_keep(x: Tensor, keep: Tensor, fill: Tensor) -> Tensor:
    """Images with patches where ``keep`` (n, P) is False replaced by ``fill`` (n, 3, 1, 1)."""
    n = x.shape[0]
    g = IMG // PATCH
    k = keep.view(n, 1, g, 1, g, 1).expand(n, 1, g, PATCH, g, PATCH).reshape(n, 1, IMG, IMG).to(x.dtype)
    return x * k + fill * (1 - k)


@torch.no_grad()
def deletion_insertion(prob_fn: Callable[[Tensor], Tensor], x: Tensor, maps: Tensor, steps: int = 9
                       ) -> tuple[float, float]:
    """Deletion AUC (lower is better) and insertion AUC (higher is better) of the true-class probability as the
    patches are removed (replaced by the image mean) / revealed in order of decreasing score."""
    V.function("prob_fn", prob_fn)
    _images(x)
    V.tensor("maps", maps, shape=(len(x), N_PATCH), dtype="float")
    steps = V.integer("steps", steps, min=1)
    n, P = maps.shape
    order = maps.argsort(1, descending=True)
    fill = x.mean((2, 3), keepdim=True)
    dels, ins = [], []
    for s in range(steps + 1):
        k = round(P * s / steps)
        top = torch.zeros(n, P, dtype=torch.bool)
        top.scatter_(1, order[:, :k], True)
        dels.append(prob_fn(_patch_keep(x, ~top, fill)))
        ins.append(prob_fn(_patch_keep(x, top, fill)))
    d, i = torch.stack(dels, 1), torch.stack(ins, 1)  # (n, steps+1)
    return float(np.trapezoid(d.mean(0).numpy(), dx=1 / steps)), float(np.trapezoid(i.mean(0).numpy(), dx=1 / steps))


@torch.no_grad()
def kernel_shap(prob_fn: Callable[[Tensor], Tensor], x: Tensor, n_coalitions: int = 150, seed: int = 0) -> Tensor:
    """Kernel SHAP values (n, P) of the true-class probability over patches: ``n_coalitions`` sampled coalitions per
    image (sizes drawn from the Shapley kernel), masked patches replaced by the image mean, a weighted least-squares
    fit with the efficiency constraint enforced by two heavily weighted rows (empty and full coalition)."""
    V.function("prob_fn", prob_fn)
    _images(x)
    n_coalitions, seed = V.integer("n_coalitions", n_coalitions, min=4), V.seed("seed", seed)
    n, P = x.shape[0], N_PATCH
    g = np.random.default_rng(seed)
    sizes = np.arange(1, P)
    kw = (P - 1) / (sizes * (P - sizes))
    Z = np.zeros((n_coalitions, P), bool)
    Z[1] = True  # row 0 empty, row 1 full
    for r in range(2, n_coalitions):
        s = g.choice(sizes, p=kw / kw.sum())
        Z[r, g.choice(P, s, replace=False)] = True
    w = np.ones(n_coalitions)
    w[:2] = 1e6
    fill = x.mean((2, 3), keepdim=True)
    Zt = torch.as_tensor(Z)
    vals = torch.stack([prob_fn(_patch_keep(x, Zt[r].expand(n, P), fill)) for r in range(n_coalitions)], 1)
    A = np.hstack([np.ones((n_coalitions, 1)), Z.astype(np.float64)]) * np.sqrt(w)[:, None]
    coef = np.linalg.lstsq(A, vals.numpy().T * np.sqrt(w)[:, None], rcond=None)[0]  # (1 + P, n)
    return torch.as_tensor(coef[1:].T, dtype=torch.float32)


def map_entropy(maps: Tensor, temperature: float = 0.1) -> float:
    """Mean entropy (nats) of softmax(maps / temperature) over patches: how concentrated the explanations are."""
    V.tensor("maps", maps, ndim=2, dtype="float", nonempty=True)
    temperature = V.positive("temperature", temperature)
    p = (maps / temperature).softmax(1)
    return float(-(p * p.clamp_min(1e-12).log()).sum(1).mean())


def linear_cka(X: Tensor, Y: Tensor) -> float:
    """Linear CKA between feature matrices (n, d1) and (n, d2)."""
    V.tensor("X", X, ndim=2, dtype="float", nonempty=True)
    V.tensor("Y", Y, ndim=2, dtype="float", nonempty=True)
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X and Y need the same number of rows, got {X.shape[0]} and {Y.shape[0]}")
    X, Y = X - X.mean(0), Y - Y.mean(0)
    if not (X.norm() > 0 and Y.norm() > 0):
        raise ValueError("X and Y must vary across rows (a constant feature matrix has no CKA)")
    hsic = (X.T @ Y).norm() ** 2
    return float(hsic / ((X.T @ X).norm() * (Y.T @ Y).norm()))


def spearman_perm(x: Sequence[float], y: Sequence[float], n_perm: int = 5000, seed: int = 0) -> tuple[float, float]:
    """Spearman rho and a two-sided permutation p-value (with the +1 correction)."""
    from scipy.stats import rankdata

    x = V.array("x", x, ndim=1, dtype="float")
    y = V.array("y", y, ndim=1, dtype="float")
    n_perm, seed = V.integer("n_perm", n_perm, min=1), V.seed("seed", seed)
    if len(x) != len(y) or len(x) < 3:
        raise ValueError(f"x and y must be two sequences of equal length >= 3, got {len(x)} and {len(y)}")
    rx, ry = rankdata(x), rankdata(y)
    rho = float(np.corrcoef(rx, ry)[0, 1])
    g = np.random.default_rng(seed)
    null = np.array([np.corrcoef(rx, g.permutation(ry))[0, 1] for _ in range(n_perm)])
    return rho, float((1 + np.sum(np.abs(null) >= abs(rho) - 1e-12)) / (n_perm + 1))
