"""How each history key is judged now: against a level (a calibration,
an acceptance), on its own history, or not yet and why (the end of
``scripts/report detect`` and the report page)."""

from ccl_health.judge import history
from ccl_health.judge.baselines import DRIFT_MIN_HISTORY
from ccl_health.judge.finding import where_text


def standing(records, accepted=(), baselines=(), min_history=5):
    """``{key: line}``: how each history key is judged now (its newest
    part, :func:`ccl_health.judge.history.parts`): against a level
    (``judged against the calibration of ...``), on its own history, or
    not yet and why."""
    per = {}
    for (key, size), whole in history._series(records).items():
        for level, part in history.parts(whole, key, size, accepted,
                                         baselines):
            pass
        per.setdefault(key, []).append(
            (size, level, len(history._healthy(part))))
    return standing_of(per, min_history)


def standing_of(per, min_history=5):
    """:func:`standing` of ``{key: [(size, level of its newest part,
    healthy values in it)]}`` (what the database's state of a key holds:
    :func:`ccl_health.db.keystate.standing`)."""
    out = {}
    for key, sizes in per.items():
        sizes = [(s, None if lv is not None and lv.median is None else lv,
                  n) for s, lv, n in sizes]    # an accepted run that
        #                                       measured nothing here
        where = where_text(key)
        known = [(s, lv, n) for s, lv, n in sizes if lv is not None]
        if known:
            _, lv, n = max(known, key=lambda t: t[0])
            out[key] = (f'{where}: judged against {lv.text()}, {n} healthy '
                        f'run{"s" if n != 1 else ""} since')
            continue
        n = max(n for _, _, n in sizes)
        if n >= min_history:
            out[key] = (f'{where}: judged on its history ({n} healthy '
                        f'runs' + (f'; a drift from {DRIFT_MIN_HISTORY}'
                                   if n < DRIFT_MIN_HISTORY else '') + ')')
        else:
            out[key] = (f'{where}: not judged yet: {n} healthy '
                        f'run{"s" if n != 1 else ""} and no baseline '
                        f'recorded (judged from {min_history} healthy runs, '
                        f'or from a calibration: scripts/calibrate)')
    return out
