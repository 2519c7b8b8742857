"""What the device showed (tests/fixtures/device/verdicts-before, -after,
-final, hostile-hook, hostile-hook-final): the same verdicts before and
after the package was split and the judge made one (and on the final code,
with the node's rules in the judge), and the hook's answers in a hostile
environment (the final code's lines name the action)."""

import json
import os
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
