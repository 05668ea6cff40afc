from prepared_script.taskset import ScriptEnv, ScriptTaskset

__all__ = ["ScriptEnv", "ScriptTaskset"]
