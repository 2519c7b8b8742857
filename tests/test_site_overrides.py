"""A site file checked against what it overrides when it is loaded (issue
27, item 3): ``benign_warns`` patterns against lines of the fatal WARN
classes (built from the upstream format strings), ``ceiling`` against the
system's references; and through the health hook, where a refused site
file is one COULD-NOT-CHECK line (exit 2), never HEALTHY and never a
drain."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from ccl_health import CclHealthError
from ccl_health.evidence import benignwarns, warns
from ccl_health.judge import reference
from ccl_health.sitedata import overrides, site
from conftest import REPO
from helpers.node import CAP, FAKE, REPLAY, environ

SITE_DIR = os.path.join(REPO, 'site')
REF_DIR = os.path.join(REPO, 'reference')
MINIMAL = 'transports: {intra: {env: {}}}\n'
ILLEGAL = "Cuda failure 'an illegal memory access was encountered'"


def parse(benign):
    return site.parse(MINIMAL + 'benign_warns: ' + benign, 'site/x.yaml',
                      benign_check=benignwarns.check_benign)


def test_benign_warns_are_never_taken_unchecked():
    """Site data checks the WARN patterns with the check it is given (the
    WARN classes are the evidence's, a layer above); a loader given none
    refuses a file that declares benign WARNs, it never keeps them
    unchecked.  A file without any needs no check."""
    text = MINIMAL + 'benign_warns: [{pattern: ".*", why: w}]'
    with pytest.raises(CclHealthError, match='benign_warns: not checked'):
        site.parse(text, 'site/x.yaml')
    assert site.parse(MINIMAL, 'site/x.yaml').benign_warns == []


def refused(benign):
    with pytest.raises(CclHealthError) as err:
        parse(benign)
    msg = str(err.value)
    assert '\n' not in msg and 'internal error' not in msg
    return msg


# -- benign_warns -------------------------------------------------------------

def test_every_fatal_class_has_samples_of_its_own_class():
    samples = warns.fatal_samples()
    assert {c for c, _ in samples} == set(warns.FATAL_CLASSES)
    for cls, text in samples:
        assert warns.classify(text).fatal == cls, (cls, text)
    # a line of every fatal string of the upstream table is among them
    from ccl_health.evidence import warntable
    fatal_rows = [r for r in warntable.rows() if r.disposition == 'fatal']
    assert len(samples) > len(fatal_rows) // 2


@pytest.mark.parametrize('pattern', [
    '.*', '.', '^', '$', '(?s).*', r'\w', r'\S', 'x?', '|Cuda',
    '[^\\n]', r'(?i)[a-z]'])
def test_a_pattern_that_matches_any_line_is_refused(pattern):
    msg = refused(json.dumps([{'pattern': pattern, 'why': 'x'}]))
    assert msg.startswith('site/x.yaml: benign_warns[0].pattern: ')
    assert 'matches any line' in msg


def test_match_all_is_refused_even_when_it_names_every_class():
    classes = ', '.join(warns.FATAL_CLASSES)
    msg = refused(f'[{{pattern: ".*", why: x, overrides: [{classes}]}}]')
    assert 'matches any line' in msg


@pytest.mark.parametrize('pattern', [
    # issue 41: the guard's two former lines left out by a negated class
    # or a look-ahead, then every fatal line silenced but one
    '^[^ZA]', r'^(?!Zq7)(?!Allocation failed$).',
    # one that leaves out every unrelated line the guard tries
    r'^(?!Zq7|lorem|0 kqz|\[x\]| q|Mqv7)(?=.)'])
def test_a_pattern_that_silences_most_fatal_lines_is_refused(pattern):
    classes = ', '.join(warns.FATAL_CLASSES)
    msg = refused(json.dumps([{'pattern': pattern, 'why': 'x',
                               'overrides': list(warns.FATAL_CLASSES)}]))
    assert 'matches any line' in msg, (classes, msg)
    # the oracle: the samples the guard is about, counted here
    samples = warns.fatal_samples()
    rx = re.compile(pattern)
    assert sum(1 for _, t in samples if rx.search(t)) > len(samples) // 2


def test_a_narrow_pattern_naming_its_class_is_still_accepted():
    good = json.dumps([{'pattern': 'NET/IB : mlx5_0:1 async fatal event',
                        'why': 'port 1 of mlx5_0 is unused',
                        'overrides': ['connection']}])
    assert benignwarns.check_benign(json.loads(good), 'site/x.yaml')


def test_the_empty_pattern_is_refused_naming_the_key():
    msg = refused('[{pattern: "", why: x}]')
    assert 'site/x.yaml' in msg and 'benign_warns' in msg


def test_a_pattern_matching_a_fatal_line_must_name_its_class():
    msg = refused('[{pattern: GID table change, why: ok}, '
                  '{pattern: illegal memory access, why: x}]')
    assert msg.startswith('site/x.yaml: benign_warns[1].pattern: '
                          "'illegal memory access' matches WARN lines of "
                          'the fatal class cuda (e.g. "NCCL WARN Cuda '
                          "failure 'an illegal memory access was "
                          'encountered\'")'), msg
    assert 'overrides: cuda' in msg


def test_a_pattern_over_several_classes_names_them_all():
    msg = refused('[{pattern: "failed", why: x, overrides: cuda}]')
    for cls in ('connection', 'memory-registration', 'internal',
                'plugin-init'):
        assert cls in msg
    assert 'fatal classes' in msg


def test_a_bad_regex_names_file_and_key(tmp_path):
    d = tmp_path / 'site'
    d.mkdir()
    (d / 'x.yaml').write_text(MINIMAL + 'benign_warns:\n'
                              '- {pattern: GID table change, why: a}\n'
                              '- {pattern: port active, why: b}\n'
                              '- {pattern: "a(", why: c}\n')
    with pytest.raises(CclHealthError) as err:
        site.load(str(d), 'x', benign_check=benignwarns.check_benign)
    assert str(err.value) == (
        f'{d}/x.yaml: benign_warns[2].pattern: bad regex \'a(\': missing ), '
        f'unterminated subpattern at position 1')


@pytest.mark.parametrize('value, says', [
    ('crash', "'crash' is not a fatal WARN class"),
    ('[cuda, Cuda]', "'Cuda' is not a fatal WARN class"),
])
def test_overrides_names_a_fatal_warn_class(value, says):
    msg = refused(f'[{{pattern: illegal memory access, why: x, '
                  f'overrides: {value}}}]')
    assert msg.startswith('site/x.yaml: benign_warns[0].overrides: ')
    assert says in msg and 'cuda' in msg


def test_why_must_say_something():
    msg = refused('[{pattern: illegal memory access, why: " ", '
                  'overrides: cuda}]')
    assert msg.startswith('site/x.yaml: benign_warns[0].why: ')


def test_a_named_override_is_accepted_and_silences_only_that():
    s = parse('[{pattern: illegal memory access, overrides: cuda, '
              'why: "the test kernel faults on purpose"}]')
    benign = warns.benign_patterns(s.benign_warns)
    [w] = warns.read_text(f'x:1:1 [0] NCCL WARN {ILLEGAL}', benign=benign)
    assert w.fatal is None and w.benign == \
        'the test kernel faults on purpose'
    # another cuda line: not matched, still fatal
    [w] = warns.read_text("x:1:1 [0] NCCL WARN Cuda failure 'unspecified "
                          "launch failure'", benign=benign)
    assert w.fatal == 'cuda' and not w.benign


def test_a_pattern_silences_no_fatal_class_it_does_not_name():
    # at run time too: the class is checked line by line, whatever the
    # samples tried at load time
    benign = warns.benign_patterns([
        {'pattern': 'illegal memory access|closed by remote peer',
         'why': 'x', 'overrides': 'cuda'},
        {'pattern': 'catastrophic', 'why': 'y'}])
    conn = 'x:1:1 [0] NCCL WARN Net : Connection closed by remote peer n1<1>'
    [w] = warns.read_text(conn, benign=benign)
    assert w.fatal == 'connection' and not w.benign
    [w] = warns.read_text('x:1:1 [0] NCCL WARN NET/IB : mlx5_0:1 async '
                          'fatal event: local catastrophic error',
                          benign=benign)
    assert w.fatal == 'connection' and not w.benign
    # a line of no fatal class is silenced without naming any
    [w] = warns.read_text('x:1:1 [0] NCCL WARN a catastrophic advisory',
                          benign=benign)
    assert w.fatal is None and w.benign == 'y'


def test_advisory_patterns_need_no_override():
    s = parse('[{pattern: "NET/IB : Got async event : GID table change", '
              'why: "IP changes on this RoCE fabric"}]')
    assert s.benign_warns[0]['pattern'].startswith('NET/IB')


# -- ceiling ------------------------------------------------------------------

def _local_with_ceiling(transport, links, gbps):
    text = open(os.path.join(SITE_DIR, 'local.yaml')).read()
    old = f'  {transport}:\n    env:'
    assert old in text
    return site.parse(text.replace(old, f'  {transport}:\n    ceiling: '
                                   f'{{links: {links}, link_gbps: {gbps}}}\n'
                                   f'    env:', 1), 'site/local.yaml',
                      'local')


def test_a_ceiling_below_a_reference_names_both():
    s = _local_with_ceiling('intra', 18, 12.5)
    ref = reference.load_for_system(REF_DIR, 'local')
    with pytest.raises(CclHealthError) as err:
        overrides.check_ceilings(s, ref)
    msg = str(err.value)
    assert msg.startswith('site/local.yaml: transports.intra.ceiling: 18 '
                          'links x 12.5 GB/s = 225 GB/s is below the '
                          f'reference {ref.path}: partitions.gpu.entries['), \
        msg
    # the highest intra value of the file is named, with its key
    top = max(v for e in ref.partitions['gpu'].entries
              if e.transport == 'intra' for v in e.busbw.values())
    assert f': {top:g} GB/s' in msg and 'intra ' in msg and '.busbw.' in msg


def test_a_ceiling_above_every_reference_is_accepted():
    ref = reference.load_for_system(REF_DIR, 'local')
    overrides.check_ceilings(_local_with_ceiling('intra', 18, 50), ref)


def test_a_ceiling_is_compared_with_its_own_transport_only():
    ref = reference.load_for_system(REF_DIR, 'local')
    sock = max(v for p in ref.partitions.values() for e in p.entries
               if e.transport == 'net-socket' for v in e.busbw.values())
    # above every net-socket value, far below the intra ones: accepted
    overrides.check_ceilings(_local_with_ceiling('net-socket', 1,
                                                 sock + 1), ref)
    with pytest.raises(CclHealthError, match='transports.net-socket'):
        overrides.check_ceilings(_local_with_ceiling('net-socket', 1,
                                                     sock / 2), ref)


# -- through the health hook --------------------------------------------------

HOOK = [sys.executable, '-m', 'ccl_health.hook', '--tests-prefix', REPLAY,
        '--launcher', os.path.join(FAKE, 'launch')]


def _hook(tmp_path, site_edit=None, warn_lines=()):
    """The hook on the real healthy intra capture with ``warn_lines``
    appended to rank 0's debug log, and ``site_edit(text)`` of
    site/local.yaml; (exit, its one line)."""
    rep = tmp_path / 'replay'
    shutil.copytree(os.path.join(CAP, 'intra'), rep / 'intra')
    env = {'CCL_HEALTH_REPLAY_DIR': str(rep)}
    if warn_lines:
        [log] = sorted((rep / 'intra').glob('nccl-debug.*.log'))[:1]
        with open(log, 'a') as fp:
            for line in warn_lines:
                fp.write(f'vm:25480:25490 [0] NCCL WARN {line}\n')
    if site_edit:
        d = tmp_path / 'site'
        shutil.copytree(SITE_DIR, d)
        (d / 'local.yaml').write_text(site_edit(
            (d / 'local.yaml').read_text()))
        env['CCL_HEALTH_SITE_DIR'] = str(d)
    p = subprocess.run(HOOK + ['--json', str(tmp_path / 'detail.json')],
                       env=environ(tmp_path, env), capture_output=True,
                       text=True, timeout=120, cwd=str(tmp_path))
    lines = p.stdout.splitlines()
    assert len(lines) == 1, (p.stdout, p.stderr)
    return p.returncode, lines[0]


def _benign(entry):
    return lambda text: text + f'benign_warns:\n- {entry}\n'


def test_hook_the_injected_cuda_failure_drains(tmp_path):
    # the baseline of the next tests: the fault is seen without a site
    # override
    rc, line = _hook(tmp_path, warn_lines=[ILLEGAL])
    assert rc == 1 and 'crash: NCCL WARN of class cuda' in line, line


def test_hook_match_all_benign_is_refused_never_healthy(tmp_path):
    rc, line = _hook(tmp_path, _benign('{pattern: ".*", why: x}'),
                     [ILLEGAL])
    assert rc == 2, line
    assert line.startswith(f'COULD-NOT-CHECK: {tmp_path}/site/local.yaml: '
                           f'benign_warns[0].pattern: \'.*\' matches any '
                           f'line'), line


def test_hook_bad_regex_names_file_and_key(tmp_path):
    rc, line = _hook(tmp_path, _benign('{pattern: "a(", why: x}'))
    assert rc == 2
    assert line == (f'COULD-NOT-CHECK: {tmp_path}/site/local.yaml: '
                    f'benign_warns[0].pattern: bad regex \'a(\': missing ), '
                    f'unterminated subpattern at position 1')


def test_hook_named_override_silences_only_its_line(tmp_path):
    edit = _benign('{pattern: "illegal memory access", overrides: cuda, '
                   'why: "injected by the test"}')
    rc, line = _hook(tmp_path, edit, [ILLEGAL])
    assert rc == 0 and line.startswith('HEALTHY: '), line
    rc, line = _hook(tmp_path / 'b', edit, [
        ILLEGAL, 'Net : Connection closed by remote peer vm<41234>'])
    assert rc == 1 and 'NCCL WARN of class connection' in line, line


def test_hook_ceiling_typo_is_one_line_not_a_drain(tmp_path):
    def edit(text):
        return text.replace('  intra:\n    env: {}\n', '  intra:\n    env: '
                            '{}\n    ceiling: {links: 18, link_gbps: 12.5}\n')
    rc, line = _hook(tmp_path, edit)
    assert rc == 2, line
    assert line.startswith(f'COULD-NOT-CHECK: {tmp_path}/site/local.yaml: '
                           f'transports.intra.ceiling: 18 links x 12.5 GB/s '
                           f'= 225 GB/s is below the reference '), line
    assert 'reference/local.yaml: partitions.gpu.entries[' in line, line


def test_fleet_checks_the_site_ceiling_against_its_reference(tmp_path):
    from ccl_health import fleetcli as cli
    text = open(os.path.join(SITE_DIR, 'local.yaml')).read().replace(
        '  intra:\n    env: {}\n', '  intra:\n    env: {}\n    ceiling: '
        '{links: 18, link_gbps: 12.5}\n')
    path = tmp_path / 'local.yaml'
    path.write_text(text + f'fleet:\n  reference: {REF_DIR}/local.yaml\n')
    args = cli.parser().parse_args(['--site', str(path), '--system',
                                    'local'])
    with pytest.raises(CclHealthError,
                       match=r'transports\.intra\.ceiling: .* below the '
                             r'reference .*local\.yaml: partitions\.gpu'):
        cli.load_site(args)
    # without a reference the fleet compares nothing with it
    path.write_text(text)
    cli.load_site(args)


def test_sweep_refuses_a_site_ceiling_below_the_reference(tmp_path):
    """The ReFrame sweep's door: the case fails in setup with the one
    line naming both keys, before any job runs."""
    pytest.importorskip('reframe')
    d = tmp_path / 'site'
    shutil.copytree(SITE_DIR, d)
    text = (d / 'local.yaml').read_text()
    (d / 'local.yaml').write_text(text.replace(
        '  intra:\n    env: {}\n', '  intra:\n    env: {}\n    ceiling: '
        '{links: 18, link_gbps: 12.5}\n', 1))
    env = dict(os.environ, CCL_HEALTH_SITE_DIR=str(d),
               CCL_HEALTH_ASSUME_GPUS='2:sm_90',
               CCL_HEALTH_OUTPUT=str(tmp_path / 'out'))
    p = subprocess.run([os.path.join(os.path.dirname(sys.executable),
                                     'reframe'), '-C', 'config/settings.py',
                        '-c', 'checks/collective_sweep.py', '--system',
                        'local', '--dry-run', '-n',
                        'AllReduceSweep%transport=intra'],
                       env=env, cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode != 0
    assert f'{d}/local.yaml: transports.intra.ceiling: 18 links x 12.5 ' \
        f'GB/s = 225 GB/s is below the reference ' in p.stdout, \
        p.stdout[-3000:]
