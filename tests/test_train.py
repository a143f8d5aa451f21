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


# -- reading a plateau on a stable phase, through noise, above a floor; the WSD schedule ------------------------
def test_plateau_until_reads_the_stable_phase():
    from helpers.train import plateau
    # 80 steps falling then flat at 1.0, then a decay tail that drops the loss by annealing alone
    curve = [3.0 - 2.0 * t / 40 if t < 40 else 1.0 for t in range(80)] + [1.0 - 0.02 * t for t in range(1, 21)]
    assert plateau(curve) > 0.05                       # the tail reads as "still improving"
    assert abs(plateau(curve, until=80)) < 1e-9        # the stable phase is flat
    # a manifest curve is cut by its own steps, not by point count
    man = {"step": [10 * (i + 1) for i in range(100)], "value": curve}
    assert plateau(man, until=800) == plateau(curve, until=80)
    # a stable phase that is still falling is not flat, whatever the tail does
    falling = [3.0 - t / 50 for t in range(80)] + [1.4 - 0.01 * t for t in range(20)]
    assert plateau(falling, until=80) > 0.15


@pytest.mark.parametrize("kw, err", [({"until": 1}, ValueError), ({"until": 0}, ValueError),
                                     ({"until": 2.5}, TypeError), ({"noise": -1.0}, ValueError),
                                     ({"atol": -0.1}, ValueError)])
def test_plateau_refuses_bad_readings(kw, err):
    from helpers.train import plateau
    with pytest.raises(err):
        plateau([3.0, 2.0, 1.5, 1.2, 1.1, 1.0], **kw)
    with pytest.raises(ValueError, match="steps"):
        plateau({"step": [1, 2], "value": [1.0, 2.0, 3.0]}, until=2)


def test_plateau_noise_counts_only_resolvable_improvement():
    import numpy as np

    from helpers.train import plateau
    rng = np.random.default_rng(0)
    flags = []
    for _ in range(200):  # a held-out curve: falls, then flat with noise, 25 evaluations
        c = [3.0 - 0.4 * t for t in range(5)] + list(1.0 + 0.05 * rng.standard_normal(20))
        flags.append((plateau(c) > 0.02, plateau(c, noise=2.0) > 0.02))
    plain, aware = np.mean(flags, axis=0)
    assert plain > 0.1          # the 2% bar is below a 25-point curve's noise ...
    assert aware < 0.05         # ... and a 2-standard-error allowance reads it flat
    # a curve that is really still falling stays "not flat" through the same noise allowance
    c = [3.0 - 0.08 * t + 0.02 * rng.standard_normal() for t in range(25)]
    assert plateau(c, noise=2.0) > 0.1
    for _ in range(20):  # never more "improving" than the plain reading
        c = list(2.0 - 0.01 * np.arange(25) + 0.05 * rng.standard_normal(25))
        assert plateau(c, noise=2.0) <= plateau(c) + 1e-12


def test_plateau_atol_floors_tiny_improvements():
    from helpers.train import plateau
    near_zero = [1e-4, 8e-5, 6e-5, 5e-5, 4e-5]          # near zero from its first point
    assert plateau(near_zero, frac=0.2) > 0.05
    assert plateau(near_zero, frac=0.2, atol=1e-3) == 0.0
    assert plateau([3.0, 2.0, 1.5, 1.0, 0.5], frac=0.2, atol=1e-3) > 0.05  # a real drop survives the floor


def test_wsd_schedule():
    assert lr_at(0, 100, 1.0, schedule="wsd", decay_steps=20) == 1.0
    assert lr_at(79, 100, 1.0, schedule="wsd", decay_steps=20) == 1.0
    assert lr_at(90, 100, 1.0, schedule="wsd", decay_steps=20) == pytest.approx(0.55)
    assert lr_at(100, 100, 1.0, schedule="wsd", decay_steps=20) == pytest.approx(0.1)
    assert lr_at(5, 100, 1.0, warmup=10, schedule="wsd", decay_steps=20) == pytest.approx(0.6)
    for bad in (0, 91):
        with pytest.raises(ValueError, match="decay_steps"):
            lr_at(0, 100, 1.0, warmup=10, schedule="wsd", decay_steps=bad)
    with pytest.raises(ValueError, match="wsd"):
        lr_at(0, 100, 1.0, schedule="cosine", decay_steps=5)


def test_fit_wsd_records_its_schedule():
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    x, y = torch.randn(16, 2), torch.randn(16, 1)
    h = fit(model, lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(), [(x, y)], 20, lr=0.1, schedule="wsd",
            decay_steps=5, progress=False)
    assert h.lr[:15] == [0.1] * 15 and h.lr[-1] < 0.1 and h.lr[-1] >= 0.01
    with pytest.raises(ValueError, match="decay_steps"):
        fit(model, lambda m, b: m(b[0]).sum(), [(x, y)], 20, schedule="wsd", progress=False)
