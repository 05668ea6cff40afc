"""The async client against a real server on loopback."""

import asyncio

import pytest
from conftest import run

import openenv_gym
from openenv_gym import errors


def test_reset_step_close(echo_url):
    async def main():
        async with openenv_gym.connect(echo_url) as conn:
            session = conn.session()
            assert session.id is None
            obs, info = await session.reset(seed=1, options={"max_steps": 2})
            assert obs.startswith("Send me") and info == {"max_steps": 2}
            assert len(session.id) >= 22  # 128 random bits, URL-safe base64
            assert await session.step("héllo 🙂") == ("héllo 🙂", 0.7, False, False, {"step": 1})
            assert (await session.step("ab"))[2:4] == (False, True)  # truncated at max_steps
            with pytest.raises(errors.NoEpisodeError, match="call reset"):
                await session.step("after the end")
            first_id = session.id
            await session.reset()  # a reset reuses the session
            assert session.id == first_id
            await session.close()
            await session.close()  # idempotent
            assert session.id is None

    run(main())


def test_info_describes_env_and_limits(echo_url):
    async def main():
        async with openenv_gym.connect(echo_url) as conn:
            info = await conn.info()
            assert info["env"]["name"] == "echo" and info["env"]["action"] == "text"
            assert info["limits"]["max_sessions"] == 10_000 and info["protocol"] == 3

    run(main())


def test_many_sessions_share_one_connection(echo_url):
    async def main():
        async with openenv_gym.connect(echo_url) as conn:
            sessions = [conn.session() for _ in range(200)]
            await asyncio.gather(*(s.reset() for s in sessions))
            assert len({s.id for s in sessions}) == 200
            results = await asyncio.gather(*(s.step(f"m{i}") for i, s in enumerate(sessions)))
            assert [r[0] for r in results] == [f"m{i}" for i in range(200)]
            await asyncio.gather(*(s.close() for s in sessions))

    run(main())


def test_request_timeout_leaves_the_connection_usable(faulty_url):
    async def main():
        async with openenv_gym.connect(faulty_url, request_timeout=0.05) as conn:
            session = conn.session()
            await session.reset()
            with pytest.raises(errors.RequestTimeoutError, match="request_timeout"):
                await session.step("slow")
            await asyncio.sleep(0.4)  # the late answer arrives and is dropped by id
            other = conn.session()
            await other.reset()
            assert (await other.step("fine"))[0] == "fine"

    run(main())


def test_each_request_times_out_on_its_own_never_early(faulty_url):
    """One timer serves every request of a connection: a request is given up once its own time is up, not with
    an earlier one's and never before; answered requests are not touched."""
    async def main():
        async with openenv_gym.connect(faulty_url, request_timeout=0.2) as conn:  # the server's step timeout: 0.5 s
            first, second, busy = conn.session(), conn.session(), conn.session()
            await asyncio.gather(first.reset(), second.reset(), busy.reset())
            loop = asyncio.get_running_loop()

            async def hang(session) -> tuple[float, float]:
                sent = loop.time()
                with pytest.raises(errors.RequestTimeoutError):
                    await session.step("hang")
                return sent, loop.time()

            early = asyncio.ensure_future(hang(first))
            await asyncio.sleep(0.1)
            late = asyncio.ensure_future(hang(second))
            while not early.done():  # answered requests meanwhile
                assert (await busy.step("fine"))[0] == "fine"
            assert not late.done()
            for sent, failed in (await early, await late):
                assert failed - sent >= 0.2

    run(main())


def test_unreachable_server_is_a_clear_error():
    async def main():
        await openenv_gym.connect("ws://127.0.0.1:9")

    with pytest.raises(errors.ServerRefusedError, match="is the server running"):  # nothing listens on port 9
        run(main())


def test_a_server_that_accepts_then_hangs_up_is_unreachable_but_not_refused():
    """Only a refused connection means nothing listens; one cut during the handshake may be a server going down,
    or a proxy in the way, so it is not taken for a refusal."""

    async def main():
        async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
        async with server:
            port = server.sockets[0].getsockname()[1]
            with pytest.raises(errors.ServerUnreachableError) as caught:
                await openenv_gym.connect(f"ws://127.0.0.1:{port}")
            assert not isinstance(caught.value, errors.ServerRefusedError)

    run(main())


def test_http_urls_are_accepted(echo_url):
    async def main():
        async with openenv_gym.connect("http://" + echo_url.removeprefix("ws://")) as conn:
            assert (await conn.info())["env"]["name"] == "echo"

    run(main())


def test_unencodable_action_fails_only_that_request(echo_url):
    async def main():
        async with openenv_gym.connect(echo_url) as conn:
            session = conn.session()
            await session.reset()
            with pytest.raises(errors.InvalidActionError, match="JSON"):
                await session.step({"name": "x", "arguments": {"v": object()}})
            assert (await session.step("still fine"))[0] == "still fine"

    run(main())
