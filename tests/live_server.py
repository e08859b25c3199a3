"""The app behind a real uvicorn server on a free loopback port, in a thread of this process:
for what the ASGI transport cannot show (streamed responses as they are sent, synchronous
clients such as the span processor's)."""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

STARTUP_LIMIT_S = 30.0


def bound_socket() -> socket.socket:
    """A loopback port of its own, bound but not listening: connections to it are refused
    until `serve` listens on it."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    return listening


def url_of(listening: socket.socket) -> str:
    return f"http://127.0.0.1:{listening.getsockname()[1]}"


@contextmanager
def serve(app: FastAPI, listening: socket.socket | None = None) -> Iterator[str]:
    """Serve `app` until the block ends, on `listening` if given; yields its base URL."""
    listening = listening or bound_socket()
    config = uvicorn.Config(app, log_config=None, access_log=False, ws="none", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_LIMIT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield url_of(listening)
    finally:
        server.should_exit = True
        thread.join()
        listening.close()
