"""The console scripts of an installed ccl-health (``pip install``), the
same commands as ``scripts/*`` in a checkout:

* ``ccl-health-run``: ``ccl-health run`` (``scripts/run``);
* ``ccl-health-report``: ``ccl-health db`` with ``report`` when no question
  is asked (``scripts/report``);
* ``ccl-health-calibrate``: ``ccl-health calibrate`` (``scripts/calibrate``);
* ``ccl-health-check``: the node health hook (``scripts/ccl-health-check``):
  one line, exit 0 / 1 / 2, whatever goes wrong;
* ``ccl-health-explain``: a verdict from raw outputs (``scripts/explain``);
* ``ccl-health-fleet``: a whole partition's acceptance through Slurm
  (``scripts/fleet``).

The configuration, checks, build recipes, site data and references they use
are found by :mod:`ccl_health.resources`."""

import sys


def _cli(prefix, argv):
    from ccl_health.cli import main
    return main(prefix + list(sys.argv[1:] if argv is None else argv))


def run(argv=None):
    return _cli(['run'], argv)


def calibrate(argv=None):
    return _cli(['calibrate'], argv)


def report(argv=None, prog=None):
    """As ``scripts/report``: no question (after an optional ``--db``) is
    the report (``python -m ccl_health.report`` too)."""
    args = list(sys.argv[1:] if argv is None else argv)
    pre = []
    if args and args[0] == '--db':
        pre, args = args[:2], args[2:]
    elif args and args[0].startswith('--db='):
        pre, args = args[:1], args[1:]
    if not args or args[0] == '--out' or args[0].startswith('--out='):
        args = ['report'] + args
    return _cli((['--prog', prog] if prog else []) + ['db'] + pre, args)


def check(argv=None):
    """The health hook: one verdict line, exit 0 HEALTHY / 1 UNHEALTHY /
    2 COULD-NOT-CHECK.  The hook itself never raises; this keeps the
    contract when it cannot even be imported (never a reason to drain)."""
    try:
        import ccl_health.hook.check  # noqa: F401 (the whole hook imports)
        from ccl_health.hookcli import main
    except BaseException as err:      # noqa: B902 (the contract first)
        print(f'COULD-NOT-CHECK: {sys.executable} cannot import '
              f'ccl_health.hook.check: {type(err).__name__}: {err}')
        return 2
    return main(sys.argv[1:] if argv is None else argv)


def explain(argv=None):
    from ccl_health import explain as mod
    mod.PROG = 'ccl-health-explain'
    return mod.main(sys.argv[1:] if argv is None else argv)


def fleet(argv=None):
    from ccl_health.fleetcli import main
    return main(list(sys.argv[1:] if argv is None else argv),
                prog='ccl-health-fleet')
