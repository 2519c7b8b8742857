"""Records: the performance database, what goes into it, history findings,
queries and calibration of the references from it."""
