import re

import pytest

from helpers import plotting


def test_static_slider_embeds_every_frame():
    calls = []

    def draw(fig, v):
        calls.append(v)
        fig.add_subplot(111).plot([0, 1], [0, v])

    html = plotting.static_slider([1, 2, 3], draw, label="k").data
    assert 'type="range"' in html and "anim-slider" in html
    assert html.count("data:image/png;base64") >= 3 or html.count("frames[") >= 3
    assert set(calls) == {1, 2, 3}
    # works offline: no stylesheet from a CDN, no icon font needed
    assert "maxcdn" not in html and "font-awesome" not in html and 'class="fa ' not in html


def test_static_slider_bad_input():
    with pytest.raises(ValueError):
        plotting.static_slider([], lambda f, v: None)
    with pytest.raises(TypeError):
        plotting.static_slider([1], "draw")


def test_static_slider_refuses_bad_frames_and_sizes():
    """#58: wrong type, NaN, out of range and wrong shape are refused at the door, naming the argument."""
    draw = lambda f, v: None  # noqa: E731
    for kw, exc, name in [
        (dict(values="abc"), TypeError, "values"), (dict(values=[1.0, float("nan")]), ValueError, "values[1]"),
        (dict(values=range(plotting.MAX_FRAMES + 1)), ValueError, "values"),
        (dict(values=[1], figsize=(1.0,)), TypeError, "figsize"),
        (dict(values=[1], figsize=(1e308, 2.0)), ValueError, "figsize[0]"),
        (dict(values=[1], figsize=(2.0, float("nan"))), ValueError, "figsize[1]"),
        (dict(values=[1], label=None), TypeError, "label"), (dict(values=[1.5], fmt="{:d}"), ValueError, "fmt"),
    ]:
        with pytest.raises(exc, match=re.escape(name)):
            plotting.static_slider(draw=draw, **kw)


def test_live_controls_refuses_controls_no_widget_could_show(monkeypatch):
    monkeypatch.setenv("HELPERS_NO_FRONTEND", "1")  # the placeholder path checks the same as a live kernel

    def fn(k=1, name="a"):
        pass

    for kw, exc in [(dict(k=(5, 1)), ValueError), (dict(k=(0, float("nan"))), ValueError),
                    (dict(k=(0, 5, 0)), ValueError), (dict(k=(0, 1, 2, 3)), TypeError), (dict(k=None), TypeError),
                    (dict(name=[]), ValueError), (dict(other=(1, 2)), ValueError)]:
        with pytest.raises(exc, match=re.escape(repr(next(iter(kw))))):
            plotting.live_controls(fn, **kw)
    plotting.live_controls(fn, k=(1, 1), name=["a", "b"])  # min == max is a valid (fixed) slider
    plotting.live_controls(lambda **kw: None, anything=True)  # **kwargs takes any control


def test_live_controls(monkeypatch):
    monkeypatch.setattr(plotting, "has_front_end", lambda: True)
    w = plotting.live_controls(lambda k=1: None, k=(1, 5))
    assert w.children[0].value == 3 or w.children[0].min == 1
    with pytest.raises(TypeError):
        plotting.live_controls(None)


def test_live_controls_is_a_static_placeholder_without_a_front_end(monkeypatch):
    import ipywidgets

    monkeypatch.setenv("HELPERS_NO_FRONTEND", "1")

    def boom(*a, **k):
        raise AssertionError("no interactive widget may be created without a front end")

    monkeypatch.setattr(ipywidgets, "interactive", boom)
    out = plotting.live_controls(lambda k=1: None, k=(1, 5))
    assert "live-controls-placeholder" in out.data and "<code>k</code>" in out.data
    assert not plotting.has_front_end()


def test_live_controls_under_papermill_creates_no_widget(tmp_path):
    """A notebook run as the book runner runs it (env set, papermill) gets the placeholder, not a widget."""
    import nbformat
    from _loader import run_papermill

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "from helpers import plotting\nw = plotting.live_controls(lambda k=1: print(k), k=(1, 5))\n"
        "print(type(w).__name__)\nw")]
    src, out = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    nbformat.write(nb, src)
    run_papermill(src, out, env={"HELPERS_NO_FRONTEND": "1"}, cell_timeout=60, timeout=300)
    text = out.read_text()
    assert "HTML" in text and "live-controls-placeholder" in text
    assert "application/vnd.jupyter.widget-view+json" not in text
