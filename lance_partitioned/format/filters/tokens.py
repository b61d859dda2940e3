"""SQL filter text -> tokens, and the keywords the parser and renderer share.

``tokenize`` splits a ``WHERE``-clause predicate into numbers, strings, binary
literals (``X'..'``), identifiers (bare, double-quoted or backtick-quoted; a
doubled quote character escapes it) and operators, skipping whitespace and
``--`` comments. ``FilterParseError`` is the one error of filter parsing: it
carries the filter text and the offset of the problem and shows a caret there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lance_partitioned.errors import FilterParseError

# --------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Token:
    kind: str  # num | str | hex | ident | qident | op | eof
    value: Any  # parsed value: str for ident/qident/op/str, text for num, bytes for hex
    start: int
    end: int

    @property
    def upper(self) -> str:
        return self.value.upper() if self.kind == "ident" else ""


def word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


_OPERATORS = sorted(
    word_set("= == != <> < <= > >= + - * / % || ( ) , . :: & | ^ << >> ~ ~* !~ !~*"),
    key=len,
    reverse=True,
)
_NUMBER_RE = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def _is_ident_start(c: str) -> bool:
    return c == "_" or c.isalpha()


def _is_ident_char(c: str) -> bool:
    return c == "_" or c == "$" or c.isalnum()


def tokenize(text: str) -> list[Token]:
    toks: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if text.startswith("--", i):  # line comment
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if c in "xX" and i + 1 < n and text[i + 1] == "'":
            j = text.find("'", i + 2)
            if j < 0:
                raise FilterParseError("unterminated binary literal", text, i)
            digits = text[i + 2 : j]
            if len(digits) % 2 or not re.fullmatch(r"[0-9a-fA-F]*", digits):
                raise FilterParseError(f"invalid hex digits in binary literal X'{digits}'", text, i)
            toks.append(Token("hex", bytes.fromhex(digits), i, j + 1))
            i = j + 1
            continue
        if c == "'" or c == '"' or c == "`":
            parts = []
            j = i + 1
            while True:
                k = text.find(c, j)
                if k < 0:
                    what = "string literal" if c == "'" else "quoted identifier"
                    raise FilterParseError(f"unterminated {what}", text, i)
                parts.append(text[j:k])
                if k + 1 < n and text[k + 1] == c:  # doubled quote = escaped quote
                    parts.append(c)
                    j = k + 2
                    continue
                break
            value = "".join(parts)
            if c == "'":
                toks.append(Token("str", value, i, k + 1))
            else:
                if not value:
                    raise FilterParseError("empty quoted identifier", text, i)
                toks.append(Token("qident", value, i, k + 1))
            i = k + 1
            continue
        if c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            m = _NUMBER_RE.match(text, i)
            assert m is not None
            end = m.end()
            if end < n and _is_ident_char(text[end]):
                raise FilterParseError(f"invalid number {text[i : end + 1]!r}", text, i)
            toks.append(Token("num", m.group(0), i, end))
            i = end
            continue
        if _is_ident_start(c):
            j = i + 1
            while j < n and _is_ident_char(text[j]):
                j += 1
            toks.append(Token("ident", text[i:j], i, j))
            i = j
            continue
        for op in _OPERATORS:
            if text.startswith(op, i):
                toks.append(Token("op", op, i, i + len(op)))
                i += len(op)
                break
        else:
            raise FilterParseError(f"unexpected character {c!r}", text, i)
    toks.append(Token("eof", "", n, n))
    return toks


RESERVED = word_set(
    "AND OR NOT IN IS NULL TRUE FALSE LIKE ILIKE BETWEEN CASE WHEN THEN ELSE END "
    "ESCAPE SIMILAR DISTINCT FROM AS SELECT WHERE UNKNOWN"
)
# words quote_identifier never leaves bare (SQL keywords a dialect may treat specially)
QUOTE_WORDS = RESERVED | word_set(
    "DATE TIME TIMESTAMP DATETIME INTERVAL CAST TRY_CAST TO FOR ALL ANY SOME EXISTS "
    "ORDER BY GROUP HAVING LIMIT JOIN ON USING UNION EXCEPT INTERSECT WITH ARRAY "
    "STRUCT ROW ROWS OVER PARTITION"
)
