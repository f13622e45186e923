"""The suite's network guard (tests/support/network.py): no sockets by default, loopback only when marked."""

from __future__ import annotations

import socket
import threading

import pytest
from pytest_socket import SocketBlockedError, SocketConnectBlockedError

# TEST-NET-1 (RFC 5737): never routed; the guard refuses before any packet could leave anyway.
OUTSIDE = ("192.0.2.1", 80)

pytestmark = pytest.mark.filterwarnings("ignore:A test tried to use socket")  # pytest-socket warns as it refuses


def test_an_unmarked_test_cannot_open_a_socket() -> None:
    with pytest.raises(SocketBlockedError):
        socket.create_connection(OUTSIDE, timeout=1)
    with pytest.raises(SocketBlockedError):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)


@pytest.mark.loopback
def test_a_loopback_test_reaches_127_0_0_1_and_nothing_else() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        accepted = threading.Thread(target=lambda: listener.accept()[0].close(), daemon=True)
        accepted.start()
        with socket.create_connection(listener.getsockname(), timeout=5) as client:
            assert client.getpeername() == listener.getsockname()
        accepted.join(5)
    with pytest.raises(SocketConnectBlockedError):
        socket.create_connection(OUTSIDE, timeout=1)
