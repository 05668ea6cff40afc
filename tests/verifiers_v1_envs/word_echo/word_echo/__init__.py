from word_echo.taskset import WordEchoTaskset

__all__ = ["WordEchoTaskset"]
