"""Train on an environment with TRL's GRPOTrainer: the whole batch of episodes stepped together, token in and token
out. The model and tokenizer are built here (a tiny random Qwen3: nothing comes from a hub), so this runs on a CPU
in a minute; put your own model and tokenizer in their place. Needs `pip install 'openenv-gym[trl]'`.

    python examples/train_trl.py [--steps 4] [--env openenv/guess]
"""

from __future__ import annotations

import argparse
import os
import tempfile

from tiny_model import build_model, build_tokenizer, steer, tool_call_text
from trl import GRPOConfig, GRPOTrainer

from openenv_gym.integrations.trl import dataset, env_reward, make_rollout_func

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--env", default="openenv/guess")
    args = parser.parse_args()
    call = tool_call_text("guess", {"number": 50})  # the random model is steered to write this call: a real step
    tokenizer = build_tokenizer([call])
    with tempfile.TemporaryDirectory() as output:
        config = GRPOConfig(output_dir=output, use_cpu=True, bf16=False, per_device_train_batch_size=8,
                            num_generations=4, max_completion_length=64, max_steps=args.steps, report_to="none",
                            save_strategy="no", logging_steps=1, generation_kwargs=steer(tokenizer, call))
        trainer = GRPOTrainer(model=build_model(tokenizer), processing_class=tokenizer, args=config,
                              train_dataset=dataset(64), reward_funcs=[env_reward],
                              rollout_func=make_rollout_func(args.env, max_turns=4))
        trainer.train()
    for entry in trainer.state.log_history:
        if "reward" in entry:
            print(f"step {entry['step']}: mean reward {entry['reward']:.3f}")


if __name__ == "__main__":
    main()
