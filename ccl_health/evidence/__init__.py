"""Evidence: what a run leaves behind, read (program outputs, NCCL / RCCL
debug logs, copy matrices, the node's state); the judge's evidence object
is assembled from them by :mod:`ccl_health.judge.assemble`."""
