"""``scripts/fleet --resume`` without Slurm: which nodes it may touch, the
reason it writes back, the state it keeps, and FleetAcceptance's
``resume`` variable in a ReFrame dry run (the real loop: tests/
test_fleet_slurm.py::test_resume_brings_back_only_what_ccl_health_drained)."""

import os

import pytest

from ccl_health.fleet import resume, resumestate
from ccl_health.sitedata.fleetconfig import FleetConfig
from ccl_health.fleet.rounds import Raw, Step

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
    from helpers.dryrun import dry_run
    cases = dry_run(tmp_path, 'frontier', '--mode', 'acceptance', '-n',
                    '^FleetAcceptance', '-S', 'resume=1')
    script = cases['FleetAcceptance'][0]
    assert '#SBATCH --ntasks=1\n' in script
    run = [ln for ln in script.splitlines() if 'ccl_health.fleet' in ln]
    assert run[0].endswith('--json fleet-summary.json --resume')


# -- the partner, the state under its lock, the lock -------------------------

def _passed(tmp_path, *nodes):
    def change(st):
        for n in nodes:
            resumestate.last_check(st, n, 'pass', 'fleet run')
    resumestate.update_state(str(tmp_path), change)


def test_the_partner_is_an_idle_node_that_passed_its_last_check(tmp_path):
    states = resume.parse_states('n01 alloc\nn02 drain\nn03 mix\nn04 comp\n'
                                 'n05 down\nn06 idle*\nn07 drng\nn08 maint\n'
                                 'n09 idle\nn10 idle\n')
    _passed(tmp_path, *[f'n{i:02d}' for i in range(1, 10)])
    state = resumestate.load_state(str(tmp_path))
    assert resume.choose_partner(states, state, {'n02': 'x'}) == ('n09', '')
    # n10 is idle but has no passing check on record; n09 is a candidate
    partner, why = resume.choose_partner(states, state, {'n09': 'x'})
    assert partner is None and 'no idle node passed its last check' in why
    resumestate.update_state(str(tmp_path), lambda st: resumestate.
                             last_check(st, 'n09', 'fail', 'crash'))
    state = resumestate.load_state(str(tmp_path))
    assert resume.choose_partner(states, state, {'n02': 'x'})[0] is None


class PartnerSlurm(FakeSlurm):
    """n01 runs a user's job, n09 is idle; n02 is drained by ccl-health."""

    def _run(self, cmd, timeout=60):
        self.calls.append(cmd)
        if cmd[:1] == ['sinfo'] and '%N|%t|%E' in cmd:
            return self.sinfo
        if cmd[:1] == ['sinfo']:
            return 'n01 alloc\nn02 maint\nn09 idle\n'
        return ''


def _resume(tmp_path, sl, sched=None, cfg=None):
    return resume.Resume(cfg or FleetConfig(resume_passes=1), str(tmp_path),
                         'batch', slurm=sl,
                         make_scheduler=lambda resv: sched or FakeSched(),
                         log=lambda _: None).run()


def test_a_users_job_is_never_the_partner(tmp_path):
    _passed(tmp_path, 'n01', 'n09')
    sl = PartnerSlurm('n01|alloc|none\nn02|drain|ccl-health: isolate: x\n'
                      'n09|idle|none\n')
    s = _resume(tmp_path, sl)
    create = [c for c in sl.calls if c[:2] == ['scontrol', 'create']]
    assert 'Nodes=n02,n09' in create[0] and 'Flags=MAINT' in create[0]
    assert s['resumed'] == ['n02'] and resume.exit_code(s) == 0
    assert 'pair with n09 passed' in s['timeline']['n02'][-2]['reason']


def test_without_a_partner_the_pair_is_skipped_and_the_node_kept(tmp_path):
    _passed(tmp_path, 'n01')             # busy with a user's job
    sl = PartnerSlurm('n01|alloc|none\nn02|drain|ccl-health: isolate: x\n'
                      'n09|idle|none\n')
    s = _resume(tmp_path, sl)
    create = [c for c in sl.calls if c[:2] == ['scontrol', 'create']]
    assert 'Nodes=n02' in create[0]
    assert s['resumed'] == [] and resume.exit_code(s) == 2
    assert sl.drains == {
        'n02': f'ccl-health: isolate: x ({resume.NO_PARTNER})'}
    assert 'no idle node passed its last check' in s['could_not_check']['n02']
    # the node check ran; its next reason replaces the note, never stacks it
    assert [r['kind'] for r in s['rounds']] == ['node']
    assert resume.base_reason(sl.drains['n02']) == 'ccl-health: isolate: x'


def test_a_partner_that_took_a_job_meanwhile_is_left_out(tmp_path):
    _passed(tmp_path, 'n09')

    class Busy(PartnerSlurm):
        def _run(self, cmd, timeout=60):
            if cmd[:2] == ['scontrol', 'create'] and \
                    any(c.startswith('Nodes=') and 'n09' in c for c in cmd):
                self.calls.append(cmd)
                raise resume.CclHealthError('Requested nodes are busy')
            return super()._run(cmd, timeout)
    sl = Busy('n02|drain|ccl-health: isolate: x\nn09|idle|none\n')
    s = _resume(tmp_path, sl)
    creates = [c for c in sl.calls if c[:2] == ['scontrol', 'create']]
    assert len(creates) == 2 and 'Nodes=n02' in creates[1]
    assert 'n09 took a job' in s['could_not_check']['n02']
    assert 'n02' in sl.drains


def test_events_written_meanwhile_by_another_run_are_kept(tmp_path):
    """A fleet run drains n07 while the resume checks n02: both kept."""
    _passed(tmp_path, 'n09')

    class Meanwhile(FakeSched):
        def run(self, steps):
            if steps[0].kind == 'node':
                resumestate.note_drains(str(tmp_path), {
                    'n07': 'ccl-health: isolate: UNHEALTHY: crash'})
            return super().run(steps)
    sl = PartnerSlurm('n02|drain|ccl-health: isolate: x\nn09|idle|none\n')
    s = _resume(tmp_path, sl, Meanwhile())
    state = resumestate.load_state(str(tmp_path))
    assert [e['event'] for e in state['n07']['events']] == ['drain']
    assert [e['event'] for e in state['n02']['events']] == \
        ['drain', 'pass', 'resume']
    assert s['resumed'] == ['n02']


def test_a_lock_file_that_is_a_link_is_never_followed(tmp_path):
    target = tmp_path / 'precious'
    target.write_text('keep me\n')
    (tmp_path / 'fleet').mkdir()
    os.symlink(target, resumestate.lock_path(str(tmp_path), 'batch'))
    sl = PartnerSlurm('n02|drain|ccl-health: isolate: x\n')
    with pytest.raises(resume.CclHealthError, match='lock'):
        _resume(tmp_path, sl)
    assert target.read_text() == 'keep me\n' and sl.calls == []
    # nor the state's lock
    os.symlink(target, resumestate.state_path(str(tmp_path)) + '.lock')
    with pytest.raises(resume.CclHealthError, match='lock'):
        resumestate.note_drains(str(tmp_path), {'n02': 'ccl-health: x'})
    assert target.read_text() == 'keep me\n'


def test_a_fleet_run_records_each_nodes_last_check(tmp_path):
    resumestate.note_fleet_checks(str(tmp_path), {
        'healthy': ['n01', 'n02'], 'stragglers': {'n02': 'slow: 0.85'},
        'bad': {'n03': 'crash'}, 'could_not_check': {'n04': 'no GPU'}})
    state = resumestate.load_state(str(tmp_path))
    assert {n: state[n]['last_check']['outcome'] for n in state} == {
        'n01': 'pass', 'n02': 'straggler', 'n03': 'fail',
        'n04': 'could-not-check'}
    assert resumestate.timeline(state) == {}       # no events, no rows


# -- the pair check judged as every fleet step (issue 37) ---------------------


class WarnSched(FakeSched):
    """:class:`FakeSched` whose pair step also prints a WARN of a fatal
    class (``connection``) at teardown."""

    def run(self, steps):
        out = super().run(steps)
        for raw in out:
            if raw.step.kind == 'pair':
                raw.stdout = ('n02:7:7 [0] NCCL WARN socketProgress: '
                              'Connection closed by remote peer n01<41234>\n'
                              + raw.stdout)
        return out


@pytest.mark.parametrize('declared', [True, False])
def test_the_resume_pair_check_is_judged_with_the_site(tmp_path, declared):
    """Issue 37: the pair check of ``--resume`` is a fleet pair step,
    judged with the fleet's configuration and the site's ``benign_warns``
    like every other: a WARN the site declares harmless lets the node
    back; without the site's word it keeps it drained."""
    from ccl_health.evidence.benignwarns import check_benign
    from ccl_health.sitedata import site as site_data
    site = site_data.parse(
        'system: mini\ntransports:\n  net-socket:\n    env: '
        '{NCCL_NET_PLUGIN: none}\n' + (
            'benign_warns:\n- pattern: "^socketProgress: Connection closed '
            'by remote peer n01<"\n  overrides: connection\n  why: the '
            'partner exits first at teardown\n' if declared else ''),
        'mini.yaml', benign_check=check_benign)
    _passed(tmp_path, 'n01')
    sl = FakeSlurm('n01|idle|none\nn02|drain|ccl-health: isolate: crash '
                   'GPU 0\n')
    s = resume.Resume(FleetConfig(resume_passes=1, transport='net-socket'),
                      str(tmp_path), 'batch', slurm=sl,
                      make_scheduler=lambda resv: WarnSched(),
                      log=lambda _: None, site=site).run()
    if declared:
        assert s['resumed'] == ['n02'] and not sl.drains, s
    else:
        assert s['resumed'] == [] and 'n02' in sl.drains, s
        assert 'crash' in str(s['rounds']), s['rounds']

