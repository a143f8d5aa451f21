"""A small, seeded training loop with a ``tqdm`` progress bar and a loss history.

Every chapter that trains something calls :func:`fit` with its own ``loss_fn(model, batch)`` and a batch source,
so the optimizer, schedule, clipping and logging are the same (and learned once by the reader) across the book.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from helpers import validate as V

__all__ = ["History", "fit", "lr_at", "plateau", "tail_mean"]


@dataclass
class History:
    """Losses per step and any evaluation metrics (``evals[name]`` is a list of ``(step, value)``)."""

    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    evals: dict[str, list[tuple[int, float]]] = field(default_factory=dict)

    def smoothed(self, window: int = 20) -> list[float]:
        """Running mean of the loss over ``window`` steps (for plots)."""
        window = V.integer("window", window, min=1)
        out, s = [], 0.0
        for i, v in enumerate(self.loss):
            s += v
            if i >= window:
                s -= self.loss[i - window]
            out.append(s / min(i + 1, window))
        return out


def _curve(what: str, values: Any, min_len: int) -> list[float]:
    """A curve as a list of finite floats: a sequence, a 1-d array, or a manifest curve ``{"step": .., "value": ..}``."""
    if isinstance(values, dict):
        if "value" not in values:
            raise ValueError(f"{what}: a curve given as a mapping needs a 'value' list (a checkpoint manifest's "
                             f"history entry), got keys {sorted(values)}")
        values = values["value"]
    if hasattr(values, "tolist") and callable(values.tolist):
        values = values.tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise TypeError(f"{what} must be a sequence of numbers (a loss or metric history), got {V.describe(values)}")
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{what}[{i}] must be a number, got {V.describe(v)}")
        if not math.isfinite(v):
            raise ValueError(f"{what}[{i}] must be finite, got {v}")
        out.append(float(v))
    if len(out) < min_len:
        raise ValueError(f"{what} needs at least {min_len} points, got {len(out)}")
    return out


def plateau(values: Any, frac: float = 0.2, *, higher_is_better: bool = False, until: int | None = None,
            noise: float = 0.0, atol: float = 0.0) -> float:
    """How much a curve still improved at its end, as a share of what it had improved in all.

    With ``start``, ``before`` and ``last`` the means of the curve's first, second-to-last and last ``frac`` of
    points: ``(before - last) / max(start - last, |before|)`` for a loss (signs flipped when higher is better).
    About 0 (or negative) means the curve is flat: a loss that fell from 2.3 to 0.01 and then to 0.005 is flat
    (0.2% of its drop), one falling linearly to the end is not (about 20%). Dividing by ``|before|`` too keeps a
    noisy curve that never moved from reading as "still improving". A condition reads ``plateau(loss) <= 0.05``.
    Accepts a list, an array or a checkpoint manifest's curve.

    Three readings, each fixed with the condition before any number is read (never switched to flip a verdict):

    * ``until``: read only the points at steps ``<= until`` (a list's points are steps ``1..n``, a manifest curve
      has its own). A schedule that ends in a learning-rate decay (``fit(schedule="wsd")``, or any cosine tail)
      lowers the loss in its last steps by annealing alone, so the last fifth of such a curve reads as "still
      improving" however long the model trained; the plateau of a warmup-stable-decay run is read on its stable
      phase, ``until=steps - decay_steps``. (A pure cosine run has no stable phase: train it longer to know.)
    * ``noise``: an improvement is counted only beyond ``noise`` standard errors of the two windows' difference,
      the step-to-step noise estimated from the curve's own first differences over the last two windows
      (``std(diff) / sqrt(2)`` per point, so a steady trend is not mistaken for noise). A sparse, noisy held-out
      curve (25 evaluations) moves by more than 2% between two windows by chance; ``noise=2`` asks that the
      improvement be resolvable before it counts.
    * ``atol``: improvements of at most ``atol`` (in the curve's own units) count as none: a curve that starts
      near zero would otherwise read any tiny drop as a large share of its "whole" improvement.
    """
    frac = V.probability("frac", frac)
    V.boolean("higher_is_better", higher_is_better)
    noise = V.nonnegative("noise", noise)
    atol = V.nonnegative("atol", atol)
    if not 0 < frac <= 0.5:
        raise ValueError(f"frac must be in (0, 0.5] (two windows of that fraction are compared), got {frac}")
    vals = _curve("values", values, min_len=2)
    if until is not None:
        until = V.integer("until", until, min=1)
        steps = values.get("step") if isinstance(values, dict) else None
        if steps is None:
            steps = list(range(1, len(vals) + 1))
        elif len(steps) != len(vals):
            raise ValueError(f"values: the curve has {len(steps)} steps for {len(vals)} values")
        vals = [v for st, v in zip(steps, vals) if st <= until]
        if len(vals) < 2:
            raise ValueError(f"until={until} leaves {len(vals)} point(s) of the curve; at least 2 are needed "
                             f"(is until a step number of this curve?)")
    if higher_is_better:
        vals = [-v for v in vals]
    k = max(1, int(round(frac * len(vals))))
    start = sum(vals[:k]) / k
    last = sum(vals[-k:]) / k
    before = sum(vals[-2 * k:-k]) / k
    gain = before - last
    if gain > 0 and noise > 0:
        window = vals[-2 * k:]
        diffs = [b - a for a, b in zip(window[:-1], window[1:])]
        if len(diffs) >= 2:
            m = sum(diffs) / len(diffs)
            sd = math.sqrt(sum((d - m) ** 2 for d in diffs) / (len(diffs) - 1)) / math.sqrt(2)
            gain = max(0.0, gain - noise * sd * math.sqrt(2 / k))
    if 0 < gain <= atol:
        gain = 0.0
    return gain / max(start - last, abs(before), 1e-12)


def tail_mean(values: Any, frac: float = 0.1) -> float:
    """The mean of a curve's last ``frac`` of points (at least one): its final level, robust to step noise.

    A fit condition reads ``tail_mean(train_accuracy) >= 0.95``. Accepts a list, an array or a manifest's curve.
    """
    frac = V.probability("frac", frac)
    if frac == 0:
        raise ValueError("frac must be > 0")
    vals = _curve("values", values, min_len=1)
    k = max(1, int(round(frac * len(vals))))
    return sum(vals[-k:]) / k


SCHEDULES = ("cosine", "constant", "wsd")


def lr_at(step: int, steps: int, lr: float, warmup: int = 0, schedule: str = "cosine", min_ratio: float = 0.1,
          decay_steps: int = 0) -> float:
    """Learning rate at ``step``: linear warm-up, then constant, cosine decay to ``min_ratio * lr``, or ``"wsd"``
    (warmup-stable-decay): constant until ``steps - decay_steps``, then cosine decay to ``min_ratio * lr`` over the
    last ``decay_steps``. A WSD run's loss can be read for a plateau on its stable phase (``plateau(until=...)``)."""
    step, steps = V.integer("step", step, min=0), V.integer("steps", steps, min=0)
    lr = V.nonnegative("lr", lr)
    warmup = V.integer("warmup", warmup, min=0)
    V.one_of("schedule", schedule, SCHEDULES)
    min_ratio = V.probability("min_ratio", min_ratio)
    decay_steps = _decay_steps(schedule, decay_steps, steps, warmup)
    return _lr_at(step, steps, lr, warmup, schedule, min_ratio, decay_steps)


def _decay_steps(schedule: str, decay_steps: int, steps: int, warmup: int) -> int:
    decay_steps = V.integer("decay_steps", decay_steps, min=0)
    if schedule != "wsd":
        if decay_steps:
            raise ValueError(f"decay_steps is for schedule='wsd' only, got decay_steps={decay_steps} with "
                             f"schedule={schedule!r}")
        return 0
    if not 0 < decay_steps <= steps - warmup:
        raise ValueError(f"schedule='wsd' needs 0 < decay_steps <= steps - warmup = {steps - warmup}, got "
                         f"{decay_steps}")
    return decay_steps


def _lr_at(step: int, steps: int, lr: float, warmup: int, schedule: str, min_ratio: float = 0.1,
           decay_steps: int = 0) -> float:
    if step < warmup:
        return lr * (step + 1) / warmup
    if schedule == "constant":
        return lr
    if schedule == "wsd":
        start = steps - decay_steps
        if step < start:
            return lr
        t = (step - start) / decay_steps
    else:
        t = (step - warmup) / max(1, steps - warmup)
    return lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(t, 1.0))))


def fit(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, Any], torch.Tensor],
    batches: Callable[[int], Any] | Iterable[Any],
    steps: int,
    *,
    lr: float = 3e-4,
    weight_decay: float = 0.0,
    warmup: int = 0,
    schedule: str = "cosine",
    decay_steps: int = 0,
    grad_clip: float | None = 1.0,
    seed: int | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    eval_fn: Callable[[nn.Module], dict[str, float]] | None = None,
    eval_every: int = 0,
    progress: bool = True,
    desc: str = "train",
    history: History | None = None,
) -> History:
    """Train ``model`` for ``steps`` AdamW steps on ``loss_fn(model, batch)``.

    ``batches`` is either a function ``step -> batch`` (deterministic given the seed) or an iterable, cycled.
    ``eval_fn(model) -> {name: value}`` runs every ``eval_every`` steps and at the end, under ``torch.no_grad``.
    ``schedule``: ``"cosine"`` (default), ``"constant"`` or ``"wsd"`` with its ``decay_steps`` (see :func:`lr_at`).
    """
    V.instance("model", model, nn.Module)
    V.function("loss_fn", loss_fn)
    steps = V.integer("steps", steps, min=0)
    lr = V.positive("lr", lr)
    weight_decay = V.nonnegative("weight_decay", weight_decay)
    warmup = V.integer("warmup", warmup, min=0)
    V.one_of("schedule", schedule, SCHEDULES)
    decay_steps = _decay_steps(schedule, decay_steps, steps, warmup)
    grad_clip = V.optional(V.positive, "grad_clip", grad_clip)
    seed = V.optional(V.seed, "seed", seed)
    V.optional(V.instance, "optimizer", optimizer, torch.optim.Optimizer)
    V.optional(V.function, "eval_fn", eval_fn)
    eval_every = V.integer("eval_every", eval_every, min=0)
    V.boolean("progress", progress)
    V.instance("desc", desc, str)
    V.optional(V.instance, "history", history, History)
    if not callable(batches):
        try:
            iter(batches)
        except TypeError:
            raise TypeError(
                f"batches must be a function step -> batch or an iterable, got {V.describe(batches)}"
            ) from None
        if hasattr(batches, "__len__") and len(batches) == 0:
            raise ValueError("batches must hold at least one batch, got an empty collection")
    if seed is not None:
        torch.manual_seed(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("model has no trainable parameters")
    opt = optimizer or torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    hist = history if history is not None else History()

    if callable(batches):
        get = batches
    else:
        it: Iterator[Any] | None = None

        def get(_step: int) -> Any:
            nonlocal it
            if it is None:
                it = iter(batches)
            try:
                return next(it)
            except StopIteration:
                it = iter(batches)
                try:
                    return next(it)
                except StopIteration:
                    raise ValueError(
                        "batches yielded no batch: an empty iterable, or a one-shot iterator already exhausted "
                        "(pass a list or a function step -> batch)"
                    ) from None

    def run_eval(step: int) -> dict[str, float]:
        was = model.training
        model.eval()
        with torch.no_grad():
            out = eval_fn(model)
        model.train(was)
        for k, v in out.items():
            hist.evals.setdefault(k, []).append((step, float(v)))
        return out

    model.train()
    bar = tqdm(range(steps), desc=desc, disable=not progress, mininterval=1.0)
    for step in bar:
        cur = _lr_at(step, steps, lr, warmup, schedule, decay_steps=decay_steps)
        for g in opt.param_groups:
            g["lr"] = cur
        loss = loss_fn(model, get(step))
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss became {loss.item()} at step {step}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        opt.step()
        hist.loss.append(loss.item())
        hist.lr.append(cur)
        if eval_fn is not None and eval_every and (step + 1) % eval_every == 0 and step + 1 < steps:
            run_eval(step + 1)
        if step % 10 == 0:
            bar.set_postfix(loss=f"{hist.loss[-1]:.4f}")
    model.eval()
    if eval_fn is not None:
        run_eval(steps)
    return hist
