"""What a history series is: one kind of measurement of one thing (the
nightly's sweep of a key, a node's own health probes), read from a case or
record row; a fleet step and a simulated run's rows join no series.  The
judge of a series is :mod:`ccl_health.judge.history`; the database stores
each case's kind with it (:mod:`ccl_health.db.store`)."""

#: the columns of a configuration's key
KEY = ('system', 'partition', 'transport', 'collective', 'nodes', 'ranks',
       'algo')
#: the columns a series adds to its configuration: the kind of case
#: (:func:`kind_of`) and the node it measures (:func:`node_of`)
KIND, NODE = 'kind', 'node'
#: the history key of a series, in the order of :func:`series_key`
SERIES_KEY = KEY + (KIND, NODE)
#: the same columns in the order the database keeps and walks them (the
#: table ``series``, the old ``cases_series`` index): system and
#: partition, the kind (one kind of case is one range), the rest of the
#: configuration, the node
STORED_ORDER = KEY[:2] + (KIND,) + KEY[2:] + (NODE,)
#: the columns as a person reads a series over all its nodes (the report's
#: page and plots group by them, its figures are named in it): system and
#: partition, the kind, the collective before its transport (KEY[3:1:-1]),
#: the job's size and the algorithm
READ_ORDER = KEY[:2] + (KIND,) + KEY[3:1:-1] + KEY[4:]

#: the run id of every case a simulation wrote starts with this
#: (``scripts/fleet --simulate PLAN --db DB``): a rehearsal, never a
#: measurement; ``report failed`` and the history leave it out
SIMULATED = 'simulated-'


def simulated(row):
    """Whether a case or record row (a dict with ``run_id``), a case
    record or a run id is of a simulated run."""
    run_id = row if isinstance(row, str) else (
        row.get('run_id') if isinstance(row, dict) else
        getattr(row, 'run_id', ''))
    return str(run_id or '').startswith(SIMULATED)


#: the source and case names of the health hook's probe (the hook's own
#: record, :mod:`ccl_health.hook.record`; the ReFrame check that runs it)
HEALTH_SOURCE = 'health'
HEALTH_NAMES = ('node-health', 'NodeHealth')
#: the source and case names of a fleet run (:func:`ccl_health.fleet.fleetreport
#: .cases`: ``fleet-node``, ``fleet-pair``, ``fleet-group``,
#: ``fleet-resume`` steps; the ReFrame check that runs the fleet)
FLEET_SOURCE = 'fleet'
FLEET_NAMES = ('fleet-', 'FleetAcceptance')
#: the kinds of case whose values are judged against their own history
#: (a ``fleet`` step is judged within its run, never against history)
HISTORY_KINDS = ('sweep', 'health probe', 'framework', 'other')
#: the kind of the health hook's probes: each node its own series, and
#: nearly every case of a database (the kind index leaves them out)
PROBE_KIND = 'health probe'


def kind_of(case):
    """``sweep``, ``health probe``, ``fleet``, ``framework`` or ``other``
    for a case or record row (its ``source`` column where there is one,
    its name and collective: a record row has no ``source``, and rows
    written before a kind existed are read by their names)."""
    name = case.get('case_name') or ''
    coll = case.get('collective') or ''
    if case.get('source') == FLEET_SOURCE or name.startswith(FLEET_NAMES):
        return 'fleet'
    if case.get('source') == HEALTH_SOURCE or name.startswith(HEALTH_NAMES):
        return PROBE_KIND
    if coll.startswith('torch_') or name.startswith('Torch'):
        return 'framework'
    if name.startswith(('AllReduce', 'Collective')) or (
            coll and not coll.endswith('first_call')):
        return 'sweep'
    return 'other'


def node_of(row, kind=None):
    """The node a case or record row is a measurement of: a health
    probe's node (its ``nodelist``: the hook records its host there, the
    ReFrame check its job's node), else None (a sweep is a measurement of
    its configuration, whichever nodes ran it).  A probe whose node was
    not recorded: ''."""
    if (kind or kind_of(row)) != PROBE_KIND:
        return None
    return row.get('nodelist') or ''


def series_key(row):
    """The history key of a case or record row (:data:`SERIES_KEY`):
    :data:`KEY`, the kind of case and its node (:func:`node_of`; last, so
    ``key[:6]`` stays system ... ranks and ``key[7]`` the kind)."""
    kind = kind_of(row)
    return tuple(row.get(k) for k in KEY) + (kind, node_of(row, kind))


def has_history(key):
    """Is the series ``key`` judged against its own history?  Not a fleet
    step (judged within its run), nor a health probe whose node was not
    recorded (it would join no node's series)."""
    return key[7] in HISTORY_KINDS and key[8] != ''
