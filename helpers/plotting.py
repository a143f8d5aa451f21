"""House style for figures, and interaction that works both in the static book and live.

* :func:`use_style` sets one look for every chapter.
* :func:`static_slider` turns a precomputed sweep into a client-side slider (matplotlib's ``to_jshtml``): the
  frames are embedded in the page, so moving the slider works in the static site without a kernel.
* :func:`live_controls` wraps ``ipywidgets.interactive`` for Jupyter and Colab, where a kernel recomputes.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from helpers import validate as V

__all__ = ["use_style", "static_slider", "live_controls", "has_front_end", "PALETTE"]

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f"]
MAX_FRAMES = 500  # every frame of a static slider is embedded in the page as an image
MAX_INCHES = 50.0  # a figure side; at 100 dpi, 5000 pixels


def _is_real(x: Any) -> bool:
    return isinstance(x, (numbers.Real, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _figsize(figsize: Any) -> tuple[float, float]:
    if isinstance(figsize, (str, bytes)) or not isinstance(figsize, (Sequence, np.ndarray)) or len(figsize) != 2:
        raise TypeError(f"figsize must be a (width, height) pair of inches, got {V.describe(figsize)}")
    w, h = (V.number(f"figsize[{i}]", v, min=0, strict_min=True, max=MAX_INCHES) for i, v in enumerate(figsize))
    return (w, h)


def _values(values: Any) -> list:
    """The frames' values: a non-empty iterable (not a string or a mapping) of at most MAX_FRAMES items, no NaN/inf
    among the numbers."""
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise TypeError(f"values must be a sequence of frame values (list, tuple, range, array), got "
                        f"{V.describe(values)}")
    values = list(values)
    if not values:
        raise ValueError("values must be a non-empty sequence")
    if len(values) > MAX_FRAMES:
        raise ValueError(f"values must have at most {MAX_FRAMES} frames (each is embedded in the page), "
                         f"got {len(values)}")
    for i, v in enumerate(values):
        if _is_real(v) and not math.isfinite(float(v)):
            raise ValueError(f"values[{i}] must be a finite number, got {v}")
    return values


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

    values = _values(values)
    if not callable(draw):
        raise TypeError(f"draw must be a callable draw(fig, value), got {V.describe(draw)}")
    figsize = _figsize(figsize)
    V.instance("label", label, str)
    V.instance("fmt", fmt, str)
    for i, v in enumerate(values):
        try:
            fmt.format(v)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
            raise ValueError(f"fmt {fmt!r} cannot format values[{i}] = {v!r}: {type(e).__name__}: {e}") from None
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
    _controls(fn, controls)
    if not has_front_end():
        from IPython.display import HTML

        names = ", ".join(f"<code>{k}</code>" for k in controls) or "none"
        return HTML("<div class='live-controls-placeholder'><p><em>Live controls</em> (" + names + "): open this "
                    "chapter in Jupyter or Colab to move them; the static page shows the precomputed slider "
                    "above.</p></div>")
    import ipywidgets as widgets

    return widgets.interactive(fn, **controls)


def _controls(fn: Callable[..., Any], controls: dict[str, Any]) -> None:
    """Each control is an ``ipywidgets.interactive`` abbreviation that makes a widget, for a parameter ``fn`` takes:
    ``(min, max[, step])`` of finite numbers with min <= max and step > 0, a non-empty list or dict of choices, a
    bool, a string, a finite number, or an ipywidgets object. Checked here so that the book's own run (which shows
    a placeholder) refuses what a live kernel would."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
        params = None
    takes_any = params is None or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    for k, v in controls.items():
        name = f"control {k!r}"
        if not takes_any and (k not in params or params[k].kind is inspect.Parameter.POSITIONAL_ONLY):
            raise ValueError(f"{name} is not a keyword parameter of fn (it takes {list(params)})")
        if type(v).__module__.startswith("ipywidgets") or isinstance(v, (bool, np.bool_, str)):
            continue
        if _is_real(v):
            V.number(name, v)
        elif isinstance(v, tuple):
            if len(v) not in (2, 3) or not all(_is_real(x) for x in v):
                raise TypeError(f"{name} must be a (min, max) or (min, max, step) tuple of numbers, got "
                                f"{V.describe(v)}")
            lo, hi = V.number(f"{name} min", v[0]), V.number(f"{name} max", v[1])
            if not lo <= hi:
                raise ValueError(f"{name} must have min <= max, got {v}")
            if len(v) == 3:
                V.number(f"{name} step", v[2], min=0, strict_min=True)
        elif isinstance(v, (list, dict)):
            if not v:
                raise ValueError(f"{name} must offer at least one choice, got {v!r}")
        else:
            raise TypeError(f"{name} must be a (min, max[, step]) tuple, a list or dict of choices, a bool, a "
                            f"string, a number or an ipywidgets widget, got {V.describe(v)}")
