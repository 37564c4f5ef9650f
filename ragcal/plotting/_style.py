"""The look shared by every display: Okabe-Ito colours, one figure style, saving figures reproducibly.

Colours come from the Okabe-Ito palette, which stays distinguishable for the
common forms of colour blindness. matplotlib is imported only inside the
functions that draw.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import numpy as np

__all__ = ["OKABE_ITO", "SLICE_COLOURS", "ACTION_COLOURS", "figure_style", "save_figure", "slice_colours"]

#: Okabe & Ito (2008) colour-blind-safe palette, black first.
OKABE_ITO = ("#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")


#: Fixed colours for the bundled slices; other slices take the remaining palette colours in order.
SLICE_COLOURS = {"answerable": "#0072B2", "near-domain": "#E69F00", "unrelated": "#CC79A7"}


_EXTRA_COLOURS = ("#009E73", "#56B4E9", "#D55E00", "#000000", "#F0E442")


#: Colours for signals on shared axes, in order (Okabe-Ito without the low-contrast yellow).
_SIGNAL_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")


#: Line styles for threshold markers, so that they differ without colour too.
_THRESHOLD_STYLES = ("--", ":", "-.", (0, (5, 1, 1, 1)), (0, (1, 3)))


_STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.frameon": False,
    "svg.hashsalt": "ragcal",
    "svg.fonttype": "none",
}


#: Colours of the three actions.
ACTION_COLOURS = {"answer": "#009E73", "hedge": "#F0E442", "refuse": "#CC79A7"}


#: Markers for corpora on shared axes, so that they differ without colour too.
_CORPUS_MARKERS = ("o", "s", "D", "^", "v", "P")


@contextmanager
def figure_style():
    """The ragcal figure style (sizes for a single-column figure), as a context manager."""
    import matplotlib
    import matplotlib.pyplot as plt

    with plt.rc_context(_STYLE):
        try:
            yield
        finally:
            # The inline backend switches interactive mode on when the first figure is created; leaving
            # rc_context would switch it off again and later figures would never be shown in a notebook.
            interactive = matplotlib.is_interactive()
    matplotlib.interactive(interactive)


def save_figure(figure, stem, *, formats=("png", "svg")) -> list[Path]:
    """Save ``figure`` as ``<stem>.png`` and ``<stem>.svg`` (creating the folder).

    SVG output carries no date, so regenerating an unchanged figure gives an
    unchanged file. Each file is written atomically (temporary file and
    rename), so an interrupted run never leaves a truncated figure.
    """
    import io

    from .._io import atomic_write_bytes

    stem = Path(stem)
    paths = []
    for extension in formats:
        path = stem.with_suffix(f".{extension}")
        metadata = {"Date": None} if extension == "svg" else {"Software": None}
        buffer = io.BytesIO()
        with figure_style():
            figure.savefig(buffer, format=extension, metadata=metadata)
        paths.append(atomic_write_bytes(path, buffer.getvalue()))  # whole or not at all, like every output
    return paths


def slice_colours(slices) -> dict:
    """A colour per slice: the fixed ones for the bundled names, the palette for the rest."""
    extra = iter(_EXTRA_COLOURS * 4)
    return {name: SLICE_COLOURS.get(name) or next(extra) for name in slices}


def _new_axes(ax, size=(4.2, 2.8)):
    import matplotlib.pyplot as plt

    if ax is None:
        with figure_style():
            _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def _mark_thresholds(ax, thresholds: dict, *, orientation="vertical"):
    lines = {}
    for (name, value), style in zip(thresholds.items(), _THRESHOLD_STYLES * 3):
        if not np.isfinite(value):
            continue
        draw = ax.axvline if orientation == "vertical" else ax.axhline
        lines[name] = draw(value, color="#000000", linestyle=style, linewidth=1.1, label=f"{name}: {value:.3f}")
    return lines


def _artists(drawn):
    """Every matplotlib artist in what a display drew (dicts, lists, containers, boxplot dicts)."""
    from matplotlib.artist import Artist

    if isinstance(drawn, Artist):
        yield drawn
    elif isinstance(drawn, (str, bytes)):
        return
    elif isinstance(drawn, dict):
        for value in drawn.values():
            yield from _artists(value)
    elif isinstance(drawn, (list, tuple)) or hasattr(drawn, "__iter__"):
        for value in drawn:
            yield from _artists(value)


def _finish(display, drawn, *, name=None, kwargs=None):
    """The end of every ``plot``: ``kwargs`` restyle the display's main artists, ``name`` titles the figure.

    ``kwargs`` are matplotlib properties (``linewidth=3``, ``alpha=0.5``, ...)
    set on each artist of ``drawn`` with ``Artist.set``. With one Axes the
    name is its title (on the left); with several, the figure's title.
    """
    if kwargs:
        for artist in _artists(drawn):
            artist.set(**kwargs)
    if name is not None:
        if hasattr(display, "axes_"):
            display.figure_.suptitle(name)
        else:
            display.ax_.set_title(name, loc="left")
    return display
