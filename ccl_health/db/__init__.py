"""Records: the performance database, what goes into it, queries over it
(the history findings come from :mod:`ccl_health.judge.history`) and
calibration of the references from it."""
