"""The README and the pages it sends readers to (CONTRIBUTING.md, docs/*.md), as GitHub shows them: every relative
link opens, and docs/LIBRARY.md's module table names every module of the library."""

from __future__ import annotations

import re
from pathlib import Path

from links import relative_links

ROOT = Path(__file__).resolve().parents[1]
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


def _doc_pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "README.zh.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def _github_anchors(path: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped (letters of any script kept), spaces as ``-``."""
    headings = re.findall(r"^#{1,6} (.+)$", _CODE.sub("", path.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _broken_links(pages: list[Path], root: Path = ROOT) -> list[str]:
    """Every relative link (outside code) of ``pages`` that leaves ``root``, names no file, or names a heading that a
    Markdown file does not have."""
    broken = []
    for page in pages:
        for where, resolved, anchor in relative_links(page, _CODE.sub("", page.read_text(encoding="utf-8")), root):
            if not resolved.is_relative_to(root.resolve()) or not resolved.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in _github_anchors(resolved):
                broken.append(f"{where} (no such heading)")
    return broken


def test_every_relative_link_of_the_readmes_and_docs_resolves():
    """README.md, README.zh.md, CONTRIBUTING.md and docs/*.md: each link opens a file of the repository, at a
    heading that exists (what the README sent elsewhere must stay one click away)."""
    pages = _doc_pages()
    assert len(pages) >= 7
    broken = _broken_links(pages)
    assert not broken, broken


def test_the_link_check_catches_a_missing_file_and_a_missing_heading(tmp_path):
    page = tmp_path / "page.md"  # not a link inside code, not a good link to a heading of its own or another page
    page.write_text("[a](nowhere.md) [b](#nothing-here)\n\n# A heading, its text\n\n[c](#a-heading-its-text)"
                    " `[d](gone.md)` [e](page.md#a-heading-its-text) [f](../)\n", encoding="utf-8")
    assert _broken_links([page], tmp_path) == ["page.md: nowhere.md (no such file)",
                                               "page.md: #nothing-here (no such heading)",
                                               "page.md: ../ (no such file)"]


def test_the_library_page_names_every_module():
    """docs/LIBRARY.md's module table has a row naming each module and package of lib/inferlab/ (`gate`, `charstream`,
    `progress` and `about` were once missing from it)."""
    text = (ROOT / "docs" / "LIBRARY.md").read_text(encoding="utf-8")
    table = text.split("| Module | Idea |", 1)[1].split("\n\n", 1)[0]
    named = {n.split(".")[0].rstrip("/") for row in table.splitlines() for n in re.findall(r"`([\w./*]+)`",
                                                                                          row.split(" | ")[0])}
    lib = ROOT / "lib" / "inferlab"
    modules = {p.stem for p in lib.glob("*.py")} | {p.parent.name for p in lib.glob("*/__init__.py")}
    assert not modules - named, f"docs/LIBRARY.md's module table lacks {sorted(modules - named)}"
