"""Benchmarks: openenv_gym against what users would pick instead, measured side by side in one run.

Run them from the repository root as modules (`python -m benchmarks.throughput`); `make bench` runs them all.
Nothing here is part of the installed package: users measure their own environments with `openenv-gym bench`.
"""
