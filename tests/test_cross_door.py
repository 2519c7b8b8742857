"""The cross-door fault matrix (issues 19 and 37): real captures x every
damaging mutation (tests/helpers/mutations.py: the output faults of issue
11 and the judge's classes 4-6) through the one case assembler
(:mod:`ccl_health.judge.assemble`: what a run left, the transport asked,
the site, the node's state and the reference in, the judge's evidence
out) and every door that judges a case, each a thin adapter around it:

* the assembler itself, called with what the run left (the oracle the
  doors are held to);
* ``scripts/explain`` (:func:`ccl_health.explain.explain`);
* the sweep's adapter (:func:`ccl_health.rfm.sweep.sweep_evidence`, what
  ``CollectiveSweepBase._judge`` calls, without ReFrame; the whole
  ReFrame path is tests/test_fault_matrix.py and one replay case below);
* ingest (:func:`ccl_health.db.recorder.case_verdict` of the judged
  verdict with :func:`~ccl_health.db.recorder.sizes_from_sweep`: it
  records what the sweep judged and assembles nothing);
* a fleet step (:func:`ccl_health.fleet.rounds.judge_step`, with the
  capture's debug logs, the reference file and proof asked);
* the node health hook, for the intra-node captures (its adapter
  without GPUs: :func:`ccl_health.hook.judging.output_attempt` of the
  probe's output and debug logs, :func:`~ccl_health.hook.judging.
  probe_evidence` of the hook's key at its size, then the judge).

Every door must give the assembler's verdict name, and none may pass a
damaged input; the undamaged and harmlessly prefixed captures pass
everywhere.  A site's ``benign_warns`` reach every door alike."""

import glob
import os
import random
import re

import pytest

from helpers import mutations
from conftest import REPO

from ccl_health import CclHealthError
from ccl_health.evidence import nccltests
from ccl_health.sitedata import site as site_data
from ccl_health.evidence.benignwarns import check_benign
from helpers.doors import capture, hook_judge, through_every_door  # ReFrame

CAP = os.path.join(REPO, 'tests', 'fixtures', 'device', 'cap')
#: captures of complete, healthy runs with a reference in reference/local.yaml
CAPTURES = ['intra', 'net-socket']
DAMAGING = mutations.DAMAGING
HARMLESS = sorted(mutations.HARMLESS)[:2]


@pytest.mark.parametrize('cap', CAPTURES)
@pytest.mark.parametrize('case', ['undamaged'] + HARMLESS)
def test_healthy_capture_passes_every_door(tmp_path, cap, case):
    text, logs = capture(cap)
    if case != 'undamaged':
        text = mutations.HARMLESS[case](text, random.Random(19))
    got = through_every_door(tmp_path, cap, text, logs)
    assert set(got.values()) == {'pass'}, got


NOT_OF_THE_CASE = mutations.NOT_OF_THE_CASE


@pytest.mark.parametrize('cap,case', [
    (c, k) for c in CAPTURES for k in sorted(DAMAGING)
    if (k, c) not in NOT_OF_THE_CASE])
@pytest.mark.parametrize('seed', [19, 7])
def test_damage_gives_one_verdict_and_never_a_pass(tmp_path, cap, case,
                                                   seed):
    text, logs = capture(cap)
    damaged = DAMAGING[case](text, random.Random(seed))
    assert damaged != text
    got = through_every_door(tmp_path, cap, damaged, logs)
    assert len(set(got.values())) == 1, (case, got)
    assert 'pass' not in got.values(), (case, got)


@pytest.mark.parametrize('case', sorted(
    k for k in DAMAGING if (k, 'intra') not in NOT_OF_THE_CASE))
def test_the_hooks_retry_absorbs_only_a_shortfall(tmp_path, case):
    """The hook's two tries, the damaged one first and a clean one after:
    the damage is the verdict, named with its attempt, unless it is a
    bandwidth shortfall (the only thing a retry may absorb)."""
    text, logs = capture('intra')
    damaged = DAMAGING[case](text, random.Random(19))
    alone = through_every_door(tmp_path, 'intra', damaged, logs)['hook']
    j = hook_judge([(damaged, 0), (text, 0)], logs)
    if alone in ('below-reference', 'drop'):
        assert str(j.verdict) == 'pass' and j.attempt == 2, j.reason
    else:
        assert str(j.verdict) == alone and j.attempt == 1, j.reason
        assert j.reason.startswith('attempt 1 of 2: '), j.reason


@pytest.mark.parametrize('case,cap', sorted(NOT_OF_THE_CASE))
def test_a_network_warn_on_an_intra_case_passes_every_door(tmp_path, case,
                                                           cap):
    """Named, never fatal, in every door alike (the one judge)."""
    text, logs = capture(cap)
    damaged = DAMAGING[case](text, random.Random(19))
    docs = {}
    got = through_every_door(tmp_path, cap, damaged, logs, docs=docs)
    assert set(got.values()) == {'pass'}, got
    assert 'from the network code on an intra-node case' in \
        docs['explain']['reason'], docs['explain']['reason']


def test_the_hook_door_is_there(tmp_path):
    text, logs = capture('intra')
    got = through_every_door(tmp_path, 'intra', text, logs)
    assert got['hook'] == 'pass' and len(got) == 6


def test_nonzero_exit_after_a_complete_table_is_a_crash_everywhere(tmp_path):
    text, logs = capture('intra')
    got = through_every_door(tmp_path, 'intra', text, logs, rc=1)
    assert set(got.values()) == {'crash'}, got


@pytest.mark.parametrize('case', ['impossible-busbw', 'warn-progress'])
def test_the_whole_reframe_path_agrees(tmp_path, case):
    """One real ReFrame run per class (the replay stand-in plays the
    damaged capture): the sweep's verdict line and its database row say
    what the other doors say."""
    import shutil
    import subprocess
    import sys
    from ccl_health.db import store
    from helpers.replay import replay_env, verdict_lines
    root = tmp_path / 'cap'
    shutil.copytree(os.path.join(CAP, 'intra'), root / 'intra')
    (root / 'intra' / 'result.json').unlink()
    text, logs = capture('intra')
    damaged = DAMAGING[case](text, random.Random(19))
    (root / 'intra' / 'stdout.txt').write_text(damaged)
    expected = through_every_door(tmp_path, 'intra', damaged, logs)
    assert len(set(expected.values())) == 1
    db = tmp_path / 'db.sqlite'
    env = replay_env(tmp_path, {'CCL_HEALTH_DB': str(db),
                                'CCL_HEALTH_REPLAY_DIR': str(root),
                                'CCL_HEALTH_REFERENCE_DIR': None})
    p = subprocess.run([sys.executable, '-m', 'ccl_health.cli', 'run',
                        '--output', str(tmp_path / 'out'), '--', '-n',
                        'AllReduceSweep%transport=intra', '-S',
                        'min_size=8', '-S', 'max_size=8G'],
                       env=env, cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    line = verdict_lines(p.stdout)['intra']
    with store.open_store(str(db), readonly=True) as s:
        [recorded] = s.cases()
    assert p.returncode == 1, line
    assert recorded['verdict'] == expected['sweep'], (line, expected)
    assert expected['sweep'].upper() in line, line


def _logs_of_pids(tmp_path, logs, shift):
    """The capture's debug logs as another run would have left them: the
    same lines, every logger prefix's pid moved by ``shift``."""
    out = []
    for path in logs:
        text = open(path).read()
        text = re.sub(r'^(\S+?):(\d+):(\d+) \[',
                      lambda m: f'{m.group(1)}:{int(m.group(2)) + shift}:'
                                f'{m.group(3)} [', text, flags=re.M)
        pid = int(re.search(r'\.(\d+)\.log$', path).group(1)) + shift
        dest = tmp_path / f'nccl-debug.vm.{pid}.log'
        dest.write_text(text)
        out.append(str(dest))
    return out


@pytest.mark.parametrize('cap', CAPTURES)
def test_debug_logs_of_another_run_prove_nothing_in_any_door(tmp_path, cap):
    """The output names its ranks' processes (``Pid`` of the rank lines);
    debug logs whose logger prefix names other processes are of another
    run: could not check, in every door (never the other run's pass)."""
    text, logs = capture(cap)
    assert set(through_every_door(tmp_path, cap, text, logs).values()) == \
        {'pass'}
    other = _logs_of_pids(tmp_path, logs, 70000)
    docs = {}
    got = through_every_door(tmp_path, cap, text, other, docs=docs)
    assert set(got.values()) == {'could-not-check'}, got
    assert 'the debug logs are not of this run' in \
        docs['explain']['reason'], docs
    # one rank's log of this run, the other's of another run: that rank
    # is not proven
    mixed = [logs[0], other[1]]
    got = through_every_door(tmp_path, cap, text, mixed)
    assert set(got.values()) == {'could-not-check'}, got


@pytest.mark.parametrize('cap', CAPTURES)
def test_debug_logs_of_another_library_prove_nothing_in_any_door(tmp_path,
                                                                  cap):
    """The output's ``nccl-library=22803`` is the library its process
    loaded; logs of the same processes printing ``NCCL version 2.27.7``
    cannot be of this run: could not check in every door."""
    text, logs = capture(cap)
    assert 'nccl-library=22803' in text
    other = []
    for path in logs:
        dest = tmp_path / os.path.basename(path)
        dest.write_text(open(path).read().replace('NCCL version 2.28.3',
                                                  'NCCL version 2.27.7'))
        other.append(str(dest))
    docs = {}
    got = through_every_door(tmp_path, cap, text, other, docs=docs)
    assert set(got.values()) == {'could-not-check'}, got
    assert "print NCCL 2.27.7, the output's library is 2.28.3" in \
        docs['explain']['reason'], docs


# -- the site's benign WARNs reach every door (issue 37) ----------------------

#: a WARN of a fatal class (``connection``: NCCL's socket code returns an
#: error after it) that a site may know to be harmless on its machines
TEARDOWN_WARN = ('socketProgress: Connection closed by remote peer '
                 'vm<41234>')
#: the site's word for it (``site/local.yaml`` plus this item)
BENIGN_ITEM = ('benign_warns:\n'
               '- pattern: "^socketProgress: Connection closed by remote '
               'peer vm<"\n'
               '  overrides: connection\n'
               '  why: the launcher ends the ranks unevenly at teardown\n')


def site_with_benign():
    path = os.path.join(REPO, 'site', 'local.yaml')
    with open(path) as fp:
        text = fp.read()
    return site_data.parse(text + BENIGN_ITEM, path,
                           benign_check=check_benign)


def logs_with_warn(tmp_path, logs):
    """The capture's debug logs, the second rank's with the WARN line
    appended (as NCCL's logger writes it)."""
    out = []
    for i, path in enumerate(logs):
        text = open(path).read()
        if i == 1:
            pid = re.search(r'\.(\d+)\.log$', path).group(1)
            text += f'vm:{pid}:{pid} [1] NCCL WARN {TEARDOWN_WARN}\n'
        dest = tmp_path / os.path.basename(path)
        dest.write_text(text)
        out.append(str(dest))
    return out


@pytest.mark.parametrize('cap', CAPTURES)
def test_a_warn_the_site_declares_benign_passes_every_door(tmp_path, cap):
    """The same run, the same WARN: without the site every door fails it
    alike; with the site's ``benign_warns`` every door passes it (the
    fleet's pair and group steps read the WARN lines without the site
    before the one assembler, and failed it)."""
    text, logs = capture(cap)
    warned = logs_with_warn(tmp_path, logs)
    bare = through_every_door(tmp_path, cap, text, warned)
    assert set(bare.values()) == {'crash'}, bare
    docs = {}
    got = through_every_door(tmp_path, cap, text, warned,
                             site=site_with_benign(), docs=docs)
    assert set(got.values()) == {'pass'}, got
    assert len(got) == (6 if cap == 'intra' else 5), got
    assert 'benign: the launcher ends the ranks unevenly' in \
        docs['explain']['reason'], docs['explain']['reason']


def test_the_site_silences_only_the_line_it_names(tmp_path):
    """Another line of the same fatal class is still a crash in every
    door, with the site given."""
    text, logs = capture('net-socket')
    other = []
    for i, path in enumerate(logs):
        body = open(path).read()
        if i == 1:
            body += ('vm:1:1 [1] NCCL WARN socketProgress: Connection closed '
                     'by remote peer node07<41234>\n')
        dest = tmp_path / os.path.basename(path)
        dest.write_text(body)
        other.append(str(dest))
    got = through_every_door(tmp_path, 'net-socket', text, other,
                             site=site_with_benign())
    assert set(got.values()) == {'crash'}, got


def test_a_case_is_assembled_in_one_place():
    """No module but the case assembler builds the judge's evidence
    (a ``CaseEvidence`` or an ``Attempt``): a door that did would read
    the run its own way again (as the fleet's steps read WARN lines
    without the site's ``benign_warns``)."""
    import ast
    root = os.path.join(REPO, 'ccl_health')
    found = []
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != '__pycache__']
        for f in files:
            if not f.endswith('.py'):
                continue
            path = os.path.join(top, f)
            with open(path) as fp:
                tree = ast.parse(fp.read(), path)
            for n in ast.walk(tree):
                func = getattr(n, 'func', None)
                name = getattr(func, 'id', None) or getattr(func, 'attr',
                                                            None)
                if isinstance(n, ast.Call) and name in ('CaseEvidence',
                                                        'Attempt'):
                    found.append(os.path.relpath(path, REPO))
    assert found and set(found) == {'ccl_health/judge/assemble.py'}, found


# -- any collective: a paste's own collective and sweep (issue 43) -----------

#: ROCm/rccl#1490: rank 0's all_gather_perf table on 4 nodes x 8 GCDs
#: (MI250X, aws-ofi-rccl on Slingshot 11) behind srun's `` 0: `` label, from
#: the column header to its summary: no run header, no collective named
MI250X_AG = os.path.join(
    REPO, 'tests', 'fixtures', 'published',
    'rccl-tests_all_gather_mi250x-4node-32rank_srun-label_no-header_'
    'rccl-issue-1490.txt')
#: the author's own command line of that issue, above the table: it names
#: the collective and the sweep
MI250X_CMD = (' 0: srun --nodes=4 --ntasks-per-node=8 --cpus-per-task=8 '
              '--threads-per-core=1 --label -- all_gather_perf -b 64K -e 4G '
              '-f 2 -g 1\n')


def mi250x_pastes():
    """``{name: (text, collective given)}``: the paste as kept (its
    collective given as explain's ``--collective``), and with its command
    line above it (the collective and sweep its own)."""
    with open(MI250X_AG) as fp:
        text = fp.read()
    return {'as-kept': (text, 'all_gather'),
            'with-command': (MI250X_CMD + text, None)}


@pytest.mark.parametrize('paste', ['as-kept', 'with-command'])
@pytest.mark.parametrize('transport', ['net-plugin', 'intra'])
@pytest.mark.parametrize('rc', [0, None])
def test_an_all_gather_paste_gives_one_verdict_in_every_door(
        tmp_path, paste, transport, rc):
    """The all_gather table read by every door as all_gather, over its own
    sweep: one verdict (was: the assembler, the sweep and ingest judged the
    all_reduce capture's sizes, ``incomplete``; the fleet its all_reduce
    reference, ``below-reference``; explain ``could-not-check``)."""
    text, coll = mi250x_pastes()[paste]
    docs = {}
    got = through_every_door(tmp_path, transport, text, [], rc=rc,
                             collective=coll, clean_text=text, nodes=4,
                             gpus_per_node=8, docs=docs)
    assert set(got.values()) == {'could-not-check'}, got
    assert ('fleet' in got) == (paste == 'with-command'), got
    assert docs['explain']['nranks'] == 32
    assert 'all_gather' in docs['explain']['reference']['key']


@pytest.mark.parametrize('paste', ['as-kept', 'with-command'])
@pytest.mark.parametrize('case', sorted(DAMAGING))
def test_a_damaged_all_gather_paste_gives_one_verdict_in_every_door(
        tmp_path, paste, case):
    text, coll = mi250x_pastes()[paste]
    damaged = DAMAGING[case](text, random.Random(19))
    if damaged == text:
        pytest.skip(f'{case} does not apply to this paste')
    try:
        got = through_every_door(tmp_path, 'net-plugin', damaged, [], rc=0,
                                 collective=coll, clean_text=text, nodes=4,
                                 gpus_per_node=8)
    except CclHealthError as err:
        # nothing recognisable left (the column header only): explain
        # judges nothing (exit 2), never a pass
        assert 'nothing recognisable' in str(err), err
        return
    assert len(set(got.values())) == 1, (case, got)
    assert 'pass' not in got.values(), (case, got)


#: captures of the other collectives (intra-node, 2 GPUs; no debug log)
COLL_CAPTURES = sorted(os.path.basename(d) for d in
                       glob.glob(os.path.join(CAP, 'coll-*')))


@pytest.mark.parametrize('cap', COLL_CAPTURES)
def test_every_collective_is_read_as_itself_in_every_door(tmp_path, cap):
    """Each collective's capture, its collective and sweep read from its
    own header: one verdict in every door (no debug log: could not check).
    The fleet's step judged its table as all_reduce whatever program ran
    (its reference key and busbw: ``below-reference`` for all_gather,
    alltoall and reduce_scatter); it is now the program of its probe."""
    text, logs = capture(cap)
    assert nccltests.parse_text(text).collective == \
        cap[len('coll-'):] + '_perf'
    got = through_every_door(tmp_path, 'intra', text, logs, clean_text=text)
    assert set(got.values()) == {'could-not-check'}, got
    assert 'fleet' in got


@pytest.mark.parametrize('cap', COLL_CAPTURES)
@pytest.mark.parametrize('case', sorted(
    k for k in DAMAGING if (k, 'intra') not in NOT_OF_THE_CASE))
def test_damage_to_any_collective_gives_one_verdict(tmp_path, cap, case):
    text, logs = capture(cap)
    damaged = DAMAGING[case](text, random.Random(19))
    if damaged == text:
        pytest.skip(f'{case} does not apply to {cap}')
    try:
        got = through_every_door(tmp_path, 'intra', damaged, logs,
                                 clean_text=text)
    except CclHealthError as err:
        # cut before anything recognisable: explain judges nothing (exit
        # 2), never a pass
        assert 'nothing recognisable' in str(err), err
        return
    assert len(set(got.values())) == 1 and 'pass' not in got.values(), got
