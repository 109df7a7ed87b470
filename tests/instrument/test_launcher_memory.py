"""What a wrapped launcher keeps in memory as creates come and go.

Why: every page of the launcher's anonymous memory is a page-table entry the next
``fork()`` of a vLLM instance copies, and every page written between the fork and the
response is copied once more; the wrappers' share of that memory is the create path's
remaining cost (issue 23).  So the wrappers must load nothing they do not use, and keep
nothing of an instance once it is gone.  Run in a fresh interpreter with the wrappers
loaded as ``fma_otel.auto`` loads them (this one has everything imported), once for the
module: not in forks of one (``forked_sections``), as the wrappers are off in a forked
child.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import gc, json, os, sys, tempfile, threading, time
from pathlib import Path
import fma_otel.auto
AT_IMPORT = sorted(m for m in ("msgspec", "fma_otel.span_records") if m in sys.modules)
HTTP_UTIL = "opentelemetry.util.http" in sys.modules
from fma_otel.instrument import redact as R
AUTH_RULE = R._AUTH_SCHEME is not None
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
spans = InMemorySpanExporter()
trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(spans))
sys.path.insert(0, str(Path(fma_otel.__file__).parents[1] / "tests" / "fixtures" / "fake_launcher"))
import launcher
from starlette.testclient import TestClient
from fma_otel.instrument import launcher as L, vllm_phases as VP, vllm_watch as VW
from fma_otel.instrument.vllm_watch import StartupWatch
os.environ[VP.ENV_INTERVAL] = "0.02"
os.environ[VW.ENV_INTERVAL] = "0.02"
LOGS = tempfile.mkdtemp()
launcher.vllm_manager.log_dir = LOGS
LINE = b"INFO 06-29 07:36:25 [__init__.py:239] Automatically detected platform cuda.\\n"

def wait(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not pred():
        time.sleep(0.02)
    return pred()

def create_and_delete(client, iid, log_line=None):
    opts = "--model m --port %d --fake-health-delay 60" % (20000 + os.getpid() % 20000)
    assert client.put("/v2/vllm/instances/" + iid, json={"options": opts}).status_code == 201
    if log_line is not None:
        with open(Path(LOGS) / ("fake-launcher-%d-%s.log" % (os.getpid(), iid)), "ab") as f:
            f.write(log_line)
        time.sleep(0.2)  # the tail reads it
        out["threads"] = sorted(t.name for t in threading.enumerate() if t.name.startswith("fma-otel-"))
    assert client.delete("/v2/vllm/instances/" + iid).status_code == 200

def alive(*types):
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, types))

def loaded():
    names = ("fma_otel.phase_spans", "fma_otel.sources.vllm_log", "msgspec")
    return sorted(m for m in sys.modules if m in names)

out = {"at import": AT_IMPORT, "http util": HTTP_UTIL, "auth rule": AUTH_RULE}
with TestClient(launcher.app) as client:
    create_and_delete(client, "a")
    out["tails gone"] = wait(lambda: alive(VP.PhaseTail) == 0)
    out["no log"] = loaded()
    for i in range(12):
        create_and_delete(client, "k%d" % i)
    out["all gone"] = wait(lambda: alive(StartupWatch, VP.PhaseTail) == 0)
    out["kept"] = alive(StartupWatch, VP.PhaseTail, L._RequestState, L._StartupOrder, L._LateSpan)
    create_and_delete(client, "b", LINE)
    wait(lambda: alive(VP.PhaseTail) == 0)
    out["a line"] = loaded()
out["startup spans"] = len([s for s in spans.get_finished_spans() if s.name == "fma.vllm.startup"])
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def ran() -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "FMA_OTEL_"))}
    env.update(PYTHONPATH=str(ROOT), OTEL_TRACES_EXPORTER="none", OTEL_SERVICE_NAME="fma-launcher")
    res = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["startup spans"] == 14, out  # every create was traced: the wrappers were on
    return out


def test_the_wrappers_load_no_span_records_or_msgspec(ran: dict[str, Any]) -> None:
    # They use the model's names and ids, never a SpanRecord (msgspec: ~0.4 MiB, 5 mappings).
    assert ran["at import"] == []


def test_no_excluded_urls_set_loads_no_http_util(ran: dict[str, Any]) -> None:
    # ``opentelemetry.util.http`` and its semantic-convention tables: for an empty list.
    assert ran["http util"] is False


def test_the_authorization_rule_is_compiled_at_its_first_use(ran: dict[str, Any]) -> None:
    # Case-insensitive ranges make ``re`` build Unicode case tables (~190 KiB): not at import.
    assert ran["auth rule"] is False
    from fma_otel.instrument import redact

    assert redact.scrub_text("failed: Bearer abc.def") == "failed: Bearer <redacted>"
    assert redact._AUTH_SCHEME is not None


def test_an_instance_that_logged_nothing_loads_no_log_parser_or_planner(ran: dict[str, Any]) -> None:
    assert ran["no log"] == []


def test_an_instance_that_logged_a_line_loads_the_parser(ran: dict[str, Any]) -> None:
    # The control: the test above would see the import if it were made.
    assert "fma_otel.sources.vllm_log" in ran["a line"] and "msgspec" in ran["a line"]


def test_nothing_of_a_deleted_instance_is_kept(ran: dict[str, Any]) -> None:
    assert ran["tails gone"] and ran["all gone"]
    assert ran["kept"] == 0


def test_one_thread_polls_the_instances_and_follows_their_logs(ran: dict[str, Any]) -> None:
    # Taken while an instance was starting, its log followed.
    assert ran["threads"] == ["fma-otel-vllm-startup"]
