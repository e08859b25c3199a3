"""Background rounds stop when asked, even when the cancel surfaces as another error."""

import asyncio

from lineage.core import tasks


async def test_a_round_whose_cancel_surfaces_as_another_error_still_stops() -> None:
    async def one_round() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise RuntimeError("the rollback failed on a broken connection") from None

    async def rounds() -> None:  # the shape of the log's and retention's background loops
        for _ in range(3):  # bounded, so that a failing run of this test ends too
            try:
                await one_round()
            except RuntimeError:
                if tasks.cancelled():
                    raise

    task = asyncio.create_task(rounds())
    await asyncio.sleep(0)
    stopping = asyncio.create_task(tasks.stop(task))
    await asyncio.wait({stopping}, timeout=10)
    try:
        assert task.done(), "the cancel was swallowed: the round goes on"
    finally:
        while not task.done():
            task.cancel()
            await asyncio.sleep(0)
        await stopping
