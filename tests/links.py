"""Relative links in Markdown text (``[text](href)`` and ``href="..."``), shared by the link tests of the docs
(``test_docs``) and of the notebooks (``test_repo``); each test keeps its own rule for what must exist."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

MD_LINK = re.compile(r"\]\(([^)\s]+)\)|href=\"([^\"]+)\"")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def relative_links(page: Path, text: str, root: Path) -> Iterator[tuple[str, Path, str]]:
    """``(where, resolved, anchor)`` for each relative link in ``text`` (read from ``page``): ``where`` names the
    page (relative to ``root``) and the link as written, ``resolved`` the file it opens (``page`` itself for a bare
    ``#anchor``), ``anchor`` the part after ``#`` (or empty)."""
    for m in MD_LINK.finditer(text):
        href = m.group(1) or m.group(2)
        if EXTERNAL.match(href):
            continue
        target, _, anchor = href.partition("#")
        yield f"{page.relative_to(root)}: {href}", (page.parent / target).resolve() if target else page, anchor
