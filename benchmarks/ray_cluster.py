"""A real Ray cluster on this machine for the tests and the scaling benchmark: a head and a second node process,
each with its own CPUs, every node on 127.0.0.1.

Ray gives its nodes the machine's outward address by default (it maps 127.0.0.1 to it). Its flag for single-machine
clusters keeps them on loopback, which is all the tests and benchmarks may talk to: set in the environment for the
processes Ray (and a test) starts, and in this process's copy of Ray's constants, read when ray was imported.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import ray
from ray._private import ray_constants
from ray.cluster_utils import Cluster

LOOPBACK = "127.0.0.1"


def keep_ray_on_loopback() -> None:
    os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False


@contextlib.contextmanager
def local_cluster(cpus_per_node: int = 1, nodes: int = 2, pythonpath: list[str] = ()) -> Iterator[Cluster]:
    """Start the cluster, connect this process to it (ray.init), and take both down at the end. `pythonpath`:
    folders Ray's worker processes must import from (helpers of the tests)."""
    keep_ray_on_loopback()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus_per_node, "node_ip_address": LOOPBACK,
                                                            "include_dashboard": False})
    try:
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=cpus_per_node, node_ip_address=LOOPBACK)
        runtime_env = {"env_vars": {"PYTHONPATH": os.pathsep.join(pythonpath)}} if pythonpath else None
        ray.init(address=cluster.address, logging_level="WARNING", runtime_env=runtime_env)
        try:
            yield cluster
        finally:
            ray.shutdown()
    finally:
        cluster.shutdown()
