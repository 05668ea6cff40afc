from higher_lower.taskset import HigherLowerEnv, HigherLowerTaskset

__all__ = ["HigherLowerEnv", "HigherLowerTaskset"]
