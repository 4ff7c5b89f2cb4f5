"""Each notebook's findings, told from its own numbers: one module per notebook (``n00`` ... ``n11``).

Every function takes plain numbers or dataclasses (a ``Sweep``, a ``MachineProfile``, a ratio) and returns
the Markdown of one finding, with a branch for the other outcome: "decode sat at 1.7x its floor ..." where
the numbers support the lesson, "on this machine decode did NOT come near its floor, because ..." where
they do not. No function measures, loads a model or draws; notebooks show the result with
``Markdown(narrate.n04.decode_floor(...))`` in a cell whose source is collapsed (``jupyter.source_hidden``),
so a learner reads prose, not templates, and translators find every sentence here.

Every sentence goes through ``inferlab.i18n.tr`` as a whole (its numbers are fields), so the narration comes
out in the reader's language (``il.set_language("zh")``); the Chinese is in ``locale/zh_narrate.json``.
"""

import importlib

from ..i18n import by_language


def join(items) -> str:
    """A list in running text: "a, b, c" in English, "a、b、c" in Chinese."""
    return by_language(en=", ", zh="、").join(items)


def __getattr__(name: str):
    """``narrate.n04`` works after ``from inferlab import narrate``: a notebook's module is imported on first use."""
    if len(name) == 3 and name[0] == "n" and name[1:].isdigit():
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
