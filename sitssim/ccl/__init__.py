"""Collective communication as NCCL structures it: protocols, channels, chunks and its cost
model (sources in ``docs/ccl_sources.md``). Sans-I/O: the workloads drive the fabric."""
