"""Property tests of the DPC log's block search against plain per-line rules.

Why: the block search (:class:`Prefilter` over a block, with the cut and corrupt searches
around it) is written for speed; what it must find is simple to say line by line.  Here
that rule is said again the plain way (:func:`_wanted`), and random logs of wanted,
unwanted, narrowed, ``list_instances``, cut, NUL/invalid-UTF-8 and continuation lines are
read both ways: the same lines, records and counts, or the search lost or invented one.
"""

from __future__ import annotations

import io
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fma_otel.lines as lines_mod
from fma_otel.sources.klog import Prefilter, go_quote, iter_klog
from fma_otel.sources.records import SourceStats

HTTP = "HTTP call done"
ENQ = "Enqueuing launcher reference due to notification of update"
MESSAGES = frozenset({HTTP, ENQ, "Created vLLM instance", 'Odd "quoted" \\ message'})
MANAGER = 'lastWrite={"Manager":"'
CONTAINS = {
    HTTP: ("purpose", ("create_instance", "list_instances", "wake"), {"list_instances": "launcherPod"}),
    ENQ: (MANAGER, ("kube-scheduler",)),
}
PROPS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

HEAD = "I0629 14:00:01.000000       1 controller.go:12] "
PURPOSES = ["create_instance", "list_instances", "wake", "sleep", "get_instance_state"]


@st.composite
def _line(draw: st.DrawFn) -> bytes:
    """One line of a DPC-like log (no line end)."""
    kind = draw(st.sampled_from(["http", "enq", "plain", "other", "cont", "junk"]))
    if kind == "cont":
        return draw(st.sampled_from([b"\t<html>", b" > next=1", b"\tvalue] tail"]))
    if kind == "junk":
        return draw(st.binary(max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b))
    if kind == "http":
        msg = HTTP
        fields = [f'launcherPod="l-{draw(st.integers(0, 3))}"'] if draw(st.booleans()) else []
        for _ in range(draw(st.integers(0, 2))):
            fields.append(f'purpose="{draw(st.sampled_from(PURPOSES))}"')
        draw(st.randoms()).shuffle(fields)
    elif kind == "enq":
        msg = ENQ
        who = draw(st.sampled_from(["kube-scheduler", "kubelet", "OpenAPI-Generator"]))
        fields = [f'launcherPod="l-1" {MANAGER}{who}","Time":"2026-06-29T14:00:00Z"}}']
    elif kind == "plain":
        msg = draw(st.sampled_from(sorted(MESSAGES - {HTTP, ENQ})))
        fields = ['pod="p"']
    else:
        msg = draw(st.sampled_from(["Something else", "HTTP call", "Created vLLM instance!"]))
        fields = [f'note="] {go_quote(HTTP)}"'] if draw(st.booleans()) else []
    line = (HEAD + go_quote(msg) + "".join(" " + f for f in fields)).encode()
    if draw(st.booleans()):
        line = b"2026-06-29T14:00:01.000000000Z " + line  # kubectl logs --timestamps
    if draw(st.booleans()):
        line = line[: draw(st.integers(0, len(line)))]  # cut anywhere, header included
    if draw(st.integers(0, 5)) == 0:
        at = draw(st.integers(0, len(line)))
        line = line[:at] + draw(st.sampled_from([b"\x00", b"\xff", "\u00e9".encode()])) + line[at:]
    return line


def _wanted(line: bytes, seen: set[bytes]) -> bool:
    """The prefilter's rule for one line (its end stripped), said plainly: some ``] "``
    is followed by a wanted message, whose narrowing the rest of the line passes; of the
    lines with a ``first_by`` value, only the first per other field's value."""
    p = line.find(b'] "')
    while p >= 0:
        for msg in MESSAGES:
            needle = b'] "' + go_quote(msg).encode()[1:]
            if not line.startswith(needle, p):
                continue
            rest = line[p + len(needle) :]
            if msg in CONTAINS:
                field, values, *first_by = CONTAINS[msg]
                key = (" " + field + ("" if field.endswith('"') else '="')).encode()
                copies = [i for i in range(len(rest)) if rest.startswith(key, i)]
                holds = any(key + v.encode() + b'"' in rest for v in values)
                whole = any(b'"' in rest[i + len(key) :] for i in copies)
                if not holds and whole:
                    continue  # a later ``] "`` on the line may still be wanted
                for value, other in (first_by[0] if first_by else {}).items():
                    v = key + value.encode() + b'"'
                    if v not in rest:
                        continue
                    k = (" " + other + '="').encode()
                    f = rest.find(k)
                    if f < 0 or b'"' not in rest[f + len(k) :]:
                        return True  # the field missing or cut: a line to report
                    id_ = v + rest[f + len(k) :].split(b'"')[0]
                    if id_ in seen:
                        return False  # the rest of the line is not looked at
                    seen.add(id_)
                    return True
            return True
        p = line.find(b'] "', p + 1)
    return False


@pytest.mark.slow
@PROPS
@given(st.lists(_line(), max_size=40))
def test_the_block_search_finds_the_lines_the_plain_rule_wants(lines: list[bytes]) -> None:
    """Over one block, :meth:`Prefilter.find` gives, in order, exactly the lines the plain
    rule wants (the ``first_by`` memory included), and :meth:`Prefilter.wanted` agrees."""
    block = b"".join(ln + b"\n" for ln in lines)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln) + 1)
    seen: set[bytes] = set()
    expected = [i for i, ln in enumerate(lines) if _wanted(ln, seen)]
    pf = Prefilter(MESSAGES, CONTAINS)
    found, pos = [], 0
    while (hit := pf.find(block, pos, len(block))) is not None:
        assert hit[0] in starts and pf.passed == block[hit[0] : hit[1]]
        found.append(starts.index(hit[0]))
        pos = hit[1]
    assert found == expected
    one = Prefilter(MESSAGES, CONTAINS)
    assert [i for i, ln in enumerate(lines) if one.wanted(ln + b"\n")] == expected


@pytest.mark.slow
@PROPS
@given(st.lists(_line(), max_size=40), st.sampled_from([1 << 20, 512, 64, 7]))
def test_a_file_read_in_blocks_gives_what_a_line_by_line_read_gives(lines: list[bytes], block: int) -> None:
    """Read as a file (the block searches: prefilter, cut lines, corrupt bytes) and as a
    list of lines (every line tested alone): the same records, counts and reasons.  The
    whole-file block comes first (Hypothesis favours it): smaller blocks than a line read
    that line whole, past the block search."""
    raw = [ln + b"\n" for ln in lines]
    by_line = SourceStats("dpc")
    want = list(iter_klog(raw, by_line, messages=MESSAGES, contains=CONTAINS))
    as_file = SourceStats("dpc")
    with mock.patch.object(lines_mod, "BLOCK_BYTES", block):
        got = list(iter_klog(io.BytesIO(b"".join(raw)), as_file, messages=MESSAGES, contains=CONTAINS))
    assert got == want
    assert as_file == by_line


@pytest.mark.parametrize("block", [8, 1 << 20])
def test_a_line_cut_in_its_header_at_a_blocks_start_is_skipped_as_line_by_line(block: int) -> None:
    """The cut-header search looks for the line end before a line: the first line of a
    file (or of a block) has none in its block, and was passed over as ignored when read
    from a file while a stream skipped it with a reason."""
    raw = [b"I0629 \n", b'I0629 14:00:01.000000       1 c.go:1] "x"\n', b"I0629 14:0\n"]
    by_line = SourceStats("dpc")
    list(iter_klog(raw, by_line, messages=MESSAGES, contains=CONTAINS))
    as_file = SourceStats("dpc")
    with mock.patch.object(lines_mod, "BLOCK_BYTES", block):
        list(iter_klog(io.BytesIO(b"".join(raw)), as_file, messages=MESSAGES, contains=CONTAINS))
    reason = "line cut inside its header or message"
    assert as_file.skipped_lines == by_line.skipped_lines == [(1, reason), (3, reason)]
    assert (as_file.read, as_file.ignored, as_file.skipped) == (3, 1, 2)
