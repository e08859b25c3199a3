"""CPU work off the event loop.

Checking, stamping, signing and answering a batch costs some tens of microseconds a record: a
batch of 40,000 held the loop (every other request, /healthz too) for seconds. A batch this
size or larger does each such step in a worker thread; a smaller one stays on the loop, where
the thread hop would cost more than the work.

Seconds of pure-Python work for one request (writing a large walk as PROV) go to a worker
process instead, at a lower scheduling priority: in a thread it held the GIL, so every step of
every other tenant's requests waited on it (another tenant's walk-back p95 157x its idle p95
during four exports, bench/RESULTS-fairness.md).
"""

import asyncio
import ctypes
import functools
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import ParamSpec, TypeVar

OFF_LOOP_RECORDS = 500
OFF_LOOP_BYTES = 64 * 1024  # a request body this large: parsing it is such a step too

P = ParamSpec("P")
T = TypeVar("T")


async def per_record(records: int, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`work(*args, **kwargs)`, in a worker thread when it handles `records` >= OFF_LOOP_RECORDS."""
    if records < OFF_LOOP_RECORDS:
        return work(*args, **kwargs)
    return await asyncio.to_thread(work, *args, **kwargs)


async def per_byte(size: int, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`work(*args, **kwargs)`, in a worker thread when it reads `size` >= OFF_LOOP_BYTES."""
    if size < OFF_LOOP_BYTES:
        return work(*args, **kwargs)
    return await asyncio.to_thread(work, *args, **kwargs)


HEAVY_PROCESSES = 2
HEAVY_NICENESS = 10  # below the service's own process and PostgreSQL's
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _start_worker(server_pid: int) -> None:
    """A worker process at a lower priority that ends when the server process does, however it
    ends: workers left behind by a killed server kept their memory and their share of CPU."""
    os.nice(HEAVY_NICENESS)
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != server_pid:  # the server ended before the signal was asked for
        os._exit(0)


@functools.cache
def _heavy_pool() -> ProcessPoolExecutor:
    """This server process's worker processes, started on first use (spawned: a fork would
    copy the event loop's threads and connections)."""
    return ProcessPoolExecutor(
        HEAVY_PROCESSES,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(os.getpid(),),
    )


def stop_heavy_pool() -> None:
    """End the worker processes, if any started (the server's shutdown)."""
    if _heavy_pool.cache_info().currsize:
        _heavy_pool().shutdown(wait=False, cancel_futures=True)
        _heavy_pool.cache_clear()


async def in_process(work: Callable[..., T], *args: object) -> T:
    """`work(*args)` in a worker process (`work` and its arguments are pickled to it)."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_heavy_pool(), functools.partial(work, *args))
