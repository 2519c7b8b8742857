"""The whole machine: every node of a partition judged through Slurm, and
the bad node or link named (see ``scripts/fleet``)."""
