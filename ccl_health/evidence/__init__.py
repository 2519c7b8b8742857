"""Evidence: what a run leaves behind, read (program outputs, NCCL / RCCL
debug logs, copy matrices, the node's state), and the evidence object
every door builds for the judge."""
