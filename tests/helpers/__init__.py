"""What the tests share: the stand-in node and its hook (node), ReFrame runs
on replayed outputs (replay), the PostgreSQL server (postgres), the report
page and Chromium (pages), the soak's nights (nights), the drift recordings
(drift), nvbandwidth's text (nvbandwidth), a store seen from outside
(stores), processes and waiting for a condition (procs), a stand-in of
NCCL's RAS service and its reports (ras), the real NHC built and run
(nhc), the hostile environment's wrapper and stand-ins (hostile), a second
local user (otheruser), a replay case with one mutation (trust), WARN
lines of the WARN table (warns), Slurm's node records (slurmrecords), a
checkout of its own and init-site (checkout), one output through every
door (doors), the docs' commands run here (doccommands), docs/sites.md's
InfiniBand system (ibsite), the hook with its one probe process (probe), a
database of generated history (dbhistory), the copy matrix of any number
of GPUs (linkmatrix), an intra all_reduce capture of N ranks (nranks), the device scripts'
dry mode (devicedry).  A
test takes what it shares from here, not from another test module
(tests/test_layout.py checks)."""
