"""One error as one line of text, for the one-line messages every command ends with.

Why a module: the kubeconfig loader and the OTLP exporter set-up both turn library errors
(YAML paragraphs, SDK tracebacks' last words) into a single line.
"""

from __future__ import annotations


def one_line(exc: BaseException, limit: int | None = None) -> str:
    """``str(exc)`` with its whitespace runs (newlines included) made single spaces; the
    type's name when that is empty; cut to ``limit`` characters when given."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if limit is not None and len(text) > limit:
        return text[: limit - 3] + "..."
    return text
