"""How openenv_gym runs async code, on either side of the wire: uvloop when it is installed (loops.py), and
coroutines run inline until they first wait (eager.py), so the common case costs no task and no loop turn."""
