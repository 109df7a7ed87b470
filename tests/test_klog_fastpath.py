"""The bulk scan of ``iter_klog`` against the per-line parser, its reference.

Why: the bulk path (a binary file object plus a ``messages`` prefilter) decides in C which
lines the prefilter would ignore and only counts them.  It must be invisible: the same
records, the same line numbers, the same read/understood/skipped counts and skip reasons,
and the same counts at every yield.  The per-line path over the same bytes (an iterator of
lines has no ``read``, so it never takes the bulk path) is the oracle for every input here,
good or bad; tiny block sizes put block boundaries everywhere, inside blocks and lines.
"""

from __future__ import annotations

import io
import random
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fma_otel.facts import WANTED_CONTAINS, WANTED_MESSAGES
from fma_otel.sources import klog
from fma_otel.sources.blocks import Plain, bulk_items, bulk_readable
from fma_otel.sources.klog import iter_klog
from fma_otel.sources.records import SourceStats
from tests.support.synth import synth_capture, write_capture

from .fuzz._mutate import mutated_file, sample_lines

DPC = sample_lines("dpc.log")
CONTAINS = {"HTTP call done": ['purpose="create_instance"', 'purpose="wake"', 'purpose="query_sleeping"']}
PREFILTERS = [
    {"messages": WANTED_MESSAGES},
    {"messages": WANTED_MESSAGES, "contains": WANTED_CONTAINS},
    {"messages": WANTED_MESSAGES, "contains": CONTAINS},
    {"messages": frozenset()},  # everything well-formed is ignored
    {"messages": frozenset({"HTTP call done"}), "contains": {"HTTP call done": []}},  # nothing
    {"messages": frozenset({"HTTP call done", "m"}), "contains": {"HTTP call done": ["", "x"]}},
    {"messages": frozenset({'say "hi"', "Fetched tail of log of instance"})},
]
PREFIX = b"2026-09-03T19:49:04.3398479Z "


def _trace(src: object, **kw: object) -> tuple[list[tuple[object, int, int, int]], tuple]:
    """Every record with the counts as they stand when it is yielded, and the final stats."""
    st_ = SourceStats("t")
    out = [(r, st_.read, st_.understood, st_.skipped) for r in iter_klog(src, st_, **kw)]  # type: ignore[arg-type]
    return out, (st_.read, st_.understood, st_.skipped, st_.skipped_lines)


def _lines(data: bytes) -> list[bytes]:
    """The lines a binary file iterates, as a list: no ``read``, so the per-line path.
    (Not ``iter(BytesIO)``: a BytesIO is its own iterator and would take the bulk path.)"""
    return list(io.BytesIO(data))


def check(
    data: bytes, block_sizes: tuple[int, ...] = (1, 3, 64, 4096, klog.BLOCK_SIZE), **kw: object
) -> list:
    """Assert the bulk path equals the per-line path over ``data``; return the records."""
    want = _trace(_lines(data), **kw)
    for bs in block_sizes:
        got = _trace(io.BytesIO(data), block_size=bs, **kw)
        assert got == want, f"block_size={bs}"
    return [r for r, *_ in want[0]]


def test_bulk_path_is_taken_and_counts_runs_without_parsing():
    """The point of the bulk path: the sample's ignored lines arrive as counts, not lines."""
    wanted, need = klog._prefilter(WANTED_MESSAGES, WANTED_CONTAINS)
    plan = klog._bulk_plan(wanted, need)
    items = list(bulk_items(io.BytesIO(b"".join(DPC)).read, 1 << 20, plan.run, plan.subs, klog._may_block))
    plain = sum(i for i in items if isinstance(i, Plain))
    lines = [i for i in items if not isinstance(i, Plain)]
    assert plain + len(lines) == len(DPC)
    assert plain > 0.6 * len(DPC)
    assert bulk_readable(io.BytesIO()) and bulk_readable(io.BufferedReader(io.BytesIO()))
    assert not bulk_readable(io.StringIO()) and not bulk_readable(iter(DPC))
    assert not bulk_readable(_lines(b"x\n"))


@pytest.mark.parametrize("kw", PREFILTERS)
def test_sample_capture(kw):
    recs = check(b"".join(DPC), **kw)
    if kw["messages"] == WANTED_MESSAGES:
        assert recs


@pytest.mark.parametrize("kw", PREFILTERS[:3])
def test_sample_with_timestamps_prefix_and_crlf(kw):
    prefixed = b"".join(PREFIX + ln for ln in DPC)
    assert check(prefixed, **kw) or kw["messages"] != WANTED_MESSAGES
    check(b"".join(ln.replace(b"\n", b"\r\n") for ln in DPC), **kw)
    check(b"".join(DPC).rstrip(b"\n"), **kw)  # no newline at the end


def test_synthesized_noisy_capture(tmp_path: Path):
    write_capture(synth_capture(n=8, seed=3, noise=True), tmp_path / "a")
    write_capture(synth_capture(n=4, seed=5, noise=True), tmp_path / "b", timestamps=True)
    for d in ("a", "b"):
        data = (tmp_path / d / "dpc.log").read_bytes()
        for kw in PREFILTERS[:3]:
            assert check(data, block_sizes=(7, 512, klog.BLOCK_SIZE), **kw)


HDR = b"I0629 14:00:00.000000       1 a.go:1] "
NASTY = [
    b"",
    b"\n",
    b"\n\n\r\n",
    b"garbage\n",
    b"\xff\xfe\x00binary\n",
    b"I0629 14:00:00.000000\n",  # truncated header
    b"I0629 14:00:00.000000       1 a.go:1]",  # no newline, cut at the bracket
    HDR + b'"Bound server-providing Pod"',  # wanted, exactly 30+ bytes, no newline
    b"I0629 14:00:00.000000 1 a:1] x",  # shortest header, unstructured, 30 bytes
    b"I0629 14:00:00.000000 1 a:1] x\n",
    b"I0629 14:00:00.000000 1 a:1] x\r\n",
    b"I0629 14:00:00.000000 1 a:1] xy\r\n",
    b"I0629 14:00:00.000000 1 a:1] \n",
    HDR + b'"cut in the mess\n',
    HDR + b'"esc \\" q" k=1\n',
    HDR + b'"Bound server-providing Pod" k=1\n',
    HDR + b'"Bound server-providing Pod\\" k=1\n',
    HDR + b'"other" k=1 note="] \\"Bound server-providing Pod\\""\n',
    b"I0629 14:00:00.000000 1 x] y] " + b'"Bound server-providing Pod"\n',
    b"I0629 14:00:00.000000       1 a]b.go:1] " + b'"Bound server-providing Pod"\n',
    HDR + b'"HTTP call done" purpose="wake"\n',
    HDR + b'"HTTP call done" purpose="list"\n',
    HDR + b'"HTTP call done" x=<\n',
    HDR + b'"other" x=<\n',
    HDR + b'"other" x=<\r\n',
    HDR + b'"other" x=<\r\r\n',
    HDR + b'"other" x<\n',  # ends with "<" but opens no block
    HDR + b'"other" x=< \n',
    b" space, not a continuation\n",
    b"\tcontinued\n",
    b'\tcontinued purpose="wake"\n',
    b" > y=1\n",
    b" > y=<\n",
    b" >\n",
    PREFIX + b"\tprefixed continuation\n",
    PREFIX + b" > z=2\n",
    PREFIX + HDR + b'"other" a=<\n',
    PREFIX + b"\n",
    b"2026-09-03T19:49:04Z\n",  # only a prefix
    b"2026-13-03T19:49:04Z " + HDR + b'"other"\n',  # bad prefix, ignored by the prefilter
    b"9 " + HDR + b'"other"\n',
    b"9\t" + HDR + b'"other"\n',
    b"X0629 14:00:00.000000       1 a.go:1] " + b'"other"\n',
    b"I0629 14:00:00.000000       1 a.go:1] " + b'"Created vLLM instance" a=<\n',
    b"W0629 14:35:43.000000       1 reflector.go:561] failed to list *v1.Pod: timeout\n",
    HDR + '"caf\u00e9 \u00fc" k=1\n'.encode(),
    HDR + b'"other" raw="\xff\xfe" k=<\n',
]


def test_hand_made_nasty_lines_one_by_one_and_shuffled():
    for kw in PREFILTERS:
        for ln in NASTY:
            check(ln, **kw)
            check(ln + b"\tafter\n >\n", **kw)
        rng = random.Random(7)
        for _ in range(25):
            pick = [rng.choice(NASTY + DPC[:40]) for _ in range(rng.randint(1, 25))]
            check(b"".join(p if p.endswith(b"\n") else p + b"\n" for p in pick), **kw)


def test_block_spanning_block_boundaries():
    opener = HDR + b'"other" err=<\n'
    wanted = HDR + b'"Bound server-providing Pod" err=<\n'
    body = b"\tline one\n\tline two " + b"x" * 100 + b"\n > after=1 next=<\n\tmore\n >\n"
    data = (opener + body + wanted + body) * 3 + DPC[5] + b"\tstray\n" + opener + b"\tcut"
    for bs in (1, 2, 5, 17, 40, 41, 100, 257):
        check(data, block_sizes=(bs,), messages=WANTED_MESSAGES)
    for inside in (b" space\n", b"no tab\n", b"\n", PREFIX + b"\tok\n", b"9\tno\n", DPC[5]):
        check(opener + b"\tone\n" + inside + b"\ttwo\n >\n" + DPC[5], messages=WANTED_MESSAGES)


def test_line_longer_than_a_block_and_stats_between_records():
    big = HDR + b'"other" v="' + b"y" * 5000 + b'"\n'
    data = big + DPC[3] + big + HDR + b'"Bound server-providing Pod" k=1\n' + big
    recs = check(data, block_sizes=(64, 1000, 6000), messages=WANTED_MESSAGES)
    assert [r.line_no for r in recs] == [4]


def test_text_and_wrappers_without_read_use_the_per_line_path():
    text = io.TextIOWrapper(io.BytesIO(b"".join(DPC)), encoding="utf-8", errors="surrogateescape")
    st_ = SourceStats("t")
    n = sum(1 for _ in iter_klog(text, st_, messages=WANTED_MESSAGES))
    assert n > 0 and st_.read == len(DPC)

    class Wrapper:  # like bridge._ProgressReader: read only through __getattr__
        def __init__(self, fh):
            self._fh, self.seen = fh, 0

        def __iter__(self):
            for line in self._fh:
                self.seen += len(line)
                yield line

        def __getattr__(self, name):
            return getattr(self._fh, name)

    w = Wrapper(io.BytesIO(b"".join(DPC)))
    assert _trace(w, messages=WANTED_MESSAGES) == _trace(iter(DPC), messages=WANTED_MESSAGES)
    assert w.seen == len(b"".join(DPC))


def test_read_returning_str_or_bytearray():
    class R:
        def __init__(self, data, kind):
            self._b, self._kind = io.BytesIO(data), kind

        def read(self, n=-1):
            chunk = self._b.read(min(n, 100))
            return chunk.decode("latin-1") if self._kind is str else bytearray(chunk)

    data = b"".join(DPC)
    want = _trace(iter(DPC), messages=WANTED_MESSAGES)
    assert _trace(R(data, bytearray), messages=WANTED_MESSAGES) == want
    ascii_only = b"".join(ln for ln in DPC if ln.isascii())
    assert _trace(R(ascii_only, str), messages=WANTED_MESSAGES) == _trace(
        _lines(ascii_only), messages=WANTED_MESSAGES
    )


FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(
    mutated_file(DPC, max_size=40),
    st.sampled_from(PREFILTERS),
    st.integers(1, 300),
    st.booleans(),
    st.sampled_from([b"\n", b"\r\n"]),
)
def test_mutated_captures_match_the_per_line_parser(lines, kw, bs, prefixed, eol):
    """Real lines, mutated ones and random bytes in any order; optionally with the
    ``--timestamps`` prefix and CRLF; any block size."""
    data = b"".join((PREFIX if prefixed else b"") + ln.replace(b"\n", eol) for ln in lines)
    check(data, block_sizes=(bs,), **kw)


@FAST
@given(st.lists(st.sampled_from(NASTY + DPC), max_size=30), st.integers(1, 200))
def test_nasty_and_real_lines_in_any_order(lines, bs):
    check(b"".join(lines), block_sizes=(bs,), messages=WANTED_MESSAGES, contains=WANTED_CONTAINS)


# ----------------------------------------------------------- the one-regex line fast path

#: ``_PAIR`` as it was before the possessive, range-spelt rewrite: the oracle for it.
_OLD_PAIR = re.compile(
    r' ([^ ="]+)=(?:"([^"\\]*(?:\\.[^"\\]*)*)"|(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null))(?= |$)',
    re.ASCII,
)
_PAIRISH = st.lists(
    st.one_of(
        st.sampled_from(
            [" ", "=", '"', "\\", "<", "-", ".", "e", "E", "+", "0", "1", "9", "\t", "é", "\x00"]
        ),
        st.sampled_from(
            [" k=", ' k="', '\\"', "true", "false", "null", " x=<", "1.5", "-2e3", "01", "1.", "a"]
        ),
        st.text(max_size=3),
    ),
    max_size=25,
).map("".join)


def _by_full_parser(s: str) -> object:
    """What the general per-line parser makes of ``s``: a record, or why it skips it."""
    try:
        p = klog._Parsed(1, None, s)
    except klog.KlogParseError as e:
        return e.reason
    return ("block", p.block_key) if p.block_key is not None else p.record()


@settings(max_examples=400, deadline=None)
@given(_PAIRISH)
def test_pair_regex_matches_its_plain_spelling(tail: str) -> None:
    for i in range(len(tail)):
        old, new = _OLD_PAIR.match(tail, i), klog._PAIR.match(tail, i)
        assert (old and (old.group(0), old.groups())) == (new and (new.group(0), new.groups()))


def _check_simple(s: str) -> None:
    rec = klog._simple_record(1, None, s)
    if rec is not None:
        assert rec == _by_full_parser(s), s


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(['"HTTP call done"', '"m"', '"caf\u00e9"', '"e\\"x"', '""', "plain text"]), _PAIRISH)
def test_simple_record_is_the_full_parse_where_it_answers(msg: str, tail: str) -> None:
    _check_simple("I0629 14:00:00.000000       1 a.go:1] " + msg + tail)


def test_simple_record_on_real_and_nasty_lines() -> None:
    answered = 0
    for raw in DPC + NASTY:
        s = raw.decode("utf-8", "replace").rstrip("\r\n")
        _check_simple(s)
        answered += klog._simple_record(1, None, s) is not None
    assert answered > len(DPC) // 2  # the fast path does take the common lines
