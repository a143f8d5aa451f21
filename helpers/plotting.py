"""House style for figures, and interaction that works both in the static book and live.

* :func:`use_style` sets one look for every chapter.
* :func:`static_slider` turns a precomputed sweep into a client-side slider (matplotlib's ``to_jshtml``): the
  frames are embedded in the page, so moving the slider works in the static site without a kernel.
* :func:`live_controls` wraps ``ipywidgets.interactive`` for Jupyter and Colab, where a kernel recomputes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import matplotlib
import matplotlib.pyplot as plt

__all__ = ["use_style", "static_slider", "live_controls", "has_front_end", "PALETTE"]

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f"]


def use_style() -> None:
    """One figure style for the whole book (readable at the page width, colour-blind-friendly first colours)."""
    matplotlib.rcParams.update({
        "figure.figsize": (6.4, 3.6),
        "figure.dpi": 100,
        "savefig.dpi": 100,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
        "font.size": 10,
        "legend.frameon": False,
        "animation.embed_limit": 40.0,  # MB; sweeps are embedded as PNG frames
        "animation.html": "jshtml",
    })


def static_slider(
    values: Sequence[Any],
    draw: Callable[[plt.Figure, Any], None],
    *,
    figsize: tuple[float, float] = (6.4, 3.6),
    label: str = "value",
    fmt: str = "{}",
) -> Any:
    """A client-side slider over a precomputed sweep.

    ``draw(fig, value)`` draws one frame on a cleared figure; it is called once per value now, and the frames
    are embedded in the output as images. The frame's title should say the value (``label = fmt.format(v)`` is
    added as a figure suptitle). Returns an ``IPython.display.HTML`` object.
    """
    from IPython.display import HTML
    from matplotlib.animation import FuncAnimation

    values = list(values)
    if not values:
        raise ValueError("values must be a non-empty sequence")
    if not callable(draw):
        raise TypeError("draw must be a callable draw(fig, value)")
    fig = plt.figure(figsize=figsize)

    def frame(i: int) -> list:
        fig.clear()
        draw(fig, values[i])
        fig.suptitle(f"{label} = {fmt.format(values[i])}", fontsize=10)
        return []

    anim = FuncAnimation(fig, frame, frames=len(values), interval=400, repeat=False, blit=False)
    html = _offline(anim.to_jshtml(default_mode="once"))
    plt.close(fig)
    return HTML(html)


# matplotlib's player draws its buttons with Font Awesome from a CDN; the book must work offline, so the
# stylesheet link is dropped and each icon becomes a plain Unicode symbol.
_ICONS = {
    "fa fa-minus": "\u2212", "fa fa-fast-backward": "\u00ab", "fa fa-step-backward": "\u2039",
    "fa fa-play fa-flip-horizontal": "\u25c1", "fa fa-pause": "||", "fa fa-play": "\u25b7",
    "fa fa-step-forward": "\u203a", "fa fa-fast-forward": "\u00bb", "fa fa-plus": "+",
}


def _offline(html: str) -> str:
    import re

    html = re.sub(r"<link[^>]*font-awesome[^>]*>", "", html)
    for cls, symbol in _ICONS.items():
        html = html.replace(f'<i class="{cls}"></i>', f"<span>{symbol}</span>")
    return html


def has_front_end() -> bool:
    """Whether a notebook front end can show live widgets.

    False when the book runner executes the notebook (it sets ``HELPERS_NO_FRONTEND=1``: papermill has no front end
    to render widgets, and an ``interactive`` cell there is known to hang now and then) or outside an IPython
    kernel; True in Jupyter, JupyterLab and Colab.
    """
    import os

    if os.environ.get("HELPERS_NO_FRONTEND", "") not in ("", "0"):
        return False
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def live_controls(fn: Callable[..., Any], **controls: Any) -> Any:
    """Live ``ipywidgets`` controls (a kernel recomputes on change): ``live_controls(plot, k=(1, 10))``.

    Without a front end (the book's own run, a script) no widget is created: a short static note takes its place,
    naming the controls, so the page says what a reader can do live.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if not has_front_end():
        from IPython.display import HTML

        names = ", ".join(f"<code>{k}</code>" for k in controls) or "none"
        return HTML("<div class='live-controls-placeholder'><p><em>Live controls</em> (" + names + "): open this "
                    "chapter in Jupyter or Colab to move them; the static page shows the precomputed slider "
                    "above.</p></div>")
    import ipywidgets as widgets

    return widgets.interactive(fn, **controls)
