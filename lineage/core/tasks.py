"""The service's background tasks: rounds that outlive their failures, and a stop that waits."""

import asyncio
from typing import Any


def cancelled() -> bool:
    """Whether the running task has been asked to stop: a cancel delivered mid-query can surface
    as another error (a connection's rollback failing), which a round must not swallow."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def stop(task: "asyncio.Task[Any]") -> None:
    """Cancel the task and wait until it has ended; how it ended is never the caller's error."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
