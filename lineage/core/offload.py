"""Per-record CPU work of a large batch, off the event loop.

Checking, stamping, signing and answering a batch costs some tens of microseconds a record: a
batch of 40,000 held the loop (every other request, /healthz too) for seconds. A batch this
size or larger does each such step in a worker thread; a smaller one stays on the loop, where
the thread hop would cost more than the work.
"""

import asyncio
from collections.abc import Callable
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
