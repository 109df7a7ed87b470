"""Human words for missing instants: one mapping, used for every instant of the model."""

from __future__ import annotations

from fma_otel.model import INSTANTS
from fma_otel.report.words import MISSING_PHRASE, humanize, missing_text, phrase


def test_every_instant_of_the_model_has_a_phrase():
    assert set(MISSING_PHRASE) == set(INSTANTS)
    assert len(set(MISSING_PHRASE.values())) == len(MISSING_PHRASE)  # no two read the same
    assert phrase("R.ready") == "the requester never became Ready"
    assert phrase("Q.odd") == "Q.odd was not seen"  # never guessed


def test_the_bridges_status_messages_read_as_words():
    assert humanize("incomplete: missing R.ready, D.relayed") == (
        "incomplete: the requester never became Ready; the DPC never relayed readiness to the requester"
    )
    assert humanize("incomplete: D.serving not seen") == (
        "incomplete: vLLM was never seen serving (no query_sleeping 200 after create)"
    )
    # longest name first: D.create.start is not D.create + ".start"
    assert (
        humanize("odd D.create.start here")
        == "odd D.create.start (the DPC never called create_instance) here"
    )
    assert humanize("nothing R.readyx here") == "nothing R.readyx here"


def test_missing_text_keeps_order_and_drops_repeats():
    assert missing_text(["L.ready", "R.ready", "L.ready"]) == (
        "the launcher never became Ready; the requester never became Ready"
    )
    assert missing_text([]) == ""
