from capitals.taskset import CapitalsTaskset

__all__ = ["CapitalsTaskset"]
