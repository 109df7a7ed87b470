"""Human words for the span model's instants, wherever the report says what is missing.

Why: ``R.ready`` is the contract's name for an instant (docs/span-model.md, *Instants*), but
the person reading the report wants to know what did not happen: "the requester never
became Ready".  One mapping, so the table, the headings and the hovers say the same thing.
The bridge writes these names into ``fma.missing`` and into the ERROR status message
("incomplete: missing R.ready, D.relayed" or "incomplete: D.serving not seen").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ..model import INSTANTS

#: instant name -> what it means when that instant was never seen
MISSING_PHRASE: Mapping[str, str] = {
    "R.created": "the requester Pod was never seen created",
    "R.scheduled": "the requester was never scheduled",
    "R.started": "the requester's inference-server container never started",
    "R.ready": "the requester never became Ready",
    "L.created": "no launcher Pod was created",
    "L.scheduled": "the launcher was never scheduled",
    "L.ready": "the launcher never became Ready",
    "D.bound": "the DPC never bound a server-providing Pod",
    "D.create.start": "the DPC never called create_instance",
    "D.create.end": "the DPC's create_instance call never returned",
    "X.receipt": "the launcher never logged receiving the create request",
    "X.response": "the launcher never answered the create request",
    "V.ready": "vLLM was never seen serving, so when it came up is unknown",
    "D.serving": "vLLM was never seen serving (no query_sleeping 200 after create)",
    "D.wake.start": "the DPC never called wake",
    "D.wake.end": "the DPC's wake call never returned",
    "D.delete.start": "the DPC never called delete_instance",
    "D.delete.end": "the DPC's delete_instance call never returned",
    "D.relay.start": "the DPC never called relay_ready",
    "D.relay.end": "the DPC's relay_ready call never returned",
    "D.relayed": "the DPC never relayed readiness to the requester",
    "D.unbound": "the DPC's unbind of the earlier server was not seen",
    "D.write.start": "the DPC's Kubernetes API write logged no k8sCallStartTime",
    "D.write.end": "the DPC's Kubernetes API write was not logged",
}

# longest names first, so that "D.create.start" is never read as "D.create" + ".start"
_NAMES = "|".join(re.escape(n) for n in sorted(INSTANTS, key=len, reverse=True))
_NAME = re.compile(r"(?<![\w.])(" + _NAMES + r")(?![\w.])")
_NOT_SEEN = re.compile(r"(?<![\w.])(" + _NAMES + r") not seen")
_MISSING = re.compile(r"(.*?)\bmissing ((?:" + _NAMES + r")(?:, (?:" + _NAMES + r"))*)\s*")


def phrase(instant: str) -> str:
    """What a missing ``instant`` means; an unknown name is shown as it is, never guessed."""
    return MISSING_PHRASE.get(instant, f"{instant} was not seen")


def missing_text(instants: Iterable[str]) -> str:
    """The missing instants as one sentence fragment: "a; b; c" (in the order given)."""
    return "; ".join(phrase(i) for i in dict.fromkeys(instants))


def humanize(message: str) -> str:
    """A status message with instant names replaced by their phrases.

    ``"incomplete: missing R.ready, D.relayed"`` reads
    ``"incomplete: the requester never became Ready; the DPC never relayed ..."``, and
    ``"incomplete: D.serving not seen"`` reads ``"incomplete: vLLM was never seen serving ..."``.
    """
    m = _MISSING.fullmatch(message)
    if m:
        return m.group(1) + missing_text(x.strip() for x in m.group(2).split(","))
    message = _NOT_SEEN.sub(lambda n: phrase(n.group(1)), message)
    return _NAME.sub(lambda n: f"{n.group(1)} ({phrase(n.group(1))})", message)
