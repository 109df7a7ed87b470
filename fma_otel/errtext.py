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


def safe_url(url: str) -> str:
    """``url`` as an error message may show it: its user part (``user:password@``, or a
    token alone) and its whole query are ``<redacted>``.  Why: a collector's or Jaeger's URL may carry credentials
    (``https://user:token@host``, ``?api_key=...``), and a one-line error goes to logs and
    CI output that leave the cluster; the host, port and path are what a reader needs."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority, slash, path = rest.partition("/")
    _user, at, host = authority.rpartition("@")
    if at:
        authority = f"<redacted>@{host}"
    path, q, _query = path.partition("?")
    if not slash and not q and "?" in authority:  # host?query, no path
        authority, q, _query = authority.partition("?")
    out = f"{scheme}{sep}{authority}{slash}{path}"
    return f"{out}?<redacted>" if q else out
