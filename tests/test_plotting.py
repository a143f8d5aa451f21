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


def test_live_controls_under_papermill_creates_no_widget(tmp_path, monkeypatch):
    """A notebook run as the book runner runs it (env set, papermill) gets the placeholder, not a widget."""
    import nbformat
    import papermill as pm

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "from helpers import plotting\nw = plotting.live_controls(lambda k=1: print(k), k=(1, 5))\n"
        "print(type(w).__name__)\nw")]
    src, out = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    nbformat.write(nb, src)
    monkeypatch.setenv("HELPERS_NO_FRONTEND", "1")
    pm.execute_notebook(str(src), str(out), kernel_name="python3", progress_bar=False, execution_timeout=60)
    text = out.read_text()
    assert "HTML" in text and "live-controls-placeholder" in text
    assert "application/vnd.jupyter.widget-view+json" not in text
