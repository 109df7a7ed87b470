"""Parser for a vLLM server log: lines in, startup and sleep/wake *phase records* out.

Pure: no I/O, no spans, no knowledge of actuations.  The bridge feeds it a captured instance
log (the launcher's ``/v2/vllm/instances/{id}/log`` or a baseline Pod's container log), the
launcher wrapper feeds it the same file as it grows; both get the same records, because the
parser keeps no state that depends on how the lines were chunked.

What the text gives (``/work/shared/vllm-reference.md``, §0-§2):

* **Time.** vLLM stamps ``MM-DD HH:MM:SS``: no year, no zone, no fraction (truncated).  A
  stamp ``s`` therefore means the instant lies in ``[s, s + 1 s)``; records carry that as
  ``end_lo_ns``/``end_hi_ns`` (UTC ns).  The stamp is the vLLM process's *local* time, so the
  caller passes ``utc_offset_s`` (local = UTC + offset; ``-25200`` for UTC-7) and ``year``.
* **Year rule.** ``year`` is the year of the first dated line.  Every later stamp takes,
  among the previous, same and next year, the one that puts it nearest to the previous dated
  line.  A Dec 31 -> Jan 1 rollover therefore moves to ``year + 1``, and a rank's late
  ``12-31 23:59:59`` written after another rank's ``01-01 00:00:00`` stays in the old year.
  The FMA launcher's first line (``YYYY-MM-DD HH:MM:SS,mmm - __main__ - INFO - VLLM process
  (PID: N) started.``) carries a full date; when present it is the anchor instead of ``year``
  (it is written in the same process environment, so the same ``utc_offset_s`` applies).
* **Durations.** Most phase messages are logged at the end and carry the duration ("took X
  s"); ``duration_s`` is the logged number, ``duration_unc_s`` half a unit of its last printed
  digit (``%.0f`` capture seconds: 0.5 s).  The start is ``end - duration`` with the same 1 s
  interval (:attr:`VllmPhase.start_lo_ns`).  Messages with no duration are instants
  (``duration_s is None``).
* **uvicorn lines** (``INFO:     Application startup complete.``) have no stamp: the record's
  ``end_lo_ns`` is the previous dated line's stamp and ``end_hi_ns`` is ``None`` (this log
  gives no upper bound; another source, such as the first healthy ``GET /health``, must).
* **Tensor/pipeline/data-parallel ranks repeat lines.**  Only the process whose parallel
  indices are all 0 is kept (``Worker_TP0``, ``VllmWorker rank=0``, ``EngineCore_DP0``); the
  others are counted in the note :data:`DUPLICATES`.  Under a name that tells no rank
  (``RayWorkerWrapper``, a plain ``Worker``) the first pid that logs a phase is kept.  V0's
  ``VllmWorkerProcess`` lines are the non-driver ranks (the driver runs in the engine
  process) and are dropped the same way.  Rank 0 is the
  rule, not the slowest rank, because from 0.19 only local rank 0 logs most of these
  messages: the same rule then gives the same phases on every version.
  A line torn by a concurrent writer (``(A pid=1) (B pid=2) INFO ...`` then A's text on the
  next line with no prefix) is given back to A.
* **Wording drift.** Each message is recognised by a stable substring (the *trigger*) and
  then parsed by one of the known wordings, each tagged with the vLLM versions that print it
  (``family``).  A line with a trigger that fits no known wording is a *malformed* known
  message: skipped and counted with its line number, never guessed into a phase.  A line
  with no trigger is *unknown*: ignored and counted.  A log in a format this module does not
  know (a custom ``VLLM_LOGGING_CONFIG_PATH``, the JSON formatter) therefore yields no
  records at all, never wrong ones.

Physical lines (ended by ``\\n``) are split on ``\\r`` into segments (tqdm, the multi-line
formatter; :attr:`VllmPhase.seq`), not into lines as the DPC and launcher logs are
(:func:`fma_otel.lines.read_lines`): a record's line number is a span attribute that must
match the file's ``\\n`` lines, and the launcher wrapper feeds the lines as vLLM writes them.
ANSI colour codes are removed, and a ``kubectl logs --timestamps`` RFC 3339 prefix is
removed (kept in ``prefix_ns``: the container runtime's read time, never used as the phase
instant).  The prefix is read by :func:`fma_otel.sources.klog.split_timestamp_prefix`, the one reader of
that prefix; a line starting with a digit that is not such a prefix is kept whole.  vLLM's
own ``INFO 06-29 14:36:20`` stamp and the launcher's asctime are other formats, read here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

from .klog import split_timestamp_prefix
from .records import SourceStats

__all__ = [
    "DUPLICATES",
    "PHASES",
    "VllmLogParser",
    "VllmPhase",
    "parse_vllm_log",
]

NS = 1_000_000_000
_MIN_YEAR, _MAX_YEAR = 1971, 9998  # room for the UTC offset either side

#: Phase names (record ``phase``), in start-up order.  Instants have no duration; the others
#: are "took X".
PHASES: tuple[str, ...] = (
    PROCESS_START := "process_start",  # FMA launcher's first line of the instance log (1 ms)
    PLATFORM_DETECTED := "platform_detected",  # first "Automatically detected platform": imports done
    API_SERVER_SETUP := "api_server_setup",  # version banner: API server setup starts
    OTLP_TRACES := "otlp_traces",  # "non-default args: {... 'otlp_traces_endpoint': ...}": vLLM traces itself
    ENGINE_CONFIG := "engine_config",  # "Initializing a V1 LLM engine (vX) with config": engine starts
    MODEL_LOAD_START := "model_load_start",  # "Starting to load model" / "Loading model from scratch"
    WEIGHTS_DOWNLOAD := "weights_download",  # "Time spent downloading weights for M: X seconds"
    WEIGHTS_LOAD := "weights_load",  # "Loading weights took X seconds"
    MODEL_INIT := "model_init",  # "Initializing model took X seconds" (0.33+)
    MODEL_LOAD := "model_load",  # "Model loading took G GiB and X seconds" (whole load)
    TORCH_COMPILE_START := "torch_compile_start",  # "Starting torch.compile" (0.33+)
    DYNAMO_TRANSFORM := "dynamo_transform",  # "Dynamo bytecode transform time: X s"
    INDUCTOR_COMPILE := "inductor_compile",  # "Compiling a graph for ... takes X s" (cache miss)
    COMPILE_CACHE_LOAD := "compile_cache_load",  # "Directly load the compiled graph(s) ... took X s"
    TORCH_COMPILE := "torch_compile",  # "torch.compile takes|took X s in total"
    COMPILE_AND_PROFILING_RUN := "compile_and_profiling_run",  # 0.18+ non-AOT combined total
    PROFILING_RUN := "profiling_run",  # "Initial profiling/warmup run took X s" (0.18+)
    MEMORY_PROFILE := "memory_profile",  # "Memory profiling takes X seconds" (V0 INFO, V1 DEBUG)
    KV_CACHE_MEMORY := "kv_cache_memory",  # "Available KV cache memory: X GiB": end of profiling
    KV_CACHE_SIZE := "kv_cache_size",  # "GPU KV cache size: N tokens" / "# GPU blocks: N"
    CUDA_GRAPH_CAPTURE := "cuda_graph_capture",  # "Graph capturing finished in S secs"
    INIT_ENGINE := "init_engine",  # "init engine (profile, create kv cache, warmup model) took X"
    API_SERVER_START := "api_server_start",  # "Starting vLLM server on URL": uvicorn about to start
    API_SERVER_UP := "api_server_up",  # uvicorn "Application startup complete." (no stamp)
    SLEEP_REQUEST := "sleep_request",  # "sleep the engine with level N" (0.7 only)
    SLEEP := "sleep",  # "It took X seconds to fall asleep."
    WAKE_REQUEST := "wake_request",  # "wake up the engine with tags: T"
    WAKE := "wake",  # "It took X seconds to wake up tags T."
)


class VllmPhase(NamedTuple):
    """One phase (or instant) that the log states.

    ``end_lo_ns``/``end_hi_ns``: the interval that holds the logged instant (UTC ns);
    ``end_hi_ns`` is ``None`` for uvicorn lines (no stamp).  ``duration_s`` as logged (``None``
    for instants), ``duration_unc_s`` its printing precision.  ``family``: the vLLM versions
    that print this wording.  ``process``: the ``(Name pid=N)`` prefix's name, if any.
    ``detail``: what the message names (version, tags, compile range, GiB), verbatim.
    """

    phase: str
    line_no: int
    end_lo_ns: int
    end_hi_ns: int | None
    duration_s: float | None
    duration_unc_s: float
    family: str
    process: str | None = None
    detail: str | None = None
    prefix_ns: int | None = None
    #: which ``\r`` segment of its physical line (0 for the first): with ``line_no`` it
    #: orders records in a log whose line ends are CR-only (one physical line)
    seq: int = 0

    @property
    def order(self) -> tuple[int, int]:
        """Where the record stands in the log: ``(line_no, seq)``."""
        return (self.line_no, self.seq)

    @property
    def start_lo_ns(self) -> int:
        """Earliest start: ``end_lo - duration`` (the stamp's own interval, shifted)."""
        return self.end_lo_ns - _ns(self.duration_s or 0.0)

    @property
    def start_hi_ns(self) -> int | None:
        """Latest start: ``end_hi - duration``; ``None`` when the end has no upper bound."""
        if self.end_hi_ns is None:
            return None
        return self.end_hi_ns - _ns(self.duration_s or 0.0)


#: the note counting the lines of non-zero ranks (the same phases again) that were passed over
DUPLICATES = "vLLM lines of other ranks (rank 0 kept)"


def _ns(seconds: float) -> int:
    return round(seconds * NS)


# --------------------------------------------------------------------------- line layout

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PROC = re.compile(r"\(([^()]*?) pid=(\d+)\)")
_HEADER = re.compile(
    r"^(?P<pre>.*?)(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d) "
    r"(?P<br>\[?)(?P<file>[^\]:\s]+):(?P<ln>\d+)\] ?(?P<msg>.*)$"
)
_UVICORN = re.compile(r"^(?:\(([^()]*?) pid=\d+\) )?(?:INFO|WARNING|ERROR):\s+(.*)$")
_LAUNCHER_FIRST = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d{3}) - \S+ - INFO - "
    r"VLLM process \(PID: (\d+)\) started\.$"
)
# Parallel indices in a process name: any non-zero one marks a repeating rank.
_RANK = re.compile(r"(?:rank=|(?:DP|PP|TP|EP|PCP|DCP)|EngineCore_|ApiServer_)(\d+)")


def _rank_is_zero(process: str | None) -> bool:
    if process is None:
        return True
    if process.startswith("VllmWorkerProcess"):
        return False
    return all(int(i) == 0 for i in _RANK.findall(process))


# --------------------------------------------------------------------------- messages

_NUM = r"(\d+(?:\.\d+)?)"


class _Wording(NamedTuple):
    regex: re.Pattern[str]  # group ``s``: the duration; ``x``: the record's ``detail``
    family: str


class _Message(NamedTuple):
    phase: str
    trigger: str
    wordings: tuple[_Wording, ...]
    once: bool = False  # keep only the first occurrence in the log
    also: str = ""  # a second substring the trigger needs (the logo's "version " row)


def _w(pattern: str, family: str) -> _Wording:
    return _Wording(re.compile(pattern), family)


def _m(phase: str, trigger: str, *wordings: _Wording, once: bool = False, also: str = "") -> _Message:
    return _Message(phase, trigger, wordings, once, also)


_S = rf"(?P<s>{_NUM[1:-1]})"
_TAG = r"(?:\[(?P<tag>[^\]]*)\] )?"  # 0.33+ "[tag] " before compile messages, kept in detail

# Order matters only where one trigger contains another; they are checked in this order.
_MESSAGES: tuple[_Message, ...] = (
    _m(
        PLATFORM_DETECTED,
        "Automatically detected platform",
        _w(r"^Automatically detected platform (?P<x>\w+)\.$", "0.7.3+"),
        once=True,
    ),
    _m(API_SERVER_SETUP, "vLLM API server version", _w(r"^vLLM API server version (?P<x>\S+)$", "<=0.14")),
    _m(
        API_SERVER_SETUP,
        "vLLM server version",
        _w(r"^vLLM server version (?P<x>\S+), serving model \S+$", "0.15+ (one-line banner)"),
    ),
    _m(
        API_SERVER_SETUP,
        "\u2588",  # the 0.15+ logo; only its "version X" row is a record
        _w(r"\bversion (?P<x>\d\S*)", "0.15+ (logo)"),
        also="version ",
    ),
    _m(
        OTLP_TRACES,
        "non-default args: ",
        # a record only when the args set it (the endpoint itself is not kept: it may hold
        # credentials); other args lines stay unknown lines
        _w(r"^non-default args: \{.*'otlp_traces_endpoint': '[^']+'.*\}$", "0.9+"),
        once=True,
        also="'otlp_traces_endpoint': '",
    ),
    _m(
        ENGINE_CONFIG,
        "LLM engine (v",
        _w(r"^Initializing a V1 LLM engine \(v(?P<x>[^)]+)\) with config: ", "0.7+ (V1)"),
        _w(r"^Initializing a V0 LLM engine \(v(?P<x>[^)]+)\) with config: ", "0.7-0.10 (V0)"),
        _w(r"^Initializing an LLM engine \(v(?P<x>[^)]+)\) with config: ", "<=0.6"),
    ),
    _m(
        MODEL_LOAD_START,
        "Starting to load model ",
        _w(r"^Starting to load model (?P<x>.+?)\.\.\.$", "<=0.33"),
    ),
    _m(MODEL_LOAD_START, "Loading model from scratch", _w(r"^Loading model from scratch\.\.\.$", "0.9.2+")),
    _m(
        WEIGHTS_DOWNLOAD,
        "Time spent downloading weights for ",
        _w(rf"^Time spent downloading weights for (?P<x>.+): {_S} seconds$", "0.7+"),
    ),
    _m(WEIGHTS_LOAD, "Loading weights took", _w(rf"^Loading weights took {_S} seconds$", "0.8+")),
    _m(
        MODEL_LOAD,
        "Loading model weights took",
        _w(rf"^Loading model weights took (?P<x>{_NUM[1:-1]} GB)$", "<=0.7"),
    ),
    _m(
        MODEL_LOAD,
        "Model loading took",
        _w(rf"^Model loading took (?P<x>{_NUM[1:-1]} GiB) memory and {_S} seconds$", "0.12+"),
        _w(rf"^Model loading took (?P<x>{_NUM[1:-1]} GiB) and {_S} seconds$", "0.8.x-0.11, MRV2<=0.26"),
        _w(rf"^Model loading took (?P<x>{_NUM[1:-1]} GB) and {_S} seconds$", "0.8.0"),
    ),
    _m(MODEL_INIT, "Initializing model took", _w(rf"^Initializing model took {_S} seconds$", "0.33+")),
    _m(TORCH_COMPILE_START, "Starting torch.compile", _w(rf"^{_TAG}Starting torch\.compile$", "0.33+")),
    _m(
        DYNAMO_TRANSFORM,
        "Dynamo bytecode transform time",
        _w(rf"^{_TAG}Dynamo bytecode transform time: {_S} s$", "0.6.6+"),
    ),
    _m(
        INDUCTOR_COMPILE,
        "Compiling a graph for ",
        _w(rf"^{_TAG}Compiling a graph for (?P<x>compile range .+?) takes {_S} s$", "0.13+"),
        _w(rf"^{_TAG}Compiling a graph for (?P<x>dynamic shape) takes {_S} s$", "0.10-0.12"),
        _w(rf"^{_TAG}Compiling a graph for (?P<x>general shape) takes {_S} s$", "<=0.9"),
        _w(rf"^{_TAG}Compiling a graph for (?P<x>shape .+?) takes {_S} s$", "<=0.12"),
    ),
    _m(
        COMPILE_CACHE_LOAD,
        "Directly load the compiled graph",
        _w(
            rf"^{_TAG}Directly load the compiled graph\(s\) for (?P<x>compile range .+?) from the cache, took {_S} s$",
            "0.13+",
        ),
        _w(
            rf"^{_TAG}Directly load the compiled graph\(s\) for (?P<x>dynamic shape) from the cache, took {_S} s$",
            "0.10-0.12",
        ),
        _w(
            rf"^Directly load the compiled graph\(s\) for (?P<x>shape .+?) from the cache, took {_S} s$",
            "0.8-0.9",
        ),
        _w(r"^Directly load the compiled graph for (?P<x>shape .+?) from the cache$", "0.7"),
    ),
    _m(
        COMPILE_AND_PROFILING_RUN,
        "torch.compile and initial profiling/warmup run together took",
        _w(
            rf"^{_TAG}torch\.compile and initial profiling/warmup run together took {_S} s in total$",
            "0.18+ (non-AOT)",
        ),
    ),
    _m(
        TORCH_COMPILE,
        "torch.compile t",
        _w(rf"^{_TAG}torch\.compile took {_S} s in total$", "0.18+"),
        _w(rf"^{_TAG}torch\.compile takes {_S} s in total$", "<=0.17"),
    ),
    _m(
        PROFILING_RUN,
        "Initial profiling/warmup run took",
        _w(rf"^{_TAG}Initial profiling/warmup run took {_S} s$", "0.18+"),
    ),
    _m(
        MEMORY_PROFILE,
        "Memory profiling takes",
        _w(rf"^Memory profiling takes {_S} seconds(?:\.|$)", "V0 INFO <=0.10, V1 DEBUG 0.9+"),
    ),
    _m(
        KV_CACHE_MEMORY,
        "Available KV cache memory:",
        _w(rf"^Available KV cache memory: (?P<x>{_NUM[1:-1]} GiB)$", "0.9.2+"),
    ),
    _m(
        KV_CACHE_SIZE,
        "KV cache size:",
        _w(
            r"^(?:GPU|XPU|GPU \+ host) KV cache size: (?P<x>[\d,]+ tokens)(?:, Maximum concurrency .*)?$",
            "0.8+",
        ),
    ),
    _m(
        KV_CACHE_SIZE,
        "# GPU blocks: ",
        _w(r"^# GPU blocks: (?P<x>\d+)(?:, # CPU blocks: \d+)?$", "<=0.6 (V0), 0.7 (V1)"),
    ),
    _m(
        KV_CACHE_SIZE,
        "# cuda blocks: ",
        _w(r"^# cuda blocks: (?P<x>\d+), # CPU blocks: \d+$", "0.7-0.10 (V0)"),
    ),
    _m(
        CUDA_GRAPH_CAPTURE,
        "Graph capturing finished in",
        _w(rf"^Graph capturing finished in {_S} secs, took (?P<x>{_NUM[1:-1]} GiB)$", "0.6.6+"),
        _w(rf"^Graph capturing finished in {_S} secs\.$", "<0.6.6 (V0)"),
    ),
    _m(
        INIT_ENGINE,
        "init engine (profile, create kv cache, warmup model) took",
        _w(
            rf"^init engine \(profile, create kv cache, warmup model\) took {_S} s"
            r"(?: \((?P<x>compilation: [^)]*)\))?$",
            "0.20+",
        ),
        _w(rf"^init engine \(profile, create kv cache, warmup model\) took {_S} seconds$", "<=0.19"),
    ),
    _m(API_SERVER_START, "Starting vLLM server on", _w(r"^Starting vLLM server on (?P<x>\S+)$", "0.18+")),
    _m(
        API_SERVER_START,
        "Starting vLLM API server",
        _w(r"^Starting vLLM API server \d+ on (?P<x>\S+)$", "0.9.2-0.17"),
        _w(r"^Starting vLLM API server on (?P<x>\S+)$", "<=0.9.0"),
    ),
    _m(SLEEP_REQUEST, "sleep the engine with level", _w(r"^sleep the engine with level (?P<x>\d+)$", "0.7")),
    _m(SLEEP, "seconds to fall asleep", _w(rf"^It took {_S} seconds to fall asleep\.$", "0.7+")),
    _m(
        WAKE_REQUEST,
        "wake up the engine",
        _w(r"^wake up the engine with tags: (?P<x>.+)$", "0.8+"),
        _w(r"^wake up the engine$", "0.7"),
    ),
    _m(
        WAKE,
        "seconds to wake up",
        _w(rf"^It took {_S} seconds to wake up tags (?P<x>.+)\.$", "0.8+"),
        _w(rf"^It took {_S} seconds to wake up\.$", "0.7"),
    ),
)


def _unc(number: str) -> float:
    """Half a unit of the last printed digit: ``"12"`` -> 0.5, ``"1.23"`` -> 0.005."""
    dot = number.find(".")
    decimals = 0 if dot < 0 else len(number) - dot - 1
    return 0.5 * 10.0**-decimals


# --------------------------------------------------------------------------- the parser


def _blank(seg: str) -> bool:
    """A segment with nothing to read: blank, or only a process prefix."""
    text = seg.strip()
    return not text or (text[0] == "(" and _PROC.fullmatch(text) is not None)


class VllmLogParser:
    """Incremental parser: :meth:`feed` one physical line at a time, in file order.

    The same lines give the same records whether fed all at once or as a file grows; the only
    state carried between lines is the year anchor, the previous stamp (for uvicorn lines)
    and which once-only messages were seen.
    """

    def __init__(self, *, year: int, utc_offset_s: int = 0, name: str = "vllm") -> None:
        if not _MIN_YEAR <= year <= _MAX_YEAR:
            raise ValueError(f"year out of range {_MIN_YEAR}..{_MAX_YEAR}: {year}")
        if not -86400 < utc_offset_s < 86400:
            raise ValueError(f"utc_offset_s out of range: {utc_offset_s}")
        self.year = year
        self.utc_offset_s = utc_offset_s
        self.stats = SourceStats(name)
        self._line_no = 0
        self._seg = 0  # the \r segment being read (VllmPhase.seq)
        self._skipped_line = 0  # the last line counted as skipped
        self._kind = ""  # what the segment being read is: "" (read), "ignored" or "skipped"
        self._anchor_local: datetime | None = None  # previous dated line, naive local time
        self._prev_stamp_ns: int | None = None  # previous stamp (UTC ns), for uvicorn lines
        self._seen_once: set[str] = set()
        self._torn: tuple[str, str] | None = None  # (name, pid) torn by another writer (≤0.30)
        self._pid_of_name: dict[str, str] = {}  # first pid seen per rank-less process name

    def _first_pid_of_name(self, process: str | None, pid: str | None) -> bool:
        """For a name that tells no rank (``RayWorkerWrapper``, a plain ``Worker``), only the
        first pid that logs a phase under it is kept: the others are the same lines from
        other ranks."""
        if process is None or pid is None or _RANK.search(process):
            return True
        return self._pid_of_name.setdefault(process, pid) == pid

    # -- time

    def _local_ns(self, local: datetime) -> int:
        utc = local.replace(tzinfo=timezone.utc) - timedelta(seconds=self.utc_offset_s)
        return int(utc.timestamp()) * NS + utc.microsecond * 1000

    def _resolve(self, mo: int, d: int, h: int, mi: int, s: int) -> datetime | None:
        """The stamp as a naive local datetime, its year chosen by the module's year rule."""
        anchor = self._anchor_local
        years = (self.year,) if anchor is None else (anchor.year - 1, anchor.year, anchor.year + 1)
        best: datetime | None = None
        for y in years:
            if not _MIN_YEAR <= y <= _MAX_YEAR:  # a walk of odd stamps must not overflow
                continue
            try:
                cand = datetime(y, mo, d, h, mi, s)
            except ValueError:  # 02-29 in a common year, 13-01, 25:00:00 ...
                continue
            if best is None or (anchor is not None and abs(cand - anchor) < abs(best - anchor)):
                best = cand
        return best

    # -- lines

    def feed(self, line: str | bytes) -> list[VllmPhase]:
        """Parse one physical line (its ``\\n`` optional); return the records it holds."""
        self._line_no += 1
        st = self.stats
        st.read += 1
        st.understood += 1  # taken back per skipped segment (:meth:`_skip`), or when ignored
        if isinstance(line, bytes):
            line = line.decode("utf-8", errors="replace")
        line = line.rstrip("\n")
        try:
            prefix_ns, line = split_timestamp_prefix(line)
        except ValueError:  # starts with a digit but no prefix the one grammar reads: kept whole
            prefix_ns = None
        out: list[VllmPhase] = []
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        self._seg = 0
        # A line is counted once: skipped if a segment is, else ignored if a segment is
        # unknown and none is read (blank ones aside), else understood, so that read =
        # understood + ignored + skipped as for the DPC and launcher logs.
        ignored = read = False
        for seg in line.split("\r") if "\r" in line else (line,):
            self._kind = ""
            rec = self._segment(seg, prefix_ns)
            self._seg += 1
            if rec is not None:
                out.append(rec)
            ignored = ignored or self._kind == "ignored"
            read = read or (not self._kind and not _blank(seg))
        if ignored and not read and self._skipped_line != self._line_no:
            st.understood -= 1
            st.ignored += 1
        return out

    def _segment(self, seg: str, prefix_ns: int | None) -> VllmPhase | None:
        st = self.stats
        if _blank(seg):
            return None
        text = seg.strip()
        m = _HEADER.match(text)
        if m is None:
            return self._undated(text, prefix_ns)
        procs = _PROC.findall(m["pre"])
        process, pid = procs[-1] if procs else (None, None)
        # ≤0.30 prefixes at the stream level, so concurrent writers tear lines:
        # "(A pid=1) (B pid=2) INFO ..." is B's record, and A's text follows on the next
        # dated line with no prefix.  Give that line to A, so a non-zero rank's torn line is
        # still recognised as a duplicate.
        torn, self._torn = self._torn, (procs[-2] if len(procs) >= 2 else None)
        if process is None and torn is not None:
            process, pid = torn
        msg = m["msg"].rstrip()
        found = self._match(msg)
        if found is None:
            self._kind = "ignored"  # counted by its line (:meth:`feed`)
            self._stamp(m)  # an unknown dated line still moves the clock
            return None
        message, wording, wm = found
        if wm is None:
            self._skip(f"malformed {message.phase!r} message: {msg[:200]!r}")
            return None
        stamp = self._stamp(m)
        if stamp is None:
            return None
        if not _rank_is_zero(process) or not self._first_pid_of_name(process, pid):
            st.note(DUPLICATES)
            return None
        if message.once:
            if message.phase in self._seen_once:
                st.note(DUPLICATES)
                return None
            self._seen_once.add(message.phase)
        dur: float | None = None
        unc = 0.0
        if "s" in wm.re.groupindex:
            dur, unc = float(wm["s"]), _unc(wm["s"])
        detail = wm["x"] if "x" in wm.re.groupindex else None
        if "tag" in wm.re.groupindex and wm["tag"]:
            detail = f"[{wm['tag']}]" if detail is None else f"[{wm['tag']}] {detail}"
        return self._emit(
            message.phase, stamp, stamp + NS, dur, unc, wording.family, process, detail, prefix_ns
        )

    def _stamp(self, m: re.Match[str]) -> int | None:
        local = self._resolve(int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]))
        if local is None:
            self._skip(f"impossible timestamp {m['mo']}-{m['d']} {m['h']}:{m['mi']}:{m['s']}")
            return None
        self._anchor_local = local
        ns = self._local_ns(local)
        self._prev_stamp_ns = ns
        return ns

    def _match(self, msg: str) -> tuple[_Message, _Wording | None, re.Match[str] | None] | None:
        """The known message in ``msg`` and the wording that fits it (none: malformed)."""
        for message in _MESSAGES:
            if message.trigger in msg and message.also in msg:
                for wording in message.wordings:
                    if wm := wording.regex.search(msg):
                        return message, wording, wm
                return message, None, None
        return None

    def _emit(self, phase: str, *fields: object) -> VllmPhase:
        """The record of this line and segment (``fields``: :class:`VllmPhase`'s from
        ``end_lo_ns`` to ``prefix_ns``)."""
        return VllmPhase(phase, self._line_no, *fields, self._seg)  # type: ignore[arg-type]

    def _undated(self, text: str, prefix_ns: int | None) -> VllmPhase | None:
        lm = _LAUNCHER_FIRST.match(text)
        if lm:
            y, mo, d, h, mi, s, ms, pid = (int(g) for g in lm.groups())
            try:
                if not _MIN_YEAR <= y <= _MAX_YEAR:
                    raise ValueError(y)
                local = datetime(y, mo, d, h, mi, s, ms * 1000)
            except ValueError:
                self._skip("impossible timestamp in the launcher's first line")
                return None
            self._anchor_local = local.replace(microsecond=0)
            lo = self._local_ns(local)
            self._prev_stamp_ns = lo - lo % NS
            return self._emit(
                PROCESS_START, lo, lo + 1_000_000, None, 0.0, "fma-launcher", None, str(pid), prefix_ns
            )
        um = _UVICORN.match(text)
        if um and um[2].rstrip() == "Application startup complete.":
            if self._prev_stamp_ns is None:
                self._skip("uvicorn 'Application startup complete.' before any dated line")
                return None
            return self._emit(
                API_SERVER_UP, self._prev_stamp_ns, None, None, 0.0, "uvicorn", um[1], None, prefix_ns
            )
        self._kind = "ignored"  # counted by its line (:meth:`feed`)
        return None

    def _skip(self, why: str) -> None:
        """A skipped ``\\r`` segment.  Its line is counted as skipped once, at its first
        skipped segment, so ``understood`` stays ``read - ignored - skipped`` and never goes
        below zero; a further segment's reason is still listed, under the same line number."""
        st = self.stats
        self._kind = "skipped"
        if self._skipped_line != self._line_no:
            self._skipped_line = self._line_no
            st.skip(self._line_no, why)
            st.understood -= 1
        elif len(st.skipped_lines) < 100:
            st.skipped_lines.append((self._line_no, why))


def parse_vllm_log(
    lines: Iterable[str | bytes], *, year: int, utc_offset_s: int = 0, name: str = "vllm"
) -> tuple[list[VllmPhase], SourceStats]:
    """Parse a whole log; records in line order, with the stats (``name``'s)."""
    p = VllmLogParser(year=year, utc_offset_s=utc_offset_s, name=name)
    out: list[VllmPhase] = []
    for line in lines:
        out.extend(p.feed(line))
    return out, p.stats
