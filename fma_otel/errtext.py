"""One error as one line of text, for the one-line messages every command ends with.

Why a module: the kubeconfig loader and the OTLP exporter set-up both turn library errors
(YAML paragraphs, SDK tracebacks' last words) into a single line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qsl


def one_line(exc: BaseException, limit: int | None = None) -> str:
    """``str(exc)`` with its whitespace runs (newlines included) made single spaces; the
    type's name when that is empty; cut to ``limit`` characters when given."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if limit is not None and len(text) > limit:
        return text[: limit - 3] + "..."
    return text


def user_part(url: str) -> str | None:
    """The user part of ``url`` (``user:password``, or a token), ``None`` when it has none.

    It runs to the last ``@`` before the query or fragment, not to the first ``/``: a
    password may hold an unescaped ``/`` (base64 tokens do), and cut there it would be shown
    whole.  (A path holding ``@`` is then taken for a user part: shown less, never more.)"""
    rest = url.partition("://")[2] if "://" in url else url
    head = rest.split("?", 1)[0].split("#", 1)[0]
    at = head.rfind("@")
    return head[:at] if at >= 0 else None


def safe_url(url: str) -> str:
    """``url`` as an error message may show it: its user part (:func:`user_part`) and its
    whole query are ``<redacted>``.  Why: a collector's or Jaeger's URL may carry
    credentials (``https://user:token@host``, ``?api_key=...``), and a one-line error goes
    to logs and CI output that leave the cluster; the host, port and path are what a reader
    needs."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    user = user_part(rest)
    if user is not None:
        rest = rest[len(user) + 1 :]
    authority, slash, path = rest.partition("/")
    if user is not None:
        authority = f"<redacted>@{authority}"
    path, q, _query = path.partition("?")
    if not slash and not q and "?" in authority:  # host?query, no path
        authority, q, _query = authority.partition("?")
    out = f"{scheme}{sep}{authority}{slash}{path}"
    return f"{out}?<redacted>" if q else out


def hide_credentials(text: str, url: str, also: Iterable[str] = ()) -> str:
    """``text`` (an error detail, a library's words about ``url``) without the credentials
    it may quote: ``url`` becomes its :func:`safe_url` form, and its user part, each piece
    of it (a parser quotes the bit of a password it took for a port), its query and the
    query's values, and ``also``, are ``<redacted>`` wherever they appear (gRPC's resolver
    quotes ``user:pw@host``).  Texts under three characters are left: they would blank out
    unrelated words."""
    text = text.replace(url, safe_url(url))
    user = user_part(url) or ""
    query = url.partition("?")[2].partition("#")[0]
    secrets = {user, query, *re.split(r"[:/@]", user), *also}
    secrets.update(v for _k, v in parse_qsl(query, keep_blank_values=True))
    for secret in sorted((t for t in secrets if len(t) >= 3), key=len, reverse=True):
        text = text.replace(secret, "<redacted>")
    return text
