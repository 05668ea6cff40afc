"""`openenv-gym rollout ENV_ID --model-url http://HOST/v1 --model NAME --episodes N`: play episodes of an
environment with a model behind an OpenAI-compatible server, one JSON line per episode.

A progress bar shows the episodes done, the mean reward and the env steps/s; a summary table follows. A model
server error ends only its own episode (reported in the summary and in that episode's `error`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

import orjson
from tqdm import tqdm

from openenv_gym.rollout import Episode, Group, OpenAIPolicy, rollouts
from openenv_gym.rollout.export import EXPORTS, ExportSummary
from openenv_gym.rollout.resume import played
from openenv_gym.sampling import GATES


def add_rollout(commands: argparse._SubParsersAction) -> None:
    from openenv_gym.cli import positive_int
    from openenv_gym.cli.renamed import add_renamed

    parser = commands.add_parser("rollout", help="play episodes with a model behind an OpenAI-compatible server",
                                 description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_id", help="a gym id: openenv/guess, openenv/ors-myenv, ...")
    model_server = parser.add_mutually_exclusive_group(required=True)
    add_renamed(model_server, "--base-url", model_server.add_argument(
        "--model-url", help="the model server's OpenAI API root, e.g. http://HOST/v1"))
    parser.add_argument("--model", required=True, help="the model name the server serves")
    parser.add_argument("--episodes", type=positive_int, required=True,
                        help="how many episodes to play (with --group-size: how many groups)")
    parser.add_argument("--group-size", type=positive_int,
                        help="play each task this many times at once (GRPO groups); each line then carries its "
                             "group's id, its advantage and whether the group is complete")
    parser.add_argument("--advantage", choices=("mean", "mean_std"), default="mean",
                        help="with --group-size: a return minus the group's mean, or over its standard deviation too")
    parser.add_argument("--num-envs", type=positive_int, default=64, help="episodes played at once (default 64)")
    add_renamed(parser, "--out", parser.add_argument(
        "--output", type=Path, help="write one JSON line per episode here (default: nowhere)"))
    parser.add_argument("--resume", action="store_true",
                        help="continue the run that wrote --output (same --episodes, --seed, --split, --group-size): "
                             "play only what the file lacks, appending to it; a line cut short and the lines of a "
                             "group not whole are played again")
    parser.add_argument("--env-url", nargs="+",
                        help="running env servers, or one dns+ws://NAME:PORT for every address of NAME (default: start "
                             "a local one)")
    parser.add_argument("--env", help="the environment's name on the env servers, for openenv/ors")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first episode, +1 for each next (default 0)")
    parser.add_argument("--split", help="play the tasks of this split in order (index 0, 1, ...)")
    parser.add_argument("--max-turns", type=positive_int, help="truncate episodes after this many steps")
    parser.add_argument("--system-prompt", help="a system message before each episode's first observation")
    parser.add_argument("--max-concurrency", type=positive_int, default=64,
                        help="model requests in flight at most (default 64)")
    parser.add_argument("--temperature", type=float, help="sampling temperature (default: the server's)")
    parser.add_argument("--max-tokens", type=positive_int, help="tokens per model turn at most")
    parser.add_argument("--api-key", help="bearer token of the model server (default $OPENAI_API_KEY)")
    parser.add_argument("--sampler", choices=("sequential", "uniform", "curriculum", "pools", "server"),
                        help="with --group-size: choose each group's task from the env's catalog (--split: one split) "
                             "with this sampler, which learns from each group's rewards; its metrics are printed at "
                             "the end. server: the sampler of the server at --env-url (`serve --sampler`), shared "
                             "with every worker that names it")
    parser.add_argument("--gate", dest="gates", action="append", choices=("zero-signal",), default=[],
                        help="with --sampler: drop groups whose members all scored the same, each replaced by another "
                             "(as many as --episodes in the run at most)")
    parser.add_argument("--export", choices=EXPORTS,
                        help="train: write the exact training export to --output instead of episodes, one record per "
                             "branch of each episode's model turns: its prompt and completion token ids, a logprob "
                             "per completion token and a loss mask as the model server gave them; an episode whose "
                             "tokens are not faithful is exported for evaluation, with the reason (counted at the end)")
    parser.set_defaults(run=run_rollout)


def _already_played(args: argparse.Namespace) -> frozenset[int]:
    """With --resume: the plan numbers --output holds whole (the file rewritten without what is played again)."""
    if not args.resume:
        return frozenset()
    if args.output is None:
        sys.exit("openenv-gym rollout: --resume continues the file of --output; give it")
    try:
        done = played(args.output, episodes=args.episodes, seed=args.seed, split=args.split, group_size=args.group_size)
    except ValueError as exc:
        sys.exit(f"openenv-gym rollout: {exc}")
    what = "groups" if args.group_size else "episodes"
    again = f"; {done.dropped} unfinished lines taken out, played again" if done.dropped else ""
    print(f"resuming {args.output}: {len(done.numbers)} of {args.episodes} {what} played{again}", file=sys.stderr)
    return done.numbers


def run_rollout(args: argparse.Namespace) -> None:
    skip = _already_played(args)
    if len(skip) == args.episodes:
        print(f"{args.output} holds the whole run already; nothing to play")
        return
    policy = OpenAIPolicy(args.model_url, args.model, api_key=args.api_key, max_concurrency=args.max_concurrency,
                          temperature=args.temperature, max_tokens=args.max_tokens)
    sampler = _sampler(args)
    tasks = None if args.split is None or sampler else ({"split": args.split, "index": i} for i in range(args.episodes))
    plays = (args.episodes - len(skip)) * (args.group_size or 1)
    grouped = {} if args.group_size is None else {"group_size": args.group_size, "advantage": args.advantage}
    if sampler is not None:
        grouped |= {"sampler": sampler, "gates": [GATES[name]() for name in args.gates]}
    if args.export and (args.output is None or args.resume):
        sys.exit("openenv-gym rollout: --export writes its records to --output: give --output (and it cannot "
                 "--resume, which reads episodes back)")
    stream = rollouts(args.env_id, policy, num_envs=min(args.num_envs, plays), episodes=args.episodes,
                      tasks=tasks, seed=args.seed, max_turns=args.max_turns, system_prompt=args.system_prompt,
                      base_url=args.env_url, env=args.env, skip=skip, record=args.export, **grouped)
    with contextlib.ExitStack() as files:
        out = files.enter_context(args.output.open("ab" if args.resume else "wb")) if args.output else None
        summary = asyncio.run(_play(stream, policy, plays, out))
    print(summary.table())
    if args.export:
        print("\n".join(summary.exported.lines()))
    if sampler is not None:
        print("\n".join(f"sampler {name:<26}  {value:.4g}" for name, value in sampler.metrics().items()))
    if not summary.returns:
        sys.exit("openenv-gym rollout: no episode completed; see the errors above (and in --output)")


def _sampler(args: argparse.Namespace) -> Any:
    """The --sampler over the env's catalog (None without one)."""
    if args.sampler is None:
        if args.gates:
            sys.exit("openenv-gym rollout: --gate drops groups a --sampler chose: give --sampler too")
        return None
    if args.group_size is None or args.resume:
        sys.exit("openenv-gym rollout: --sampler chooses the task of each group: give --group-size (and it cannot "
                 "--resume: its choices are not a plan to continue)")
    from openenv_gym.sampling import SAMPLERS, ServerSampler, catalog

    source = args.env_url[0] if args.env_url else args.env_id
    if args.sampler == "server":
        if not args.env_url:
            sys.exit("openenv-gym rollout: --sampler server asks the server at --env-url for each group's task: "
                     "give --env-url")
        try:
            shared = ServerSampler(source)
        except (OSError, ValueError) as exc:
            sys.exit(f"openenv-gym rollout: {exc}")
        if shared.group_size != args.group_size:
            sys.exit(f"openenv-gym rollout: the server's sampler plays groups of {shared.group_size}: give "
                     f"--group-size {shared.group_size}")
        return shared
    try:
        tasks = catalog(source, args.split)
    except ValueError as exc:
        sys.exit(f"openenv-gym rollout: {exc}")
    return SAMPLERS[args.sampler](tasks, group_size=args.group_size, seed=args.seed)


class Summary:
    def __init__(self) -> None:
        self.episodes = 0
        self.returns: list[float] = []
        self.steps = 0
        self.errors: Counter[str] = Counter()
        self.started = time.perf_counter()
        self.exported = ExportSummary()  # the training records written (--export)

    def add(self, episode: Episode) -> None:
        if episode.training is not None:
            self.exported.add(episode.training)
        self.episodes += 1
        self.steps += episode.steps
        if episode.error is None:
            self.returns.append(episode.total_reward)
        else:
            self.errors[episode.error.split(":")[0]] += 1

    @property
    def steps_per_s(self) -> float:
        return self.steps / max(time.perf_counter() - self.started, 1e-9)

    @property
    def mean_return(self) -> float:
        return sum(self.returns) / len(self.returns) if self.returns else float("nan")

    def table(self) -> str:
        rows: list[tuple[str, Any]] = [
            ("episodes", self.episodes), ("completed", len(self.returns)),
            ("failed", sum(self.errors.values())),
            *((f"  by the {kind}", count) for kind, count in sorted(self.errors.items())),
            ("mean return", f"{self.mean_return:.4f}"),
            ("min / max return", f"{min(self.returns):.4f} / {max(self.returns):.4f}" if self.returns else "-"),
            ("env steps", self.steps), ("env steps/s", f"{self.steps_per_s:,.1f}"),
            ("seconds", f"{time.perf_counter() - self.started:.1f}")]
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def _lines(episode: Episode, group: Group | None) -> list[dict[str, Any]]:
    """What --output holds of an episode: its training records (--export), else the episode."""
    if episode.training is not None:
        return episode.training
    return [episode.to_json() | ({"group_complete": group.complete} if group else {})]


async def _play(stream: Any, policy: OpenAIPolicy, total: int, out: IO[bytes] | None) -> Summary:
    summary = Summary()
    progress = tqdm(total=total, unit="episode", file=sys.stderr, dynamic_ncols=True)
    try:
        async with contextlib.aclosing(stream):
            async for finished in stream:
                group = finished if isinstance(finished, Group) else None
                for episode in finished.episodes if group else [finished]:
                    summary.add(episode)
                    if out is not None:
                        for line in _lines(episode, group):
                            out.write(orjson.dumps(line, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
                    progress.update()
                if out is not None:
                    out.flush()  # a run that dies keeps what it finished (--resume goes on from there)
                progress.set_postfix(mean_reward=f"{summary.mean_return:.3f}",
                                     steps_per_s=f"{summary.steps_per_s:,.0f}", refresh=False)
    finally:
        progress.close()
        await policy.aclose()
    return summary
