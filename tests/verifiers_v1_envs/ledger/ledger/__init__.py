from ledger.taskset import LedgerTaskset

__all__ = ["LedgerTaskset"]
