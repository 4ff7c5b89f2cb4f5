"""Notebook 08's operator picker: choose a profiled decode path, see its biggest operators.

The profiles are measured once (``measure.profiling.profile_paths``); picking a path only redraws
``viz.speed.top_ops_chart`` from them (no model call in the callback).

    >>> op_picker(profiling.profile_paths(m, ids, decoders))      # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import ipywidgets as w

from ..i18n import tr
from ..viz.speed import top_ops_chart
from . import show_figure, titled

if TYPE_CHECKING:
    from ..measure.profiling import StepProfile


def op_picker(profiles: Mapping[str, StepProfile] | Sequence[StepProfile]) -> w.VBox:
    """A dropdown over the profiled paths and the chart of the chosen one's biggest operators (the first shown).

    Args:
        profiles: name -> ``StepProfile`` (``profile_paths``) or a list of them; each path is listed by its label.
    """
    chosen = list(profiles.values()) if isinstance(profiles, Mapping) else list(profiles)
    if not chosen or not all(hasattr(p, "top_ops") and hasattr(p, "label") for p in chosen):
        raise ValueError(tr("profiles must be StepProfiles, e.g. inferlab.measure.profiling.profile_paths(model, ids, "
                            "decoders); got {got!r}", got=type(profiles).__name__))
    by_label = {p.label: p for p in chosen}
    pick = w.Dropdown(options=list(by_label), description=tr("path"))
    out = w.Output()

    def redraw(_=None) -> None:
        show_figure(out, top_ops_chart(by_label[pick.value]), tr("biggest operators of {label}", label=pick.value))

    pick.observe(redraw, names="value")
    redraw()
    return titled(w.VBox([pick, out]), tr("Operator picker ({n} profiled paths): run the cell to choose a path",
                                          n=len(by_label)))
