"""The book tool server, one for the whole taskset: Verifiers starts it once as `python -m ledger.book`, when the
env starts serving, and stops it when serving ends (as scratchpad's and wiki_search's shared toolsets)."""

import verifiers.v1 as vf

BALANCES = {"alice": 120, "bob": 75}


class BookConfig(vf.SharedToolsetConfig):
    pass


class BookToolset(vf.Toolset[BookConfig]):
    TOOL_PREFIX = "book"

    @vf.tool
    def balance(self, account: str) -> str:
        """The balance of an account."""
        return str(BALANCES.get(account.strip().lower(), "no such account"))


if __name__ == "__main__":
    BookToolset.run()
