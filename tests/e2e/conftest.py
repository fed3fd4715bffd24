"""Fixtures for end-to-end tests against a real daemon process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.client import Client
from tests.e2e.harness import DaemonProcess, running_daemon


@pytest.fixture
def daemon() -> Iterator[DaemonProcess]:
    """A daemon with default config, debug methods on."""
    with running_daemon() as d:
        yield d


@pytest.fixture
def client(daemon: DaemonProcess) -> Iterator[Client]:
    """A connection to the test's `daemon` (a module may start its own, module-wide);
    a config the test set is reset afterwards."""
    with Client(daemon) as c:
        yield c
