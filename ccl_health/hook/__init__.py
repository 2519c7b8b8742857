"""The node health hook (NHC / Slurm HealthCheckProgram): gather the
node's evidence within a bound, ask the judge, print one line
(:mod:`ccl_health.hook.check`; ``python -m ccl_health.hook``)."""
