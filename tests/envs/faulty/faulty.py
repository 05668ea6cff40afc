"""A test environment that misbehaves on command; any other action is echoed back."""

import asyncio

import httpx

from openenv_gym import Environment, ResetResult, StepResult


class FaultyEnv(Environment):
    name = "faulty"

    async def reset(self, *, seed=None, options=None):
        if (options or {}).get("fail"):
            raise RuntimeError("reset failed on purpose")
        return ResetResult("ready", {"seed": seed})

    async def step(self, action):
        if action == "raise":
            raise RuntimeError("boom")
        if action == "hang":
            await asyncio.sleep(3600)
        if action == "slow":
            await asyncio.sleep(0.3)
            return StepResult("slow done")
        if action == "unencodable":
            return StepResult("x", info={"value": object()})
        if action == "not-a-result":
            return "a plain string"
        if action == "print":  # an environment that writes a lot to stdout must never block
            print("x" * 100_000, flush=True)
            return StepResult("printed")
        if action == "end":
            return StepResult("bye", 1.0, terminated=True)
        if action == "expire":  # a deadline of its own, opened before its first wait, that passes
            try:
                async with asyncio.timeout(0.05):
                    await asyncio.sleep(5)
            except TimeoutError:
                return StepResult("its own deadline passed")
        if isinstance(action, str) and action.startswith("fetch "):  # an HTTP request (httpx opens anyio scopes)
            async with httpx.AsyncClient() as client:
                response = await client.get(action.removeprefix("fetch "))
            return StepResult(f"fetched: {response.status_code}")
        return StepResult(action if isinstance(action, str) else repr(action))
