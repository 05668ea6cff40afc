"""The elastic thread pool of blocking environment code: hung calls cannot use it up."""

import asyncio
import threading

from conftest import run, wait_until

from openenv_gym.runtime.threads import ElasticPool


def test_calls_given_up_while_running_leave_their_threads_and_get_replacements():
    pool = ElasticPool(2, "test-pool")
    release = threading.Event()
    hung = [pool.submit(release.wait) for _ in range(2)]
    assert wait_until(lambda: all(call.running() for call in hung))
    assert not any(call.cancel() for call in hung)  # running: not cancelled, but abandoned
    assert pool.abandoned == 2
    assert pool.submit(lambda: "served").result(timeout=5) == "served"  # by a replacement thread
    queued = [pool.submit(release.wait) for _ in range(3)]
    assert queued[-1].cancel() and queued[-1].cancelled()  # never started: simply cancelled, no thread taken
    release.set()
    assert all(call.result(timeout=5) for call in hung + queued[:2])
    assert wait_until(lambda: pool.abandoned == 0 and pool._started == 2)  # the extra threads ended
    pool.shutdown()


def test_asyncio_cancellation_abandons_the_running_call():
    """A task cancelled while awaiting a blocking call (a step timeout) frees the pool for the others."""

    async def main():
        loop = asyncio.get_running_loop()
        pool = ElasticPool(1, "test-pool")
        loop.set_default_executor(pool)
        release = threading.Event()
        hung = asyncio.ensure_future(asyncio.to_thread(release.wait))
        await asyncio.sleep(0.05)
        hung.cancel()
        await asyncio.sleep(0)
        assert await asyncio.wait_for(asyncio.to_thread(lambda: 42), 5) == 42
        assert pool.abandoned == 1
        release.set()

    run(main())


def test_a_pool_capped_in_abandoned_calls_stops_growing():
    pool = ElasticPool(1, "test-pool", max_abandoned=1)
    release = threading.Event()
    first = pool.submit(release.wait)
    assert wait_until(first.running)
    first.cancel()
    second = pool.submit(release.wait)
    assert wait_until(second.running)
    second.cancel()
    assert pool.abandoned == 1 and pool._started == 2
    release.set()
    pool.shutdown()
