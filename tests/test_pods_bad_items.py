"""A malformed element of a ``List`` or array is one counted skip; every other item is read.

Why a test file of its own: the items of ``kubectl get pods -o json`` (and of ``jq``
arrays) are indented, so resynchronising at the next ``{`` at the start of a line - what
the reader does between top-level objects - used to drop every item after a bad one,
neither read nor skipped.
"""

from __future__ import annotations

import io
import json
import tracemalloc

import pytest

from fma_otel.sources.pods import iter_pod_events
from fma_otel.sources.records import SourceStats
from tests.test_pods import CHUNKS, pod


def _pods(n: int = 6) -> list[dict]:
    return [pod(f"uid-{i:02d}", rv=str(100 + i), name=f"p-{i}") for i in range(n)]


def _read(text: str, chunk: int):
    stats = SourceStats("pods")
    evs = list(iter_pod_events(io.BytesIO(text.encode()), stats, chunk))
    return [e.pod["metadata"]["uid"] for e in evs], stats


def _as_list(items: list, indent: int | None) -> str:
    return json.dumps({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {}}, indent=indent)


#: (name, how item 2's text is spoilt); each leaves the brackets balanced or ends a string
#: early, as a hand edit or a cut-and-paste would
SPOILERS = {
    "bare word before a string": lambda t: t.replace('"uid": "uid-02"', '"uid": xx"uid-02"', 1),
    "missing closing quote": lambda t: t.replace('"name": "p-2"', '"name": "p-2', 1),
    "missing comma": lambda t: t.replace('"name": "p-2",', '"name": "p-2"', 1),
    "number too long": lambda t: t.replace('"resourceVersion": "102"', '"resourceVersion": ' + "9" * 5000, 1),
    "brackets in a broken string": lambda t: t.replace('"name": "p-2"', '"name": "p-2 }]{[,', 1),
}


def _spoil(text: str, how) -> str:
    out = how(text)
    assert out != text
    return out


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("indent", [4, None], ids=["pretty", "compact"])
@pytest.mark.parametrize("name", sorted(SPOILERS))
def test_bad_list_item_is_skipped_and_the_rest_read(name, indent, chunk):
    pods = _pods()
    text = _spoil(_as_list(pods, indent), SPOILERS[name])
    uids, st = _read(text, chunk)
    assert uids == [p["metadata"]["uid"] for i, p in enumerate(pods) if i != 2]
    assert (st.read, st.understood, st.skipped) == (6, 5, 1)
    ((line, why),) = st.skipped_lines
    assert why.startswith("malformed JSON object")
    if indent:  # the line where item 2 starts
        first = text.splitlines().index("        {") + 1
        starts = [i + 1 for i, ln in enumerate(text.splitlines()) if ln == "        {"]
        assert line == starts[2] and starts[0] == first
    else:
        assert line == 1


@pytest.mark.parametrize("chunk", CHUNKS)
def test_bad_element_of_a_top_level_array(chunk):
    pods = _pods()
    text = json.dumps(pods, indent=2).replace('"uid": "uid-04"', '"uid": uid-04', 1)
    uids, st = _read(text, chunk)
    assert uids == ["uid-00", "uid-01", "uid-02", "uid-03", "uid-05"]
    assert (st.read, st.understood, st.skipped) == (6, 5, 1)


@pytest.mark.parametrize("chunk", CHUNKS)
def test_garbage_elements_and_a_list_after_them(chunk):
    """A bare word as an item, then a good List after the bad one: both fully read."""
    a = _as_list(_pods(3), 4).replace('    "items": [\n', '    "items": [\n        oops,\n', 1)
    b = _as_list([pod("uid-b", rv="7")], 4)
    uids, st = _read(a + "\n" + b + "\n", chunk)
    assert uids == ["uid-00", "uid-01", "uid-02", "uid-b"]
    assert (st.read, st.understood, st.skipped) == (5, 4, 1)


@pytest.mark.parametrize("chunk", CHUNKS)
def test_list_cut_inside_a_bad_item_ends_cleanly(chunk):
    text = _as_list(_pods(3), 4)
    cut = text.index('"uid": "uid-01"')
    uids, st = _read(text[:cut] + '"uid": xx"', chunk)
    assert uids == ["uid-00"]
    assert st.read == st.understood + st.skipped and st.skipped >= 1


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("shape", ["list", "array"])
@pytest.mark.parametrize("indent", [4, None], ids=["pretty", "compact"])
def test_a_list_cut_after_a_whole_item_is_a_counted_skip(chunk, shape, indent):
    """Cut right after an item, before the next one or the closing ``]``: the whole items
    are read, and the cut is a counted skip at the file's last line, since what followed
    is lost (compact, it passed unsaid: read 3, skipped 0)."""
    value = _as_list(_pods(3), indent) if shape == "list" else json.dumps(_pods(3), indent=indent)
    text = value[: value.rindex("]")]
    uids, st = _read(text, chunk)
    assert uids == ["uid-00", "uid-01", "uid-02"]
    assert (st.read, st.understood, st.skipped) == (4, 3, 1)
    [(line, why)] = st.skipped_lines
    assert line >= text.count("\n")  # at the end (a pretty List's reader names the last item's end)
    assert why in (
        "cut: the List or array ends without its closing ]",
        "malformed JSON object: a List item is followed by neither , nor ]",
    )


@pytest.mark.parametrize("chunk", CHUNKS)
def test_array_never_closed_falls_back_to_the_next_top_level_object(chunk):
    """A stray ``}`` where the bad item's array should close: the reader goes on to the
    next object at the start of a line, as between top-level objects."""
    bad = '{"items": [\n  {"metadata": {"uid": x}}\n}\n'
    good = json.dumps(pod("uid-after", rv="5"), indent=4)
    uids, st = _read(bad + good + "\n", chunk)
    assert uids == ["uid-after"]
    assert st.read == st.understood + st.skipped and st.skipped >= 1


@pytest.mark.slow
def test_a_long_bad_item_is_read_past_in_memory_linear_in_it():
    """An item whose string never closes, then 24 MB with no comma or bracket: one counted
    skip.  The reader holds one top-level value while it finds where that value ends, so a
    bad one is held whole (a few copies of it, never more: no quadratic growth)."""
    filler = ("x" * 99 + "\n") * 240_000  # 24 MB
    text = '{"items": [\n  {"metadata": {"uid": "never closed\n' + filler
    data = text.encode()
    del text, filler
    tracemalloc.start()
    try:
        stats = SourceStats("pods")
        evs = list(iter_pod_events(io.BytesIO(data), stats))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert evs == [] and stats.skipped >= 1
    assert peak < 5 * len(data), peak


def test_long_garbage_between_objects_is_skipped_in_a_bounded_window():
    """Garbage lines between top-level objects (no ``{`` at a line start for 24 MB): one
    counted skip, the next object read, without holding the garbage."""
    garbage = ("not json at all " * 6 + "\n") * 250_000
    data = (garbage + json.dumps(pod("uid-z", rv="9"), indent=4) + "\n").encode()
    del garbage
    tracemalloc.start()
    try:
        stats = SourceStats("pods")
        uids = [e.pod["metadata"]["uid"] for e in iter_pod_events(io.BytesIO(data), stats)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert uids == ["uid-z"] and (stats.read, stats.skipped) == (2, 1)
    assert peak < 12 << 20, peak


@pytest.mark.parametrize("chunk", CHUNKS)
def test_an_empty_element_is_a_counted_skip(chunk):
    a, b = (json.dumps(p) for p in _pods(2))
    uids, st = _read("[" + a + ", , " + b + "]\n", chunk)
    assert uids == ["uid-00", "uid-01"]
    assert st.skipped == 1 and st.read == st.understood + st.skipped


@pytest.mark.parametrize("chunk", CHUNKS)
def test_a_compact_object_broken_over_lines_is_read(chunk):
    text = json.dumps(pod("uid-a", rv="1")).replace('"uid": "uid-a", ', '"uid": "uid-a",\n', 1)
    uids, st = _read(text + "\n" + json.dumps(pod("uid-b", rv="2")) + "\n", chunk)
    assert uids == ["uid-a", "uid-b"] and st.skipped == 0


@pytest.mark.parametrize("chunk", CHUNKS)
def test_an_object_closed_early_is_kept_and_the_rest_of_it_is_garbage(chunk):
    """A stray ``}`` closes the Pod after its metadata: the Pod (metadata only) is read, as a
    streaming reader would read it, and what follows on its lines is one counted skip."""
    text = json.dumps(pod("uid-a", rv="1"), indent=4)
    cut = text.index('\n    "spec"')
    spoilt = text[:cut].rstrip(",") + "}" + text[cut:]
    uids, st = _read(spoilt + "\n" + json.dumps(pod("uid-b", rv="2"), indent=4) + "\n", chunk)
    assert uids == ["uid-a", "uid-b"]
    assert st.skipped == 1 and st.read == st.understood + st.skipped


@pytest.mark.parametrize("chunk", CHUNKS)
def test_values_run_together_on_one_line_are_each_read(chunk):
    """``}{`` (no tool of kubectl's writes it, a hand-joined file may): every value is read,
    and the line of a skip after them is right."""
    text = json.dumps(pod("uid-0"), indent=2) + json.dumps(pod("uid-1"), indent=2) + "\n"
    uids, st = _read(text + text[:-1] + " junk\n", chunk)
    assert uids == ["uid-0", "uid-1"] * 2
    assert st.skipped_lines == [(2 * text.count("\n"), "garbage between JSON objects")]


@pytest.mark.slow
def test_thousands_of_values_on_one_line_are_read_in_a_loop():
    """Neither recursion nor a copy of what is left per value: a recursion would raise here."""
    pods = [pod(f"uid-{i:04d}") for i in range(3000)]
    uids, st = _read("".join(json.dumps(p) for p in pods) + "\n", 1 << 16)
    assert uids == [p["metadata"]["uid"] for p in pods] and st.skipped == 0
