"""TRL's GRPOTrainer, for real, on CPU with a tiny random model built here, against a served env: through
environment_factory and through make_rollout_func. The model is steered to write one tool call, so the env is
really stepped; each test checks the env's rewards reached the trainer's logs and no session stays open."""

import asyncio
import contextlib
import functools
import inspect
import json
import multiprocessing
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("trl")

import httpx
from conftest import ROOT, env_path, health, http_url, wait_until
from datasets import Dataset
from transformers.utils import get_json_schema
from trl import GRPOConfig, GRPOTrainer

from examples.tiny_model import build_model, build_tokenizer, steer, tool_call_text
from openenv_gym.client.local import LocalServer
from openenv_gym.integrations.trl import (
    close_sessions,
    dataset,
    env_reward,
    environment_factory,
    make_rollout_func,
)
from openenv_gym.integrations.trl.factory import OpenEnvGymEnv
from openenv_gym.integrations.trl.lifecycle import CloseSessions
from openenv_gym.integrations.trl.tasks import task_of_prompt, task_of_row
from openenv_gym.integrations.trl.tool_methods import tool_method

os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
CALL = tool_call_text("guess", {"number": 50})


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer([CALL])


def grpo_args(tmp_path, tokenizer, **overrides):
    settings = dict(output_dir=str(tmp_path), use_cpu=True, bf16=False, activation_checkpointing=False,
                    per_device_train_batch_size=4, num_generations=2, max_completion_length=64, max_steps=2,
                    report_to="none", save_strategy="no", logging_steps=1, generation_kwargs=steer(tokenizer, CALL))
    return GRPOConfig(**(settings | overrides))


def recorded(rollout_func):
    """The rollout function, keeping each call's output (in the list returned with it)."""
    outputs = []

    def recording(prompts, trainer):
        outputs.append(rollout_func(prompts, trainer))
        return outputs[-1]
    return recording, outputs


def logged(trainer, key):
    return [entry[key] for entry in trainer.state.log_history if key in entry]


@pytest.mark.parametrize("async_reward", [False, True])
def test_environment_factory_trains_two_steps(tmp_path, tokenizer, guess_url, async_reward):
    Env = environment_factory("openenv/guess", base_url=guess_url, async_reward=async_reward)
    assert inspect.iscoroutinefunction(Env.get_reward) is async_reward  # how TRL tells which it awaits
    trainer = GRPOTrainer(model=build_model(tokenizer), processing_class=tokenizer, reward_funcs=[],
                          train_dataset=dataset(8), args=grpo_args(tmp_path, tokenizer, max_tool_calling_iterations=3),
                          environment_factory=Env)
    trainer.train()
    assert trainer.state.global_step == 2
    # the env was stepped: every rollout of the last batch played the steered guess
    assert all(env.steps >= 1 for env in trainer.environments)
    assert logged(trainer, "tools/call_frequency")[-1] >= 1
    assert logged(trainer, "tools/failure_frequency") == [0.0, 0.0]
    # the env's returns are the trainer's reward: the last step's mean is the last batch's mean return
    returns = [asyncio.run(env.get_reward()) if async_reward else env.get_reward() for env in trainer.environments]
    assert logged(trainer, "rewards/GuessEnv/mean")[-1] == pytest.approx(sum(returns) / len(returns), abs=1e-6)
    assert any(isinstance(cb, CloseSessions) for cb in trainer.callback_handler.callbacks)
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)


def test_rollout_func_trains_two_steps(tmp_path, tokenizer, guess_url):
    rollout_func = make_rollout_func("openenv/guess", base_url=guess_url, max_turns=3)
    recording, outputs = recorded(rollout_func)

    trainer = GRPOTrainer(model=build_model(tokenizer), processing_class=tokenizer, reward_funcs=[env_reward],
                          train_dataset=dataset(8), args=grpo_args(tmp_path, tokenizer), rollout_func=recording)
    trainer.train()
    assert trainer.state.global_step == 2 and len(outputs) == 2
    for out in outputs:
        assert all(steps >= 1 for steps in out["env_steps"])
        for ids, mask, logprobs in zip(out["completion_ids"], out["env_mask"], out["logprobs"], strict=True):
            assert len(ids) == len(mask) == len(logprobs) <= 64
            assert mask[0] == 1 and ids[-1] == tokenizer.eos_token_id  # a model turn first, the model's end last
        multi_turn = [mask for mask, steps in zip(out["env_mask"], out["env_steps"], strict=True) if steps > 1]
        assert multi_turn and all(0 in mask for mask in multi_turn)  # the env's tokens are masked out
        assert out["env_reward"] == [pytest.approx(sum(r)) for r in out["env_rewards"]]
    # identical prompts (a GRPO group) play the same task: their first observations and rewards agree
    first = outputs[0]["env_rewards"]
    assert first[0] == first[1]
    last = outputs[-1]["env_reward"]
    assert logged(trainer, "rewards/env_reward/mean")[-1] == pytest.approx(sum(last) / len(last), abs=1e-6)
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)


def test_tool_methods_read_back_by_transformers():
    spec = {"name": "look-up", "description": "Look something up.\n\nArgs:\n    q: stale text to drop",
            "parameters": {"type": "object", "required": ["class", "mode"], "properties": {
                "class": {"type": "string", "description": "what to\nlook up"},
                "mode": {"enum": ["fast", "slow"]},
                "limit": {"type": "integer", "description": "at most this many"},
                "tags": {"type": "array", "items": {"type": "string"}}}}}
    calls = []
    name, method = tool_method(spec, lambda self, tool, arguments: calls.append((tool, arguments)) or "ok",
                               {"reset"})
    schema = get_json_schema(method)["function"]
    assert name == "look_up" and schema["description"] == "Look something up."
    properties = schema["parameters"]["properties"]
    assert properties["class_"] == {"type": "string", "description": "what to look up"}
    assert properties["mode"]["enum"] == ["fast", "slow"]
    assert properties["limit"]["type"] == "integer" and properties["tags"]["type"] == "array"
    assert sorted(schema["parameters"]["required"]) == ["class_", "mode"]
    assert method(None, class_="cats", mode="fast") == "ok"
    assert calls == [("look-up", {"class": "cats", "mode": "fast"})]  # schema names go to the env


def test_episode_end_and_lost_server_are_tool_results():
    from openenv_gym.client.local import LocalServer

    server = LocalServer("guess", 1, 100)
    url = server.url
    Env = environment_factory("openenv/guess", base_url=url)
    env = Env()
    assert "integer between 1 and 100" in env.reset(seed=0)
    assert env.give_up().endswith("The episode is over; its return is 0. No more tool calls are needed.")
    assert "The episode is over" in env.guess(number=3)  # no crash after the end
    env.reset(seed=1)
    assert close_sessions() >= 1
    assert wait_until(lambda: health(url)["sessions"] == 0)
    reply = env.guess(number=3)
    assert "The episode is over" in reply
    env.reset(seed=2)
    server.stop()
    reply = env.guess(number=3)  # the server is gone: a tool result, not an exception
    assert reply.startswith("The episode is failed (") and "No more tool calls are needed." in reply


def test_rows_and_prompts_choose_tasks():
    assert task_of_row({"prompt": "p", "seed": 3, "other": 1}) == (3, {})
    assert task_of_row({"split": "test", "index": 2, "task_spec": None}) == (None, {"split": "test", "index": 2})
    assert task_of_row({"prompt": [{"role": "user", "content": "a"}]}) == task_of_row(
        {"prompt": [{"role": "user", "content": "a"}], "unrelated": 5})
    assert task_of_row({"prompt": "a"})[0] != task_of_row({"prompt": "b"})[0]
    rows = dataset(3, split="train")
    assert [task_of_prompt(row["prompt"]) for row in rows] == [(None, {"split": "train", "index": i}) for i in range(3)]
    assert [task_of_prompt(row["prompt"]) for row in dataset(2, seed=7)] == [(7, {}), (8, {})]


def test_text_env_gets_one_send_message_tool(echo_url):
    Env = environment_factory("openenv/echo", base_url=echo_url)
    assert Env.tool_names == ["send_message"]
    env = Env()
    env.reset(seed=0)
    assert "hello" in env.send_message(message="hello")
    assert env.get_reward() > 0
    schema = get_json_schema(env.send_message)["function"]
    assert schema["parameters"]["required"] == ["message"]
    env._close()


def test_an_env_that_fails_ends_its_episodes_not_the_training(tmp_path, tokenizer, faulty_url):
    # openenv/ors with transport="native" reaches any running openenv_gym server: here one whose resets fail
    rollout_func = make_rollout_func("openenv/ors", base_url=faulty_url, transport="native",
                                     options={"fail": True}, max_turns=2)
    recording, outputs = recorded(rollout_func)

    trainer = GRPOTrainer(model=build_model(tokenizer), processing_class=tokenizer, reward_funcs=[env_reward],
                          train_dataset=dataset(4), args=grpo_args(tmp_path, tokenizer, max_steps=1),
                          rollout_func=recording)
    trainer.train()
    assert trainer.state.global_step == 1
    out = outputs[0]
    assert all(error.startswith("EnvError: ") and "reset failed on purpose" in error for error in out["env_error"])
    assert out["env_steps"] == [0] * 4 and out["env_reward"] == [0.0] * 4
    # a failed episode is no score: TRL leaves it out of its group's baseline (not a 0 that would bias it)
    assert env_reward(out["completion_ids"], env_reward=out["env_reward"], env_error=out["env_error"]) == [None] * 4
    assert env_reward(["a", "b"], env_reward=[1.0, 2.0], env_error=[None, "EnvError: x"]) == [1.0, None]
    assert all(ids and all(out_mask == 1 for out_mask in mask)
               for ids, mask in zip(out["completion_ids"], out["env_mask"], strict=True))  # the model's turn only
    assert wait_until(lambda: health(faulty_url)["sessions"] == 0)


def test_environment_classes_pickle_for_spawned_workers(guess_url):
    Env = environment_factory("openenv/guess", base_url=guess_url)
    data = pickle.dumps(Env)
    # a fresh interpreter, as AsyncGRPOTrainer's spawned rollout worker: the class is rebuilt and plays
    script = ("import pickle, sys; Env = pickle.loads(sys.stdin.buffer.read()); env = Env(); "
              "print(Env.__name__, Env.tool_names, env.reset(seed=0)[:12], env.guess(number=50)); env._close()")
    done = subprocess.run([sys.executable, "-c", script], input=data, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    printed = done.stdout.decode()
    assert printed.startswith("GuessEnv ['divisible_by', 'give_up', 'guess'] I am thinkin ")
    assert "50 is correct!" in printed or "than 50." in printed
    assert pickle.loads(data).target.urls == (guess_url,)


@pytest.mark.parametrize("async_reward", [False, True])
def test_environment_classes_work_from_a_pool_of_threads(guess_url, async_reward):
    """As TRL's AsyncGRPOTrainer drives them (its rollout worker, trl/experimental/async_grpo): several rollouts at
    once, each instance reset and stepped in whichever thread of a pool is free, get_reward awaited on the loop when
    it is a coroutine function, else called in the pool. An instance made on one thread is used from others."""
    Env = environment_factory("openenv/guess", base_url=guess_url, async_reward=async_reward)
    envs = [Env() for _ in range(12)]

    async def train() -> list[list[float]]:
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(6)

        async def rollout(env, seed: int) -> float:
            await loop.run_in_executor(pool, functools.partial(env.reset, seed=seed))
            for number in (50, 25, 75):
                await loop.run_in_executor(pool, functools.partial(env.guess, number=number))
            if async_reward:
                return await env.get_reward()
            return await loop.run_in_executor(pool, env.get_reward)

        try:
            return [await asyncio.gather(*(rollout(env, seed) for seed, env in enumerate(envs))) for _ in range(3)]
        finally:
            pool.shutdown()

    rounds = asyncio.run(train())
    alone = Env()  # the same seeds and moves, one at a time on this thread
    expected = []
    for seed in range(12):
        alone.reset(seed=seed)
        for number in (50, 25, 75):
            alone.guess(number=number)
        expected.append(OpenEnvGymEnv.get_reward(alone))
    assert rounds == [expected] * 3
    assert close_sessions() >= 13
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)


WORKER = """
import multiprocessing, pickle, sys
from types import SimpleNamespace

def rollout_worker(data):  # as AsyncGRPOTrainer's spawned worker: what it was sent is unpickled, used, dropped
    from examples.tiny_model import build_tokenizer, tool_call_text
    Env, rollout_func = pickle.loads(data)
    envs = [Env() for _ in range(3)]
    for seed, env in enumerate(envs):
        env.reset(seed=seed)
        env.guess(number=50)
    tokenizer = build_tokenizer([tool_call_text("guess", {"number": 50})])
    trainer = SimpleNamespace(processing_class=tokenizer, chat_template_kwargs={}, max_completion_length=64)
    rollout_func(["Guess."] * 4, trainer)

if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=rollout_worker, args=(sys.stdin.buffer.read(),))
    child.start()
    child.join()
    sys.exit(child.exitcode)
"""


def test_a_spawned_worker_closes_its_sessions_when_it_ends(tmp_path, guess_url, tokenizer):
    """A spawned child that drops what it unpickled (env instances, a rollout function) and ends: their sessions
    end with it, not after the server's resume window (a rollout function nobody closed is closed with its loop)."""
    from examples.tiny_model import FixedReply

    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    before = health(guess_url)["sessions"]
    ids = tokenizer(CALL)["input_ids"] + [tokenizer.eos_token_id]
    data = pickle.dumps((environment_factory("openenv/guess", base_url=guess_url),
                         make_rollout_func("openenv/guess", base_url=guess_url, max_turns=2, generate=FixedReply(ids))))
    done = subprocess.run([sys.executable, str(script)], input=data, capture_output=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert health(guess_url)["sessions"] == before  # at once


def completions_server(ids: list[int]) -> ThreadingHTTPServer:
    """vLLM's /v1/completions as TRL's asynchronous rollout worker reads it (token ids and their logprobs), always
    writing `ids`: vLLM cannot run here (no GPU)."""
    class Completions(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"choices": [{"token_ids": ids,
                                            "logprobs": {"token_logprobs": [0.0] * len(ids)}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Completions)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_trls_asynchronous_rollout_worker_plays_the_env_class(guess_url, tokenizer):
    """TRL's own rollout worker of AsyncGRPOTrainer (its child process, spawned with the class pickled, several
    rollouts at once over a pool of threads, get_reward awaited), as AsyncRolloutWorker starts it (whose only
    addition is a check that vllm is installed). Each group's reward is what the env gives the same moves played
    here one at a time, and the child's end leaves no session."""
    from trl.experimental.async_grpo.async_rollout_worker import _AsyncRolloutLoop, _child_main

    ids = tokenizer(CALL)["input_ids"] + [tokenizer.eos_token_id]
    completions = completions_server(ids)
    Env = environment_factory("openenv/guess", base_url=guess_url, async_reward=True)
    seeds = [3, 0, 11, 7]
    ctx = multiprocessing.get_context("spawn")
    # held here until the child ends: Process.start() drops its arguments, and a semaphore nobody holds is unlinked
    # before the child can open it
    shared = (ctx.Queue(), ctx.Value("i", 0), ctx.Event(), ctx.Event(), ctx.Value("d", time.time()), ctx.Event(),
              ctx.Queue(1), ctx.Queue(4096))
    samples, stop, failed, failure = shared[0], shared[2], shared[5], shared[6]
    settings = dict(model_name="tiny", processing_class=tokenizer, eos_token_ids=[tokenizer.eos_token_id],
                    dataset=Dataset.from_list([{"prompt": [{"role": "user", "content": "Guess."}], "seed": seed}
                                               for seed in seeds]),
                    reward_funcs=[], environment_factory=Env, num_generations=2, max_inflight_tasks=4,
                    max_tool_calling_iterations=2, max_tokens=16, queue_maxsize=0, dataset_start_index=0,
                    vllm_server_url=f"http://127.0.0.1:{completions.server_port}")
    child = ctx.Process(target=_child_main, args=(_AsyncRolloutLoop, settings, *shared), daemon=True)
    child.start()
    try:
        got, deadline = [], time.monotonic() + 90
        while len(got) < 2 * len(seeds):
            assert not failed.is_set(), failure.get(timeout=5)
            assert child.is_alive(), f"the worker exited ({child.exitcode})"
            assert time.monotonic() < deadline, f"{len(got)} of {2 * len(seeds)} rollouts in 90 s"
            with contextlib.suppress(queue.Empty):
                got.append(samples.get(timeout=1))
    finally:
        stop.set()
        child.join(60)
        completions.shutdown()
    assert child.exitcode == 0
    expected = []
    env = Env()
    for seed in seeds:  # the worker's moves: the steered call, twice
        env.reset(seed=seed)
        env.guess(number=50)
        env.guess(number=50)
        expected.append(OpenEnvGymEnv.get_reward(env))
    env._close()
    rewards = {sample.group_id % len(seeds): sample.metrics["rewards/GuessEnv"] for sample in got}
    assert [rewards[k] for k in range(len(seeds))] == pytest.approx(expected)
    assert all(sample.metrics["tools/call_frequency"] == 2 for sample in got)
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)


def test_the_rollout_function_pickles_for_a_worker_process(guess_url, tokenizer):
    """Pickled by recipe: a fresh interpreter (a spawned worker) rebuilds it, opens its own sessions and plays."""
    from examples.tiny_model import FixedReply

    ids = tokenizer(CALL)["input_ids"] + [tokenizer.eos_token_id]
    rollout_func = make_rollout_func("openenv/guess", base_url=guess_url, max_turns=2, generate=FixedReply(ids))
    script = ("import pickle, sys; from types import SimpleNamespace; from examples.tiny_model import "
              "build_tokenizer, tool_call_text; "
              "tokenizer = build_tokenizer([tool_call_text('guess', {'number': 50})]); "
              "rollout_func = pickle.loads(sys.stdin.buffer.read()); "
              "trainer = SimpleNamespace(processing_class=tokenizer, chat_template_kwargs={}, "
              "max_completion_length=64); "
              "print(rollout_func(['Guess.'] * 3, trainer)['env_steps'], rollout_func.max_turns)")
    done = subprocess.run([sys.executable, "-c", script], input=pickle.dumps(rollout_func), capture_output=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    steps, max_turns = done.stdout.decode().split("] ")
    assert max_turns.strip() == "2" and all(int(s) >= 1 for s in steps.strip("[").split(","))
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)  # the worker's exit closed its sessions


def test_vllm_server_generation_reads_trls_client_answer():
    """vLLM cannot run here (no GPU, and TRL's VLLMClient needs the vllm package), so the client is stood in for by
    an object answering with the shape VLLMClient.generate documents: completion ids and [token][top-k] logprobs,
    the sampled token first."""
    from types import SimpleNamespace

    from openenv_gym.integrations.trl.generation import VLLMServerGenerator

    calls = []

    def generate(**request):
        calls.append(request)
        return {"prompt_ids": [[1], [2]], "completion_ids": [[5, 9, 7], [6, 6]],
                "logprobs": [[[-0.1], [-0.2], [-0.3]], [[-1.0], [-2.0]]], "logprob_token_ids": None}

    trainer = SimpleNamespace(vllm_mode="server", eos_token_ids=[9], temperature=0.7, top_p=0.9, top_k=None,
                              min_p=None, repetition_penalty=1.0, args=SimpleNamespace(generation_kwargs={"seed": 1}),
                              vllm_generation=SimpleNamespace(vllm_client=SimpleNamespace(generate=generate)))
    samples = VLLMServerGenerator(trainer)([[1], [2]], max_new_tokens=3)
    assert samples == [([5, 9], [-0.1, -0.2]), ([6, 6], [-1.0, -2.0])]  # cut after the end token
    assert calls[0] | {"prompts": None} == {"prompts": None, "n": 1, "max_tokens": 3, "temperature": 0.7,
                                            "top_p": 0.9, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0,
                                            "logprobs": 0, "generation_kwargs": {"seed": 1}}
    with pytest.raises(ValueError, match="server mode only"):
        VLLMServerGenerator(SimpleNamespace(vllm_mode="colocate"))


def test_rollout_func_gets_group_rewards_from_an_env_that_scores_groups(tmp_path, tokenizer):
    """tests/envs/contest scores a group on the server (its longest reply wins): each GRPO group (a run of
    identical prompts) is one group there, and its rewards are what the trainer trains on."""

    with LocalServer(env_path("contest"), 1, 100) as server:
        rollout_func = make_rollout_func("openenv/ors", base_url=server.url, transport="native", max_turns=2)
        recording, outputs = recorded(rollout_func)

        trainer = GRPOTrainer(model=build_model(tokenizer), processing_class=tokenizer, reward_funcs=[env_reward],
                              train_dataset=dataset(4), args=grpo_args(tmp_path, tokenizer, max_steps=2),
                              rollout_func=recording)
        trainer.train()
        assert trainer.state.global_step == 2
        for out in outputs:
            replies = [len(tokenizer.decode(ids, skip_special_tokens=True)) for ids in out["completion_ids"]]
            for leader in range(0, len(replies), 2):  # num_generations=2: each pair of identical prompts
                pair = replies[leader:leader + 2]
                expected = [(n - min(pair)) / ((max(pair) - min(pair)) or 1) for n in pair]
                assert out["env_group_reward"][leader:leader + 2] == pytest.approx(expected)
            assert out["env_reward"] == [0.0] * len(replies)  # the env's own per-episode reward
        last = outputs[-1]["env_group_reward"]
        assert logged(trainer, "rewards/env_reward/mean")[-1] == pytest.approx(sum(last) / len(last), abs=1e-6)
        assert wait_until(lambda: health(server.url)["sessions"] == 0)


def test_environment_factory_rewards_are_group_scores_from_an_env_that_scores_groups(tmp_path):
    """Consecutive resets of one row form a group on the server (tests/envs/contest: its longest reply wins);
    get_reward() is the member's group reward, asked once per group; a member that did not end gets None."""

    with LocalServer(env_path("contest"), 1, 100) as server:
        Env = environment_factory("openenv/ors", base_url=server.url, transport="native")
        envs = [Env() for _ in range(5)]
        for env, row in zip(envs, [{"seed": 1}] * 3 + [{"seed": 2}] * 2, strict=True):
            env.reset(**row)
        for env, message in zip(envs, ["a" * 5, "a" * 1, "a" * 3, "b" * 2, "again"], strict=True):
            env.send_message(message=message)  # the last one's episode goes on: it did not end
        assert [env.get_reward() for env in envs] == [1.0, 0.0, 0.5, 0.0, None]
        info = httpx_info(server.url)
        assert info["groups"]["scored"] == 2  # one request per group
        close_sessions()

        message = tool_call_text("send_message", {"message": "a reply"})
        tokenizer = build_tokenizer([message])
        trainer = GRPOTrainer(model=build_model(tokenizer), processing_class=tokenizer, reward_funcs=[],
                              train_dataset=dataset(4), environment_factory=environment_factory(
                                  "openenv/ors", base_url=server.url, transport="native"),
                              args=grpo_args(tmp_path, tokenizer, max_tool_calling_iterations=2,
                                             generation_kwargs=steer(tokenizer, message)))
        trainer.train()
        assert trainer.state.global_step == 2
        # every batch of 4 is 2 GRPO groups of 2, each scored once by the server
        assert httpx_info(server.url)["groups"]["scored"] == 2 + 2 * 2
        rewards = [env.get_reward() for env in trainer.environments]
        assert logged(trainer, "rewards/ContestEnv/mean")[-1] == pytest.approx(sum(rewards) / len(rewards), abs=1e-6)
        assert wait_until(lambda: health(server.url)["sessions"] == 0)


def httpx_info(url):
    return httpx.get(http_url(url) + "/info", timeout=5).json()


SCRIPT = """
import asyncio, sys
from types import SimpleNamespace
from examples.tiny_model import build_tokenizer, tool_call_text
from openenv_gym.integrations.trl import make_rollout_func

call = tool_call_text("guess", {"number": 50})
tokenizer = build_tokenizer([call])
ids = tokenizer(call)["input_ids"] + [tokenizer.eos_token_id]
rollout_func = make_rollout_func("openenv/guess", base_url=sys.argv[1], max_turns=2,
                                 generate=lambda sequences, n: [(ids, [0.0] * len(ids)) for _ in sequences])
trainer = SimpleNamespace(processing_class=tokenizer, chat_template_kwargs={}, max_completion_length=64)

async def in_a_loop():  # an async script, or a notebook cell: the function was made outside any loop
    return rollout_func(["Guess the number."] * 4, trainer)

out = asyncio.run(in_a_loop()) if sys.argv[2] == "async" else rollout_func(["Guess the number."] * 4, trainer)
print(out["env_steps"])
"""


@pytest.mark.parametrize("where", ["sync", "async"])
def test_a_script_calling_the_rollout_function_directly_leaves_no_session_open(tmp_path, where):
    """Outside a trainer (an evaluation, a first try): the script's normal exit ends its sessions at once, not after
    the server's resume window; a function made in plain code may be called inside a running loop."""
    script = tmp_path / "evaluate.py"
    script.write_text(SCRIPT)
    with LocalServer("guess", 2, 100) as server:
        done = subprocess.run([sys.executable, str(script), server.url, where], capture_output=True, text=True,
                              timeout=120, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == "[2, 2, 2, 2]"  # four episodes were played
        assert health(server.url)["sessions"] == 0  # at once: the exit closed them


def test_spec_fills_dataset_factory_and_reward_funcs_at_once(tmp_path, tokenizer, guess_url):
    from openenv_gym.integrations.trl import spec

    env = spec("openenv/guess", base_url=guess_url, num_tasks=8, seed=100)
    rows = env.train_dataset
    assert len(rows) == 8 and rows["seed"] == list(range(100, 108)) and env.reward_funcs == []
    with pytest.raises(ValueError, match="has no task splits"):
        _ = spec("openenv/guess", base_url=guess_url, split="train").train_dataset
    trainer = GRPOTrainer(model=build_model(tokenizer), processing_class=tokenizer, train_dataset=env.train_dataset,
                          environment_factory=env.environment_factory, reward_funcs=env.reward_funcs,
                          args=grpo_args(tmp_path, tokenizer, max_tool_calling_iterations=3))
    trainer.train()
    assert trainer.state.global_step == 2
    returns = [e.get_reward() for e in trainer.environments]  # the class's get_reward is the reward
    assert logged(trainer, "rewards/GuessEnv/mean")[-1] == pytest.approx(sum(returns) / len(returns), abs=1e-6)
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)


def test_a_dict_of_environment_factories_picks_each_rows_env(tmp_path, tokenizer, guess_url, echo_url):
    """TRL 1.16's multi-environment mode: several of our env classes, each row naming its own by the
    `environment` column; each class's get_reward scores only its own rollouts."""
    from datasets import concatenate_datasets

    factories = {"guess": environment_factory("openenv/guess", base_url=guess_url),
                 "echo": environment_factory("openenv/echo", base_url=echo_url)}
    rows = concatenate_datasets([dataset(4).add_column("environment", ["guess"] * 4),
                                 dataset(4, seed=50).add_column("environment", ["echo"] * 4)]).shuffle(seed=0)
    trainer = GRPOTrainer(model=build_model(tokenizer), processing_class=tokenizer, reward_funcs=[],
                          train_dataset=rows, environment_factory=factories,
                          args=grpo_args(tmp_path, tokenizer, max_tool_calling_iterations=2, max_steps=2))
    trainer.train()
    assert trainer.state.global_step == 2
    # both classes played (the batches of 4 rows mix them) and each scored its own rollouts as a reward column
    assert {type(env).__name__ for env in trainer.environments} == {"GuessEnv", "EchoEnv"}
    assert logged(trainer, "rewards/GuessEnv/mean") and logged(trainer, "rewards/EchoEnv/mean")
    assert wait_until(lambda: health(guess_url)["sessions"] == 0 and health(echo_url)["sessions"] == 0)


COMPACTING = '''
    import json, os, urllib.request

    def chat(messages):
        request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", method="POST",
                                         data=json.dumps({"messages": messages}).encode(),
                                         headers={"content-type": "application/json"})
        return json.loads(urllib.request.urlopen(request).read())["choices"][0]["message"]["content"]

    system, task = {"role": "system", "content": "Solve it."}, {"role": "user", "content": "the task"}
    first = chat([system, task])
    second = chat([system, task, {"role": "assistant", "content": first}, {"role": "user", "content": "more"}])
    chat([system, {"role": "user", "content": "the task, summarised"}])  # (its context compacted: a new branch)
    print(json.dumps({"reward": 1.0}))
'''


def test_the_rollout_function_trains_only_on_what_the_program_asked_in_its_first_branch(tmp_path, tokenizer):
    """An agent program that compacts its context asks its third turn in a context the trainer's tokens do not hold:
    the model's tokens of that turn get env_mask 0 (info["turn"] says the branch broke), the two before 1."""
    from types import SimpleNamespace

    from test_agent_env import agent_env

    from examples.tiny_model import FixedReply
    from openenv_gym.manifests import load_manifest
    from openenv_gym.registry import register_manifest

    ids = tokenizer("ok")["input_ids"] + [tokenizer.eos_token_id]
    folder = agent_env(tmp_path / "compacting", COMPACTING)
    register_manifest(load_manifest(folder))
    with LocalServer(folder, 1, 10) as server:
        rollout_func = make_rollout_func("openenv/agent-compacting", base_url=server.url, max_turns=4,
                                         generate=FixedReply(ids))
        trainer = SimpleNamespace(processing_class=tokenizer, chat_template_kwargs={}, max_completion_length=512)
        output = rollout_func(["Go."], trainer)
    mask, completion = output["env_mask"][0], output["completion_ids"][0]
    assert output["env_reward"] == [1.0] and output["env_steps"] == [3] and output["env_error"] == [None]
    assert completion[-len(ids):] == ids and mask[-len(ids):] == [0] * len(ids)  # (the third turn's reply)
    assert sum(mask) == 2 * len(ids)  # (the first two replies, trained on)


class _Given:
    """A uniform sampler over guess ranges that keeps every group given back (to compare with what was played)."""

    def __new__(cls):
        from openenv_gym.sampling import UniformSampler

        class Recording(UniformSampler):
            def update(self, task, rewards, costs=None):
                self.given.append((task, list(rewards)))
                super().update(task, rewards, costs)

        sampler = Recording([{"low": 1, "high": 40}, {"low": 49, "high": 50}, {"low": 60, "high": 90},
                             {"low": 45, "high": 55}], group_size=2, seed=0)
        sampler.given = []
        return sampler


def test_a_sampler_chooses_each_groups_task_in_both_trl_paths(tmp_path, tokenizer, guess_url):
    """spec(sampler=) and make_rollout_func(sampler=): the rows only set the prompt; each GRPO group (a run of
    num_generations resets of one row) plays the task the sampler drew, and its rewards go back to update."""
    from openenv_gym.integrations.trl import spec

    sampler = _Given()
    env = spec("openenv/guess", base_url=guess_url, sampler=sampler)
    rows = env.train_dataset
    assert len(rows) == 4 and rows["slot"] == [0, 1, 2, 3] and "seed" not in rows.column_names

    class Seen(env.environment_factory):  # keeps the first observation, which names the range it plays
        def reset(self, **row):
            self.first = super().reset(**row)
            return self.first

    trainer = GRPOTrainer(model=build_model(tokenizer), processing_class=tokenizer, train_dataset=rows,
                          environment_factory=Seen, reward_funcs=env.reward_funcs,
                          args=grpo_args(tmp_path, tokenizer, max_tool_calling_iterations=3))
    trainer.train()
    assert len(sampler.given) == 4 == sampler.metrics()["groups"]  # 2 steps of 2 groups, each given back once
    last = trainer.environments  # the last batch: its groups are the last two given back, in order
    for g, (task, rewards) in enumerate(sampler.given[-2:]):
        members = last[2 * g:2 * g + 2]
        assert all(f"between {task['low']} and {task['high']}" in e.first for e in members)
        assert rewards == [e.get_reward() for e in members]

    sampler = _Given()
    rollout_func, outputs = recorded(make_rollout_func("openenv/guess", base_url=guess_url, max_turns=2,
                                                       sampler=sampler))
    trainer = GRPOTrainer(model=build_model(tokenizer), processing_class=tokenizer, reward_funcs=[env_reward],
                          train_dataset=dataset(4, sampled=True), args=grpo_args(tmp_path, tokenizer),
                          rollout_func=rollout_func)
    trainer.train()
    assert len(sampler.given) == 4
    played = [(out["env_reward"][k], tokenizer.decode(out["prompt_ids"][k])) for out in outputs for k in range(4)]
    for g, (task, rewards) in enumerate(sampler.given):  # the prompt holds the first observation: the range played
        assert [r for r, _ in played[2 * g:2 * g + 2]] == pytest.approx(rewards)
        assert all(f"between {task['low']} and {task['high']}" in prompt for _, prompt in played[2 * g:2 * g + 2])
    with pytest.raises(ValueError, match="make the trainer's num_generations the sampler's group_size"):
        make_rollout_func("openenv/guess", base_url=guess_url, sampler=_Given())(
            [[{"role": "user", "content": "x"}]] * 3, trainer)
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)
