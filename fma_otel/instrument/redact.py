"""Redaction by rule for everything the wrappers copy into spans.

Why rules and not a list of secret-looking names: a secret can sit under any name (an
annotation, ``--hf-overrides {"token": ...}``, userinfo in ``--model https://u:p@...``, a
``?api_key=`` query), and a list only catches the names someone thought of.  So:

* **vLLM options**: every option value is ``<redacted>`` except known-harmless ones:
  valueless flags; numbers, sizes and ``true``/``false``/``auto``; and the values of a
  few flags that name things (``--model``, ``--served-model-name``, ``--tokenizer``,
  ``--host``, ``--dtype``), kept with any URL userinfo removed and query values redacted
  (``--dtype`` only when it is one of the few type names).  Any other flag whose *name*
  says key/token/secret/password/credential/auth is always redacted: the allowlist is
  exact names and wins (``--tokenizer`` names a model repo, not a token), while
  ``--tokenizer-secret`` or ``--hf-token`` are no names on it.  A token is a flag only
  when it starts with ``--`` or is a short ``-xyz``: a long ``-token`` is a value that
  begins with a dash, redacted like any other.
* **Config structures** (``model_dump()`` of the launcher's config): every ``env_vars``
  value, every annotation value except ``isc-name`` and numbers, every other string
  except numbers/sizes and ``gpu_uuids``.
* **URLs anywhere**: userinfo removed (also a scheme-less ``user:password@host`` and a
  URL in quotes), every query value redacted.
* **Exception texts** (status message, ``exception.message``/``exception.stacktrace``):
  every known secret value of the instance (the values redacted above) is replaced, and
  the URL rule is applied to the text.
"""

from __future__ import annotations

import json
import re
import traceback
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from opentelemetry.trace import Span

REDACTED = "<redacted>"

#: Flags whose value names something and is kept (URL-cleaned): the small allowlist.
NAMING_FLAGS = frozenset({"--model", "--served-model-name", "--tokenizer", "--host", "--dtype"})
#: ``--dtype`` names one of a few types: any other value is redacted like an unknown one.
DTYPES = frozenset({"auto", "half", "float16", "bfloat16", "float", "float32", "fp16", "bf16", "fp32"})
#: A single-dash flag is short (``-tp``, ``-O3``, ``-dcp``); a longer ``-token`` is a value
#: that begins with a dash (argparse takes it for an unknown flag, so vLLM would refuse it
#: too), never a name to keep.
_SHORT_FLAG_MAX = 4
#: Config keys / annotation names kept as they are (URL-cleaned).
KEPT_KEYS = frozenset({"gpu_uuids", "isc-name", "inference-port", "instance_id", "status"})

_SECRET_NAME = re.compile(r"key|token|secret|passw|credential|auth", re.I)
_HARMLESS = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?:[KMGTPkmgtp]i?[Bb]?)?|true|false|auto|none", re.I)
_NUMBER_TOKEN = re.compile(r"-\d")
#: ``user:password@`` at the start of a value with no scheme (``--host u:p@10.0.0.1``).
_BARE_USERINFO = re.compile(r"^['\"]?[^/\s@:'\"]*:[^/\s@]*@")
#: ``scheme://userinfo@`` in free text.
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@?#'\"]*@")
#: ``?k=v`` / ``&k=v`` / ``?v`` in free text: the value up to the next separator.
_QUERY_ITEM = re.compile(r"([?&])([^=&\s#'\"]*)(=?)([^&\s#'\"]*)")
#: an HTTP authorization scheme and its credential, in free text (``_auth_scheme``)
_AUTH_SCHEME_RULE = r"\b(Bearer|Basic|Token)\s+(?!<redacted>)[A-Za-z0-9._~+/=:-]+"
_AUTH_SCHEME: re.Pattern[str] | None = None
_MIN_SECRET = 4  # shorter known values would garble the text they are replaced in


def harmless(value: str) -> bool:
    """A number, a size, or ``true``/``false``/``auto``/``none``: never a secret."""
    return _HARMLESS.fullmatch(value.strip()) is not None


def redact_query(query: str) -> str:
    """Every query value redacted, keys kept: ``a=1&b`` -> ``a=<redacted>&<redacted>``."""
    if not query:
        return query
    out = []
    for item in query.split("&"):
        key, eq, _ = item.partition("=")
        out.append(f"{key}={REDACTED}" if eq else (REDACTED if item else item))
    return "&".join(out)


def redact_url(url: str) -> str:
    """``url`` without userinfo and with every query value redacted (fragment dropped)."""
    if "@" in url and "://" not in url:
        url = _BARE_USERINFO.sub(lambda m: m.group(0)[:1] if m.group(0)[:1] in "'\"" else "", url)
    if "://" not in url and "?" not in url:
        return url
    try:
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")[2]
        # then the free-text rule: a URL in quotes is no URL to urlsplit (it keeps it whole)
        return scrub_urls(urlunsplit((parts.scheme, netloc, parts.path, redact_query(parts.query), "")))
    except ValueError:
        return scrub_urls(url)


def scrub_urls(text: str) -> str:
    """The URL rule on free text: userinfo removed, query values redacted."""
    if "@" in text:
        text = _USERINFO.sub(r"\1", text)
    if "?" in text:
        text = _QUERY_ITEM.sub(_query_sub, text)
    return text


def _query_sub(m: re.Match[str]) -> str:
    sep, key, eq, value = m.groups()
    if eq:
        return f"{sep}{key}={REDACTED}"
    return f"{sep}{REDACTED}" if key else m.group(0)


def _userinfo(value: str) -> list[str]:
    """The userinfo and query values of a URL-ish ``value`` (what ``redact_url`` removes)."""
    found = []
    if "@" in value:
        found += [m.group(0)[len(m.group(1)) : -1] for m in _USERINFO.finditer(value)]
        found += [m.group(0).lstrip("'\"")[:-1] for m in _BARE_USERINFO.finditer(value) if "://" not in value]
        found += [p for u in list(found) for p in u.split(":") if p]
    if "?" in value:
        found += [m.group(4) or m.group(2) for m in _QUERY_ITEM.finditer(value)]
    return found


def url_secrets(url: str) -> list[str]:
    """What ``redact_url`` removes from ``url`` (to scrub it from exception texts too)."""
    return known_secrets(_userinfo(url))


def _is_flag(token: str) -> bool:
    if not token.startswith("-") or len(token) < 2 or _NUMBER_TOKEN.match(token) is not None:
        return False
    return token.startswith("--") or len(token.partition("=")[0]) <= _SHORT_FLAG_MAX


def redact_options(options: str) -> tuple[str, list[str]]:
    """(the options with every non-harmless value redacted, the values redacted).

    Tokens are split on whitespace (the DPC joins options with spaces); the value of a
    flag is every token up to the next flag, so a JSON value with spaces is one value.
    """
    toks = options.split()
    out: list[str] = []
    secrets: list[str] = []
    i = 0
    while i < len(toks):
        tok = toks[i]
        if not _is_flag(tok):  # a value before any flag (``serve <model>``): a name
            out.append(redact_url(tok))
            secrets += _userinfo(tok)
            i += 1
            continue
        name, eq, inline = tok.partition("=")
        j = i + 1
        while j < len(toks) and not _is_flag(toks[j]):
            j += 1
        values = ([inline] if eq else []) + toks[i + 1 : j]
        i = j
        if not values:
            out.append(tok)
            continue
        value = " ".join(values)
        if name == "--dtype" and value.lower() not in DTYPES:
            kept = REDACTED
            secrets.append(value)
        elif name in NAMING_FLAGS:  # exact names, so the secret-name rule cannot catch them
            kept = " ".join(redact_url(v) for v in values)
            secrets += [s for v in values for s in _userinfo(v)]
        elif _SECRET_NAME.search(name) is None and harmless(value):
            kept = value
        else:
            kept = REDACTED
            secrets.append(value)
        out.append(f"{name}={kept}" if eq else f"{name} {kept}")
    return " ".join(out), secrets


def redact_config(value: Any, key: str = "") -> tuple[Any, list[str]]:
    """A redacted copy of a config-like structure, and the secret values it removed."""
    secrets: list[str] = []

    def walk(v: Any, k: str, env: bool) -> Any:
        if isinstance(v, Mapping):
            return {
                ck: walk(cv, str(ck), env or ck in ("env_vars", "env", "environment")) for ck, cv in v.items()
            }
        if isinstance(v, (list, tuple)):
            return [walk(x, k, env) for x in v]
        if not isinstance(v, str):
            return v
        if env:
            secrets.append(v)
            return REDACTED
        if k == "options":
            red, found = redact_options(v)
            secrets.extend(found)
            return red
        if (k in KEPT_KEYS and _SECRET_NAME.search(k) is None) or harmless(v):
            secrets.extend(_userinfo(v))
            return redact_url(v)
        secrets.append(v)
        return REDACTED

    return walk(value, key, False), secrets


def known_secrets(values: Iterable[str]) -> list[str]:
    """The values worth looking for in a text: long enough, JSON leaves too, longest first."""
    found: set[str] = set()
    for v in values:
        if not isinstance(v, str):
            continue
        v = v.strip()
        found.add(v)
        bare = v.strip("'\"")
        if bare[:1] in "{[":
            try:
                found.update(_json_leaves(json.loads(bare)))
            except ValueError:
                pass
    return sorted((s for s in found if len(s) >= _MIN_SECRET), key=len, reverse=True)


def _json_leaves(v: Any) -> list[str]:
    if isinstance(v, dict):
        return [s for x in v.values() for s in _json_leaves(x)]
    if isinstance(v, list):
        return [s for x in v for s in _json_leaves(x)]
    return [str(v)] if isinstance(v, (str, int, float)) and not isinstance(v, bool) else []


def _auth_scheme() -> re.Pattern[str]:
    """``_AUTH_SCHEME_RULE``, compiled at its first use (an error text to scrub), not at
    import: a character range matched ignoring case makes ``re`` build its Unicode case
    tables, about 190 KiB of anonymous memory that the launcher would otherwise carry
    into every ``fork()`` of a vLLM instance for a rule that runs only on errors."""
    global _AUTH_SCHEME
    if _AUTH_SCHEME is None:
        _AUTH_SCHEME = re.compile(_AUTH_SCHEME_RULE, re.I)
    return _AUTH_SCHEME


def scrub_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every known secret replaced, the URL rule applied, and the credential
    of an HTTP authorization scheme (``Bearer <token>``, ``Basic <b64>``) redacted."""
    for s in secrets:
        if s in text:
            text = text.replace(s, REDACTED)
    low = text.lower()  # the scheme is case-insensitive, as the rule is (RFC 9110)
    if "bearer" in low or "basic" in low or "token" in low:
        text = _auth_scheme().sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    return scrub_urls(text)


def record_exception(span: Span, exc: BaseException, secrets: Iterable[str] = ()) -> None:
    """``span.record_exception(exc)`` with the message and stack trace scrubbed.

    The SDK's ``record_exception`` copies ``str(exc)`` and the formatted traceback as they
    are; an exception that embeds the instance's config would carry its secrets out.
    """
    found = list(secrets)
    exc_type = type(exc)
    module = exc_type.__module__
    qualname = exc_type.__qualname__
    span.add_event(
        "exception",
        {
            "exception.type": qualname if module in ("builtins", "__main__") else f"{module}.{qualname}",
            "exception.message": scrub_text(str(exc), found),
            "exception.stacktrace": scrub_text("".join(traceback.format_exception(exc)), found),
            "exception.escaped": "False",
        },
    )


def status_message(exc: BaseException, secrets: Iterable[str] = (), limit: int = 300) -> str:
    """``"<Type>: <message>"`` scrubbed, then cut to ``limit`` characters."""
    return scrub_text(f"{type(exc).__name__}: {exc}", list(secrets))[:limit]
