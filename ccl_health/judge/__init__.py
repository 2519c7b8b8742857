"""The judge: the verdicts, the reference model, and the one function that
decides a case from its evidence (:mod:`ccl_health.judge.casejudge`)."""
