"""What the tests share: the stand-in node and its hook (node), ReFrame runs
on replayed outputs (replay), the PostgreSQL server (postgres), the report
page and Chromium (pages), the soak's nights (nights), the drift recordings
(drift), nvbandwidth's text (nvbandwidth), a store seen from outside
(stores), processes and waiting for a condition (procs), a stand-in of
NCCL's RAS service and its reports (ras).  A test takes
what it shares from here, not from another test module."""
