"""When the host has enqueued each call of a timed loop on each GPU, as nccl-tests does.

Theory of operation
-------------------
nccl-tests times a size by enqueuing all its iterations and then waiting for every GPU: the
host does not wait between iterations, and each GPU's stream runs its kernels in the order
they were enqueued. A host thread's call costs it ``group`` whatever its GPUs (the group
call around the kernels and the loop's own work) plus ``enqueue`` per GPU it drives (the
kernel launch and NCCL's work around it). With one host thread driving every GPU
(``-g N``), the thread enqueues call ``k`` on GPU 0, 1, ..., N-1 in turn, then call
``k + 1``; with a process per GPU (``mpirun -np N``) each GPU's own host enqueues its calls
one after another.

GPU ``r`` starts call ``k`` once it is enqueued there and the GPU has finished call
``k - 1`` (``sitssim.workloads.collective_workloads`` waits for both), and pays the kernel's
fixed cost from then on. So when the host is the slower side, calls finish one host period
apart (``group`` plus N enqueues on one thread, ``group`` plus one with a process each);
when the GPUs are, one GPU time apart. Which it is, and the mix near the crossover, comes
out of the run.
"""

from __future__ import annotations

from sitssim.config.collective_config import HostLaunch


def host_period_ns(host: HostLaunch, n_ranks: int) -> float:
    """A host thread's time per call: its group cost and one enqueue per GPU it drives
    (every GPU on one thread, its own with a process each)."""
    gpus = n_ranks if host.threads == "one" else 1
    return host.group + gpus * host.enqueue


def enqueued_ns(host: HostLaunch, n_ranks: int, call: int, rank: int) -> float:
    """When call ``call`` of a loop is enqueued on GPU ``rank``, from the loop's start."""
    position = rank if host.threads == "one" else 0
    return issue_started_ns(host, n_ranks, call) + host.group + (position + 1) * host.enqueue


def issue_started_ns(host: HostLaunch, n_ranks: int, call: int) -> float:
    """When the host starts enqueuing call ``call`` of a loop, from the loop's start."""
    return call * host_period_ns(host, n_ranks)
