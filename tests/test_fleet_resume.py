"""``scripts/fleet --resume`` without Slurm: which nodes it may touch, the
reason it writes back, the state it keeps, and FleetAcceptance's
``resume`` variable in a ReFrame dry run (the real loop: tests/
test_fleet_slurm.py::test_resume_brings_back_only_what_ccl_health_drained)."""

import pytest

from ccl_health.fleet import resume, resumestate
from ccl_health.fleet.config import FleetConfig
from ccl_health.fleet.run import Raw, Step

SINFO = """n01|idle|none
n02|drain|ccl-health: isolate: UNHEALTHY: crash: GPU 0
n03|drain*|ccl-health: reset (a reboot is expected to clear it): pid 7
n04|drain|admin: replacing a fan
n05|drng|ccl-health: isolate: wrong-results GPU 3
n06|drain|CCL-HEALTH: isolate: not ours (case differs)
n07|down|ccl-health: isolate: down, not drained
n08|drain|ccl-health: isolate: x (failed again, 1 of 1 checks)
"""


def test_only_nodes_drained_by_ccl_health_are_candidates():
    ours, others = resume.parse_sinfo_reasons(SINFO)
    assert sorted(ours) == ['n02', 'n03', 'n08']
    assert set(others) == {'n04', 'n05', 'n06'}
    assert 'another reason' in others['n04']
    assert 'still running a job' in others['n05']


def test_reason_suffixes_are_replaced_not_stacked():
    r = 'ccl-health: isolate: x'
    assert resume.base_reason(r + ' (failed again, 1 of 1 checks)') == r
    assert resume.base_reason(r + ' (passed 1 of 2 checks)') == r
    assert resume.base_reason(r) == r
    assert resume.action_of(r) == 'isolate'
    assert resume.action_of('ccl-health: reset (a reboot ...): y') == 'reset'
    assert resume.action_of('admin: x') == ''


class FakeSlurm:
    """sinfo / scontrol of a tiny cluster, every call logged."""

    def __init__(self, sinfo):
        self.sinfo = sinfo
        self.calls = []
        self.drains = {}
        self.resumed = []

    def _run(self, cmd, timeout=60):
        self.calls.append(cmd)
        if cmd[:1] == ['sinfo'] and '%N|%t|%E' in cmd:
            return self.sinfo
        if cmd[:1] == ['sinfo']:
            return 'n01 idle\nn02 maint\nn08 maint\n'
        return ''

    def partition_nodes(self, partition, nodelist):
        return ['n01'], {}

    def resume(self, nodes):
        self.resumed += list(nodes)
        return list(nodes), {}

    def drain(self, nodes, reasons):
        self.drains.update({n: reasons[n] for n in nodes})
        return list(nodes), {}


class FakeSched:
    """n02 passes everything; n08 crashes its node check."""

    def run(self, steps):
        out = []
        for s in steps:
            if s.kind == 'node':
                bad = s.nodes[0] == 'n08'
                doc = {'code': 1 if bad else 0,
                       'verdict': 'crash' if bad else 'pass',
                       'line': 'UNHEALTHY: crash' if bad else 'HEALTHY',
                       'probes': []}
                out.append(Raw(s, doc['code'], doc['line'] + '\n', doc=doc))
            else:
                from ccl_health.fleet.simulate import table
                out.append(Raw(s, 0, table(1 << 30, 40.0, 2)))
        return out


def test_resume_counts_passes_and_failures(tmp_path):
    sinfo = ('n01|idle|none\n'
             'n02|drain|ccl-health: isolate: crash GPU 0\n'
             'n04|drain|admin: fan\n'
             'n08|drain|ccl-health: isolate: crash GPU 1\n')
    cfg = FleetConfig(resume_passes=2)
    # n01 passed its last check (a fleet run): the partner
    resumestate.update_state(str(tmp_path), lambda st: resumestate.last_check(
        st, 'n01', 'pass', 'fleet run'))
    runs = []
    for _ in range(2):
        sl = FakeSlurm(sinfo)
        r = resume.Resume(cfg, str(tmp_path), 'batch', slurm=sl,
                          make_scheduler=lambda resv: FakeSched(),
                          log=lambda _: None)
        s = r.run()
        runs.append((s, sl))
        sinfo = 'n01|idle|none\nn04|drain|admin: fan\n' + ''.join(
            f'{n}|drain|{w}\n' for n, w in sl.drains.items())
    (s1, sl1), (s2, sl2) = runs
    assert s1['kept'] == {
        'n02': 'ccl-health: isolate: crash GPU 0 (passed 1 of 2 checks)',
        'n08': 'ccl-health: isolate: crash GPU 1 (failed again, 1 of 1 '
               'checks)'}
    assert s2['resumed'] == ['n02']
    assert s2['kept'] == {'n08': 'ccl-health: isolate: crash GPU 1 (failed '
                                 'again, 2 of 2 checks)'}
    assert resume.exit_code(s2) == 1
    # the administrator's node is never resumed, drained or reserved
    for sl in (sl1, sl2):
        assert 'n04' not in sl.resumed and 'n04' not in sl.drains
        assert not any('n04' in ' '.join(c) for c in sl.calls
                       if c[:2] == ['scontrol', 'create'])
        assert any(c[:2] == ['scontrol', 'delete'] for c in sl.calls)
    state = resumestate.load_state(str(tmp_path))
    assert [e['event'] for e in state['n02']['events']] == \
        ['drain', 'pass', 'pass', 'resume']
    assert state['n08']['fails'] == 2 and 'n04' not in state


def test_no_candidate_touches_nothing(tmp_path):
    sl = FakeSlurm('n01|idle|none\nn04|drain|admin: fan\n')
    s = resume.Resume(FleetConfig(), str(tmp_path), slurm=sl,
                      make_scheduler=None, log=lambda _: None).run()
    assert s['candidates'] == {} and resume.exit_code(s) == 0
    assert all(c[0] == 'sinfo' for c in sl.calls)


def test_fleet_acceptance_resume_dry_run(tmp_path):
    from test_site_dryrun import dry_run
    cases = dry_run(tmp_path, 'frontier', '--mode', 'acceptance', '-n',
                    '^FleetAcceptance', '-S', 'resume=1')
    script = cases['FleetAcceptance'][0]
    assert '#SBATCH --ntasks=1\n' in script
    run = [ln for ln in script.splitlines() if 'ccl_health.fleet' in ln]
    assert run[0].endswith('--json fleet-summary.json --resume')
