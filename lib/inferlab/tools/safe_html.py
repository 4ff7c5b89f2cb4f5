"""What the HTML edition lets through: the course's own markup, never a script, never a remote resource.

Used by ``export_html``. A page of the offline edition holds three kinds of HTML:

- Markdown rendered by nbconvert, and ``text/html`` outputs stored in the notebooks: both pass through
  ``clean_html``, a ``bleach`` allowlist of the tags the course writes (prose, tables, ``<details>``,
  MathML formulas, inline styles). A tag outside it is shown as text (``<script>`` reads as
  ``<script>``, nothing runs); event handlers (``onerror=``) and ``javascript:`` links are dropped; an
  image, a style or anything else that would load from a network loses its address (``<a href>`` links
  stay: following one is the reader's choice, not the page's).
- The figures' data, embedded in a ``<script>`` element: ``script_json`` escapes ``<``, ``>`` and ``&``,
  so a label such as ``</script>`` cannot end the element.
- The page frame and plotly.js, which are the export's own (local files only, see ``offline_page``).
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

# What the course's Markdown and its library's HTML outputs use (nbconvert adds the heading anchors).
PROSE_TAGS = {"a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details",
              "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img",
              "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strong", "sub",
              "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul", "var"}
# latex2mathml's output (formulas are MathML, drawn by the browser).
MATHML_TAGS = {"math", "menclose", "merror", "mfenced", "mfrac", "mi", "mmultiscripts", "mn", "mo", "mover",
               "mpadded", "mphantom", "mprescripts", "mroot", "mrow", "ms", "mspace", "msqrt", "mstyle", "msub",
               "msubsup", "msup", "mtable", "mtd", "mtext", "mtr", "munder", "munderover", "none", "semantics",
               "annotation"}
ALLOWED_TAGS = PROSE_TAGS | MATHML_TAGS
GLOBAL_ATTRIBUTES = {"class", "id", "title", "lang", "dir", "style", "name"}
TAG_ATTRIBUTES = {"a": {"href", "rel", "target"}, "img": {"src", "alt", "width", "height"},
                  "td": {"align", "colspan", "rowspan", "valign"}, "th": {"align", "colspan", "rowspan", "valign"},
                  "table": {"border", "cellpadding", "cellspacing"}, "col": {"span"}, "colgroup": {"span"},
                  "details": {"open"}, "ol": {"start", "type", "reversed"}, "li": {"value"}}
# Attributes whose value is an address; on MathML tags none is allowed (``<mi href>`` is a link in some browsers).
URL_ATTRIBUTES = {"href", "src", "srcset", "action", "formaction", "poster", "background", "data", "xlink:href",
                  "xmlns:xlink", "codebase", "cite", "longdesc", "usemap", "ping"}
LINK_PROTOCOLS = {"http", "https", "mailto"}  # where a link may lead (bleach checks them too)
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")
_LOCAL_IMAGE_DATA = re.compile(r"^data:image/(png|jpeg|gif|webp|svg\+xml)[;,]", re.I)
_IGNORED_IN_URLS = re.compile(r"[\x00-\x20\x7f]")  # browsers skip these: "java\tscript:" is "javascript:"
# CSS that fetches or runs something: url(...), @import, IE's expression() and behavior, -moz-binding.
_CSS_LOADS = re.compile(r"url\s*\(|@import|expression\s*\(|behavior\s*:|-moz-binding|image-set\s*\(|\\", re.I)


def _scheme(url: str) -> str | None:
    """The scheme a browser sees in ``url`` (lower case; ``"//"`` for protocol-relative), or None for a path."""
    url = _IGNORED_IN_URLS.sub("", html.unescape(url))  # as the browser reads it: entities, then no tabs
    if url[:1] in ("/", "\\") and url[1:2] in ("/", "\\"):  # protocol-relative ("//", "/\\"...): the network
        return "//"
    m = _SCHEME.match(url)
    return m.group(1).lower() if m else None


def is_local(url: str) -> bool:
    """True for an address that loads nothing from a network: a relative path, an anchor, or an image's data."""
    return _scheme(url) is None or bool(_LOCAL_IMAGE_DATA.match(_IGNORED_IN_URLS.sub("", html.unescape(url))))


class _StyleCheck:
    """bleach's CSS hook: a style attribute is kept as written unless it could load or run something."""

    def sanitize_css(self, style: str) -> str:
        return "" if _CSS_LOADS.search(style) else style


def _allowed_attribute(tag: str, name: str, value: str) -> bool:
    name = name.lower()
    if name.startswith("on"):
        return False
    if tag in MATHML_TAGS:
        return name not in URL_ATTRIBUTES
    if name not in GLOBAL_ATTRIBUTES and name not in TAG_ATTRIBUTES.get(tag, ()):
        return False
    if name == "src":  # an image the page would load itself: only from the page's folder or its own data
        return is_local(value)
    if name == "href":  # a link the reader may follow: a page of the site, an anchor, or the web
        return _scheme(value) in LINK_PROTOCOLS | {None}
    return True


def clean_html(fragment: str) -> str:
    """``fragment`` with only the course's tags and attributes; no script, event handler or remote resource.

    >>> clean_html('<p onclick="x()">Hi<img src="https://example.com/a.png" alt="a"></p>')
    '<p>Hi<img alt="a"></p>'
    """
    import bleach

    if not isinstance(fragment, str):
        fragment = "".join(fragment) if isinstance(fragment, list) else str(fragment)
    # "data" passes bleach's own check; _allowed_attribute lets it through for an image's src only
    cleaner = bleach.Cleaner(tags=ALLOWED_TAGS, attributes=_allowed_attribute, protocols=[*LINK_PROTOCOLS, "data"],
                             strip=False, strip_comments=True, css_sanitizer=_StyleCheck())
    return cleaner.clean(fragment)


def script_json(value: Any) -> str:
    """``value`` as JSON that is safe inside a ``<script>`` element: ``</script>`` and ``<!--`` cannot occur.

    >>> script_json({"label": "</script>"})
    '{"label": "\\\\u003c/script\\\\u003e"}'
    """
    text = json.dumps(value)  # ensure_ascii: U+2028 and U+2029 are escaped too
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
