import numpy as np
import pytest
import torch

from helpers.train import History, fit, lr_at


def regression(seed=0):
    torch.manual_seed(seed)
    w = torch.randn(4, 1)
    x = torch.randn(256, 4)
    return x, x @ w


def test_fit_learns_and_is_reproducible():
    x, y = regression()
    loss_fn = lambda m, b: ((m(b[0]) - b[1]) ** 2).mean()
    batches = lambda step: (x[(step * 32) % 256:][:32], y[(step * 32) % 256:][:32])
    runs = []
    for _ in range(2):
        torch.manual_seed(1)
        m = torch.nn.Linear(4, 1)
        h = fit(m, loss_fn, batches, 200, lr=0.05, seed=1, progress=False,
                eval_fn=lambda mm: {"mse": loss_fn(mm, (x, y)).item()}, eval_every=50)
        runs.append(h)
    assert runs[0].loss == runs[1].loss
    assert runs[0].evals["mse"][-1][1] < 1e-3 < runs[0].loss[0]
    assert [s for s, _ in runs[0].evals["mse"]] == [50, 100, 150, 200]


def test_fit_cycles_an_iterable():
    x, y = regression()
    m = torch.nn.Linear(4, 1)
    h = fit(m, lambda mm, b: ((mm(b[0]) - b[1]) ** 2).mean(), [(x, y)], 5, progress=False)
    assert len(h.loss) == 5 and len(h.lr) == 5


def test_schedule():
    assert lr_at(0, 100, 1.0, warmup=10) == pytest.approx(0.1)
    assert lr_at(10, 100, 1.0, warmup=10) == pytest.approx(1.0)
    assert lr_at(100, 100, 1.0, warmup=10) == pytest.approx(0.1)
    assert lr_at(50, 100, 1.0, schedule="constant") == 1.0
    with pytest.raises(ValueError):
        lr_at(0, 10, 1.0, schedule="step")


def test_nonfinite_loss_raises_and_bad_args():
    m = torch.nn.Linear(2, 1)
    with pytest.raises(FloatingPointError):
        fit(m, lambda mm, b: mm.weight.sum() * float("nan"), lambda s: None, 3, progress=False)
    with pytest.raises(ValueError):
        fit(m, lambda mm, b: mm.weight.sum(), lambda s: None, -1, progress=False)
    with pytest.raises(ValueError):
        fit(m, lambda mm, b: mm.weight.sum(), lambda s: None, 1, lr=0, progress=False)


def test_smoothed():
    h = History(loss=[1.0, 3.0, 5.0])
    assert h.smoothed(2) == [1.0, 2.0, 4.0]


# -- regime measures for conditions (plateau, final level) ------------------------------------------------------
def test_plateau_flat_falling_and_rising():
    from helpers.train import plateau

    assert plateau([1.0] * 50) == 0.0
    linear = [2.0 - t / 50 for t in range(100)]             # still falling at full speed: not a plateau
    assert plateau(linear) > 0.15
    flat_end = [max(0.1, 1 - t / 50) for t in range(100)]  # reached its floor halfway
    assert abs(plateau(flat_end)) < 1e-9
    to_zero = [2.3 * 0.9 ** t for t in range(100)]          # a loss that went to ~0: flat, though it still halves
    assert 0 < plateau(to_zero) < 0.01
    rng = np.random.default_rng(0)
    noisy = list(1.0 + 0.05 * rng.standard_normal(200))     # never moved, only noise: flat
    assert abs(plateau(noisy)) < 0.05
    acc = [min(1.0, t / 100) for t in range(100)]            # accuracy still rising
    assert plateau(acc, higher_is_better=True) > 0.1
    assert plateau(acc[::-1], higher_is_better=True) < 0     # falling accuracy is not "still improving"
    assert plateau({"step": [0, 1, 2, 3], "value": [4.0, 3.0, 2.0, 2.0]}, frac=0.25) == 0.0


@pytest.mark.parametrize("bad,err", [([1.0], ValueError), ("loss", TypeError), ([1.0, float("nan")], ValueError),
                                     ([1.0, True], TypeError), ({"step": [1]}, ValueError)])
def test_plateau_refuses_bad_curves(bad, err):
    from helpers.train import plateau

    with pytest.raises(err):
        plateau(bad)


def test_plateau_and_tail_mean_frac_bounds():
    from helpers.train import plateau, tail_mean

    with pytest.raises(ValueError, match="frac"):
        plateau([1.0, 2.0, 3.0], frac=0.8)
    with pytest.raises(ValueError, match="frac"):
        tail_mean([1.0], frac=0.0)
    assert tail_mean([0.0] * 90 + [1.0] * 10) == 1.0
    assert tail_mean(torch.tensor([1.0, 3.0]), frac=1.0) == 2.0
