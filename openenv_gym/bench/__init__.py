"""Benchmarks that compare openenv_gym, in one run on this machine, with what users would pick instead.

`openenv-gym bench` (and `make bench`) runs `compare.main`.
"""
