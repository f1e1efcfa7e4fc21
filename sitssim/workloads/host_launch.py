"""When the host has enqueued each call of a timed loop on each GPU, as nccl-tests does.

Theory of operation
-------------------
nccl-tests times a size by enqueuing all its iterations and then waiting for every GPU: the
host does not wait between iterations, and each GPU's stream runs its kernels in the order
they were enqueued. Enqueuing one call on one GPU costs the host ``enqueue_ns`` (the kernel
launch and NCCL's work around it). With one host thread driving every GPU (``-g N``), the
thread enqueues call ``k`` on GPU 0, 1, ..., N-1 in turn, then call ``k + 1``; with a process
per GPU (``mpirun -np N``) each GPU's own host enqueues its calls one after another.

GPU ``r`` starts call ``k`` once it is enqueued there and the GPU has finished call
``k - 1`` (``sitssim.workloads.collective_workloads`` waits for both), and pays the kernel's
fixed cost from then on. So when the host is the slower side, calls finish one host period
apart (N enqueues on one thread, one per GPU with a process each); when the GPUs are, one
GPU time apart. Which it is, and the mix near the crossover, comes out of the run.
"""

from __future__ import annotations

from sitssim.config.collective_config import HostLaunch


def host_period_calls(host: HostLaunch, n_ranks: int) -> int:
    """Enqueues one host thread makes per call: every GPU's on one thread, one on its own."""
    return n_ranks if host.threads == "one" else 1


def enqueued_ns(host: HostLaunch, n_ranks: int, call: int, rank: int) -> float:
    """When call ``call`` of a loop is enqueued on GPU ``rank``, from the loop's start."""
    if host.threads == "one":
        return (call * n_ranks + rank + 1) * host.enqueue
    return (call + 1) * host.enqueue


def issue_started_ns(host: HostLaunch, n_ranks: int, call: int) -> float:
    """When the host starts enqueuing call ``call`` of a loop, from the loop's start."""
    return call * host_period_calls(host, n_ranks) * host.enqueue
