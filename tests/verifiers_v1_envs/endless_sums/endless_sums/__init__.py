from endless_sums.taskset import SumsTaskset

__all__ = ["SumsTaskset"]
