"""capitals: the model looks the capital up with the atlas tool (an MCP server of this package), then answers.
What a reply says after "Off the record:" is not kept (a response intercept: the episode takes the rest)."""

import verifiers.v1 as vf

from capitals.servers.atlas import CAPITALS, AtlasToolset


class CapitalsTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class CapitalsData(vf.TaskData):
    answer: str


class CapitalsTask(vf.Task[CapitalsData, vf.State, CapitalsTaskConfig]):
    @classmethod
    def toolsets(cls, config: CapitalsTaskConfig) -> list[vf.Toolset]:
        return [AtlasToolset(config.tools)]

    @vf.intercept
    def off_the_record(self, response: vf.Response) -> vf.Response | None:
        kept, cut, _ = (response.message.content or "").partition("Off the record:")
        return response.model_copy(update={"message": vf.AssistantMessage(content=kept.strip())}) if cut else None

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(self.data.answer.lower() in (trace.last_reply or "").lower())


class CapitalsConfig(vf.TasksetConfig):
    task: CapitalsTaskConfig = CapitalsTaskConfig()


class CapitalsTaskset(vf.Taskset[CapitalsTask, CapitalsConfig]):
    def load(self) -> list[CapitalsTask]:
        return [CapitalsTask(CapitalsData(idx=i, name=country, prompt=f"Use the atlas_capital tool to find the "
                                          f"capital of {country.title()}, then name it.", answer=capital),
                             self.config.task)
                for i, (country, capital) in enumerate(CAPITALS.items())]
