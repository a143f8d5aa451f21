import numpy as np
import pytest
import torch

from helpers import repro


def test_same_seed_same_numbers():
    repro.seed_everything(3)
    a = (np.random.rand(3), torch.rand(3))
    repro.seed_everything(3)
    b = (np.random.rand(3), torch.rand(3))
    assert np.array_equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_different_seed_different_numbers():
    repro.seed_everything(1)
    a = torch.rand(5)
    repro.seed_everything(2)
    assert not torch.equal(a, torch.rand(5))


def test_rng_streams_are_independent_and_reproducible():
    assert repro.rng(0, 1).random() == repro.rng(0, 1).random()
    assert repro.rng(0, 1).random() != repro.rng(0, 2).random()


def test_setup_reads_thread_env(monkeypatch):
    from threadpoolctl import threadpool_info

    monkeypatch.setenv("HELPERS_THREADS", "1")
    s = repro.setup(0)
    assert s.threads == 1 and torch.get_num_threads() == 1 and s.device == "cpu" and s.seed == 0
    assert all(p["num_threads"] == 1 for p in threadpool_info() if p["user_api"] == "blas")


@pytest.mark.parametrize("bad,exc", [(-1, ValueError), (2**32, ValueError), (1.5, TypeError), ("0", TypeError),
                                     (True, TypeError)])
def test_bad_seed(bad, exc):
    with pytest.raises(exc):
        repro.seed_everything(bad)


def test_bad_threads_and_device():
    with pytest.raises(ValueError):
        repro.set_threads(0)
    with pytest.raises(TypeError):
        repro.set_threads(1.0)
    with pytest.raises(ValueError):
        repro.pick_device("tpu")


def test_seeded_builds_and_trains_the_same_model_after_unrelated_rng_use():
    import torch

    from helpers import nn, train

    cfg = nn.TransformerConfig(vocab_size=7, n_layer=1, n_head=2, d_model=16, max_len=8)

    def batch(step):
        g = torch.Generator().manual_seed(step)
        return torch.randint(0, 7, (4, 8), generator=g)

    def loss(m, x):
        return torch.nn.functional.cross_entropy(m(x[:, :-1]).reshape(-1, 7), x[:, 1:].reshape(-1))

    def build_and_train(seed):
        with repro.seeded(seed):
            m = nn.Transformer(cfg)
            h = train.fit(m, loss, batch, 3, lr=1e-2, progress=False)
        return h.loss, torch.cat([p.detach().flatten() for p in m.parameters()])

    la, pa = build_and_train(5)
    torch.rand(13), np.random.rand(3)  # unrelated random numbers drawn in between
    lb, pb = build_and_train(5)
    assert la == lb and torch.equal(pa, pb)
    lc, pc = build_and_train(6)
    assert not torch.equal(pa, pc)


def test_seeded_restores_the_outer_stream_and_checks_the_seed():
    import torch

    torch.manual_seed(1)
    expected = torch.rand(3)
    torch.manual_seed(1)
    with repro.seeded(9):
        torch.rand(100)
    assert torch.equal(torch.rand(3), expected)
    with pytest.raises(TypeError):
        with repro.seeded(1.5):
            pass
    with pytest.raises(ValueError):
        with repro.seeded(-1):
            pass


# -- benchmark: interleaved, CPU beside wall, medians and spread -----------------------------------------------
def test_benchmark_interleaves_and_compares():
    from helpers.repro import benchmark

    order = []
    t = benchmark({"slow": lambda: (order.append("s"), sum(range(200_000))),
                   "fast": lambda: (order.append("f"), None)}, repeats=4, warmup=1)
    assert order[:2] == ["s", "f"] and order[2:4] == ["s", "f"] and order[4:6] == ["f", "s"]  # rotation
    assert t.cpu["slow"].shape == (4,) and t.wall["fast"].shape == (4,)
    assert t.ratio("slow", "fast") > 1 and t.ratio("slow", "fast", clock="wall") > 1
    assert t.spread("slow") >= 0 and set(t.summary()["slow"]) == {"median", "spread", "wall_median"}


def test_benchmark_refuses_bad_input():
    import pytest

    from helpers.repro import benchmark

    with pytest.raises(TypeError):
        benchmark({})
    with pytest.raises(TypeError):
        benchmark({"a": 3})
    with pytest.raises(ValueError, match="repeats"):
        benchmark({"a": lambda: None}, repeats=0)
    t = benchmark({"a": lambda: None}, repeats=2)
    with pytest.raises(ValueError, match="clock"):
        t.median("a", clock="gpu")
    with pytest.raises(ValueError, match="no timings"):
        t.spread("b")
