"""Syntax highlighting done once, in Python: pages carry highlighted HTML and one stylesheet."""

from __future__ import annotations

from functools import cache

from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer, JsonLexer, PythonLexer, TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

_FORMATTER = HtmlFormatter(nowrap=False, cssclass="hl")


@cache
def stylesheet() -> str:
    return str(_FORMATTER.get_style_defs(".hl"))


def code(text: str, filename: str | None = None, language: str | None = None) -> Markup:
    lexer = {"python": PythonLexer(), "diff": DiffLexer(), "json": JsonLexer()}.get(language or "")
    if lexer is None and filename:
        try:
            lexer = get_lexer_for_filename(filename, stripnl=False)
        except ClassNotFound:
            lexer = None
    return Markup(highlight(text, lexer or TextLexer(), _FORMATTER))  # pygments escapes the text itself
