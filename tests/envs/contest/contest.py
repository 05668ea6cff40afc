"""A test environment that scores groups: each episode is one reply; `score_group` ranks the group's replies by
length (the longest gets 1, the shortest 0). Reset option `judge`: "raise" or "short" makes score_group fail."""

from openenv_gym import Environment, FinishedEpisode, ResetResult, StepResult


class ContestEnv(Environment):
    name = "contest"
    max_steps = 3

    async def reset(self, *, seed=None, options=None):
        self.judge = (options or {}).get("judge")
        self.reply = ""
        return ResetResult("Say something; the longest reply of your group wins.", {"seed": seed})

    async def step(self, action):
        self.reply = action if isinstance(action, str) else str(action)
        if self.reply == "again":  # a second turn, so members end at different steps
            return StepResult("Go on.", 0.0)
        return StepResult(f"You said {len(self.reply)} characters.", 0.0, terminated=True,
                          info={"length": len(self.reply)})

    def episode_record(self):
        return {"reply": self.reply, "judge": self.judge}

    @classmethod
    def score_group(cls, episodes: list[FinishedEpisode]):
        judges = {episode.record["judge"] for episode in episodes}
        if "raise" in judges:
            raise ValueError("the judge walked out")
        if "short" in judges:
            return [1.0]
        lengths = sorted({len(episode.record["reply"]) for episode in episodes})
        spread = (lengths[-1] - lengths[0]) or 1
        return [{"reward": (len(e.record["reply"]) - lengths[0]) / spread, "rank_of": len(episodes), "steps": e.steps}
                for e in episodes]
