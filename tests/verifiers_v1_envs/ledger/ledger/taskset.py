"""ledger: the model reads an account's balance with the book tool, then answers."""

import verifiers.v1 as vf

from ledger.book import BALANCES, BookConfig, BookToolset


class LedgerData(vf.TaskData):
    answer: str


class LedgerTask(vf.Task[LedgerData]):
    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(self.data.answer in (trace.last_reply or ""))


class LedgerConfig(vf.TasksetConfig):
    book: BookConfig = BookConfig()


class LedgerTaskset(vf.Taskset[LedgerTask, LedgerConfig]):
    @classmethod
    def toolsets(cls, config: LedgerConfig) -> list[vf.Toolset]:
        return [BookToolset(config.book)]

    def load(self) -> list[LedgerTask]:
        return [LedgerTask(LedgerData(idx=i, name=account, prompt=f"What is {account}'s balance? Use the book_balance "
                                      "tool.", answer=str(balance)), self.config.task)
                for i, (account, balance) in enumerate(BALANCES.items())]
