"""Fixtures the integration tier shares."""

import pytest
from pytest_httpserver import HTTPServer


@pytest.fixture
def api():
    """A fake GitHub REST API: an HTTP server on 127.0.0.1 only, on a free port."""
    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    yield server
    server.clear()
    server.stop()
