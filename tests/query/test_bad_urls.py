"""``slo``'s URLs and ``--dpc-metrics`` file: one line and exit 2, never a traceback, and
never the credentials a URL carries.

- ``http://[::1`` passes the ``http://`` check, and httpx refuses it with ``InvalidURL``,
  which is no ``httpx.HTTPError``: a traceback, exit 1 (``bridge --otlp-endpoint`` says one
  line, exit 2, for the same URL).
- A binary ``--dpc-metrics`` file raised ``UnicodeDecodeError``, no ``OSError``.
- ``--jaeger http://user:pw@host`` echoed ``user:pw`` in its errors (errtext.safe_url).
"""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

from fma_otel.cli import main

from . import fake_servers
from .gen import hot, write

SECRET = "s3cr3t-pw"


def _slo(*args: str):
    return CliRunner().invoke(main, ["slo", *args])


def _one_line_exit_2(r) -> str:
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.fixture
def traces(tmp_path) -> str:
    return write(str(tmp_path / "t.jsonl"), [hot("h1", 2.0)])


def _closed_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("url", ["http://[::1", f"http://u:{SECRET}@[::1", "http://h\x00x"])
@pytest.mark.parametrize("option", ["--jaeger", "--tempo", "--dpc-metrics"])
def test_a_url_httpx_refuses_is_one_line_exit_2(traces, option, url) -> None:
    args = [traces, option, url] if option == "--dpc-metrics" else [option, url]
    line = _one_line_exit_2(_slo(*args))
    assert option in line and "not a valid URL" in line and SECRET not in line


def test_a_binary_dpc_metrics_file_is_one_line_exit_2(traces, tmp_path) -> None:
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 4)
    line = _one_line_exit_2(_slo(traces, "--dpc-metrics", str(garbage)))
    assert "--dpc-metrics" in line and "not UTF-8" in line


@pytest.mark.parametrize("option", ["--jaeger", "--tempo", "--dpc-metrics"])
def test_an_error_naming_the_url_shows_no_credentials(traces, option) -> None:
    url = f"http://user:{SECRET}@127.0.0.1:{_closed_port()}/metrics?token={SECRET}"
    args = [traces, option, url] if option == "--dpc-metrics" else [option, url]
    line = _one_line_exit_2(_slo(*args))
    assert SECRET not in line and "<redacted>@127.0.0.1" in line


@pytest.mark.parametrize("option", ["--jaeger", "--tempo", "--dpc-metrics"])
def test_an_http_error_shows_no_credentials_either(traces, option) -> None:
    """The errors that name the URL asked (base and path), not the base alone."""
    with fake_servers.FakeServer(lambda p, q: (500, {"error": "down"})) as srv:
        url = srv.url.replace("http://", f"http://user:{SECRET}@")
        if option == "--dpc-metrics":
            r = _slo(traces, option, url + "/metrics")
        else:
            r = _slo(option, url)
    line = _one_line_exit_2(r)
    assert "500" in line and SECRET not in line and "<redacted>@127.0.0.1" in line
