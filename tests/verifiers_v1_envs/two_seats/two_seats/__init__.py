from two_seats.taskset import TwoSeatsEnv, TwoSeatsTaskset

__all__ = ["TwoSeatsEnv", "TwoSeatsTaskset"]
