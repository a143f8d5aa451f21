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


def test_live_controls():
    w = plotting.live_controls(lambda k=1: None, k=(1, 5))
    assert w.children[0].value == 3 or w.children[0].min == 1
    with pytest.raises(TypeError):
        plotting.live_controls(None)
