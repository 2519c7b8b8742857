"""What the device showed (tests/fixtures/device/verdicts-before, -after,
-final, hostile-hook, hostile-hook-final): the same verdicts before and
after the package was split and the judge made one (and on the final code,
with the node's rules in the judge), and the hook's answers in a hostile
environment (the final code's lines name the action)."""

import json
import os
import re
import tarfile

import pytest

D = os.path.join(os.path.dirname(__file__), 'fixtures', 'device')


def _verdicts(label):
    with open(os.path.join(D, f'verdicts-{label}', f'verdicts-{label}.tsv')) \
            as fp:
        return [tuple(line.rstrip('\n').split('\t')[:2]) for line in fp
                if line.strip()]


def test_the_same_verdicts_before_and_after_the_restructure():
    before, after = _verdicts('before'), _verdicts('after')
    assert before == after == _verdicts('final')
    assert [v for _, v in after] == ['skipped'] * 5 + ['below-reference']


def test_the_devices_sweep_judged_by_todays_code(tmp_path):
    """The net-socket sweep of the final run (its output and both ranks'
    debug logs, kept in verdicts-final.tgz) through today's readers and
    judge (ccl_health.explain, as a run made elsewhere): the verdict the
    device's run recorded, below the reference at the same 9 sizes."""
    from ccl_health import explain
    with tarfile.open(os.path.join(D, 'verdicts-final',
                                   'verdicts-final.tgz')) as tf:
        tf.extractall(tmp_path, filter='data')
    stage = tmp_path / 'keep' / 'socket-stage'
    files = [str(stage / 'rfm_job.out')] + sorted(
        str(p) for p in stage.glob('nccl-debug.*.log'))
    doc = explain.explain(files, system='local', partition='gpu',
                          transport_asked='net-socket', exit_status=0)
    recorded = open(os.path.join(D, 'verdicts-final',
                                 'verdicts-final.tsv')).read().splitlines()
    name, verdict, reason = next(ln.split('\t', 2) for ln in recorded
                                 if 'net-socket' in ln and
                                 'skipped' not in ln)
    assert doc['verdict'] == verdict == 'below-reference', doc['reason']
    # the same sizes below, measured the same
    below = re.findall(r'(\d+[KMG]iB) ([\d.]+) vs ([\d.]+) GB/s', reason)
    assert len(below) == 9
    for size, got, ref in below:
        assert f'{size} {got} vs {ref} GB/s' in doc['reason'], (size,
                                                                 doc['reason'])


def _summary(folder='hostile-hook'):
    rows = {}
    with open(os.path.join(D, folder, 'hostile-summary.txt')) as fp:
        for line in fp:
            if not line.startswith(' ') and '\t' in line:
                name, code, wall, text = line.rstrip('\n').split('\t', 3)
                rows[name] = (int(code.split()[1]), float(wall.split()[0]),
                              text)
    return rows


def _member(name, folder='hostile-hook'):
    with tarfile.open(os.path.join(D, folder, 'hostile.tgz')) as tf:
        return tf.extractfile(f'keep/{name}').read().decode()


@pytest.mark.parametrize('name, code, starts', [
    ('clean-baseline', 0, 'HEALTHY: '),
    ('clean-inherited', 0, 'HEALTHY: '),
    ('sigalrm', 2, 'COULD-NOT-CHECK: stopped by SIGALRM'),
    ('foreign-no-reference', 1, 'UNHEALTHY: GPU 0 in use by pid'),
    ('foreign-with-reference', 1, 'UNHEALTHY: GPU 0 in use by pid'),
    ('wrong-first', 1, 'UNHEALTHY: ccl-health-links: error: wrong data'),
])
def test_the_hooks_answers_on_the_device(name, code, starts):
    got = _summary()[name]
    assert got[0] == code and got[2].startswith(starts), got
    assert got[1] < 20                      # inside NHC's default watchdog


@pytest.mark.parametrize('name, code, starts', [
    ('clean-baseline', 0, 'HEALTHY: '),
    ('clean-inherited', 0, 'HEALTHY: '),
    ('sigalrm', 2, 'COULD-NOT-CHECK: stopped by SIGALRM'),
    ('foreign-no-reference', 1, 'UNHEALTHY: reset (a reboot is expected to '
                                'clear it): GPU 0 in use by pid'),
    ('foreign-with-reference', 1, 'UNHEALTHY: reset (a reboot is expected '
                                  'to clear it): GPU 0 in use by pid'),
    ('wrong-first', 1, 'UNHEALTHY: isolate: ccl-health-links: error: wrong '
                       'data'),
])
def test_the_final_hooks_answers_name_the_action(name, code, starts):
    got = _summary('hostile-hook-final')[name]
    assert got[0] == code and got[2].startswith(starts), got
    assert got[1] < 20


@pytest.mark.parametrize('folder', ['hostile-hook', 'hostile-hook-final'])
def test_inherited_transport_settings_are_dropped_and_named(folder):
    doc = json.loads(_member('clean-inherited.json', folder))
    dropped = json.dumps(doc)
    for var in ('NCCL_P2P_DISABLE', 'NCCL_ALGO', 'NCCL_PROTO'):
        assert var in dropped


@pytest.mark.parametrize('folder', ['hostile-hook', 'hostile-hook-final'])
def test_sigalrm_leaves_no_process_and_no_folder(folder):
    assert _member('sigalrm-ps-before.txt', folder).count('\n') >= 3
    assert _member('sigalrm-ps-after.txt', folder).strip() == ''


@pytest.mark.parametrize('folder', ['hostile-hook', 'hostile-hook-final'])
def test_a_wrong_first_attempt_is_the_verdict(folder):
    doc = json.loads(_member('wrong-first.json', folder))
    assert doc['verdict'] == 'wrong-results'
    assert 'attempt 1 of 2: wrong-results' in json.dumps(doc)


def test_the_final_json_documents_name_verdict_action_and_cause():
    wrong = json.loads(_member('wrong-first.json', 'hostile-hook-final'))
    assert (wrong['verdict'], wrong['action']) == ('wrong-results', 'isolate')
    foreign = json.loads(_member('foreign-no-reference.json',
                                 'hostile-hook-final'))
    assert (foreign['verdict'], foreign['action'], foreign['cause']) == (
        'contended', 'reset', 'leftover-process')


# -- issue 27: a node's role from Slurm, WARNs by the upstream code -----------

def _role_summary():
    rows = {}
    with open(os.path.join(D, 'node-role', 'node-role-summary.txt')) as fp:
        for line in fp:
            if not line.startswith(' ') and '\t' in line:
                name, code, rest = line.rstrip('\n').split('\t', 2)
                rows[name] = (int(code.split()[1]), rest)
    return rows


def test_an_allocated_node_is_never_drained_for_its_jobs_process():
    rows = _role_summary()
    for name in ('a-allocated-foreign', 'a2-mixed-foreign'):
        code, text = rows[name]
        assert code == 0 and 'HEALTHY: node state only (allocated to a job' \
            in text and 'no probe' in text, (name, text)
        assert 'in use by pid' in text and 'leftover' not in text
    code, text = rows['b-idle-foreign']
    assert code == 1 and 'UNHEALTHY: reset' in text and \
        'leftover process on an idle node' in text
    assert rows['b2-idle-clean'][0] == 0 and rows['b3-allocated-clean'][0] == 0


def test_advisory_warns_on_a_real_run_change_nothing_and_a_fatal_one_fails():
    rows = _role_summary()
    as_run, advisory, fatal = (rows[n] for n in (
        'c1-as-run', 'c1-advisory-warns', 'c1-fatal-warn'))
    verdict = lambda row: row[1].split('\t')[0]     # noqa: E731
    assert verdict(as_run) == verdict(advisory) == 'verdict pass'
    assert as_run[0] == advisory[0] == 0
    assert 'GID table change (not fatal)' in advisory[1]
    assert fatal[0] == 1 and verdict(fatal) == 'verdict crash' and \
        'class cuda' in fatal[1]


# -- issue 28: the nightly's news from the first week -------------------------

def _nights():
    out = {}
    with open(os.path.join(D, 'news-first-week', 'nights',
                           'exit-codes.txt')) as fp:
        for line in fp:
            name, rc = line.split()[:2]
            mail = open(os.path.join(D, 'news-first-week', 'nights',
                                     f'{name}.mail')).read().splitlines()
            out[name] = (int(rc.split('=')[1]), mail)
    return out


def test_a_real_drift_after_calibration_is_told_on_the_third_night_once():
    nights = _nights()
    degraded = [n for n in sorted(nights) if 'buff' in n]
    assert len(degraded) == 4
    first, second, third, fourth = (nights[n] for n in degraded)
    assert first[0] == second[0] == 0 and 'all clear' in first[1][0]
    assert third[0] == 1 and 'NEW: 0 new failure(s), 3 new finding(s)' in \
        third[1][0]
    drifts = [ln for ln in third[1] if ln.startswith('DRIFT ')]
    assert len(drifts) == 3 and any('64MiB: -10.9 %' in d for d in drifts)
    assert any('changed: NCCL_BUFFSIZE: (unset) -> 4063232' in ln
               for ln in third[1])
    # told once: the fourth degraded night does not tell it again
    assert fourth[0] == 0 and not [ln for ln in fourth[1]
                                   if ln.startswith('DRIFT')]
    # healthy nights after calibration are all clear
    for n in sorted(nights):
        if 'healthy' in n:
            assert nights[n][0] == 0 and 'all clear' in nights[n][1][0]


def test_after_accept_the_degraded_level_is_all_clear():
    rc, mail = _nights()['night-12-after-accept']
    assert rc == 0 and 'all clear' in mail[0]
    accept = open(os.path.join(D, 'news-first-week', 'logs',
                               'accept.txt')).read()
    assert 'accepted #1' in accept and 'exit 0' in accept
