"""scripts/explain on real runs: the outputs and NCCL debug logs of the
suite's own device runs (tests/fixtures/device/suite-run), judged against
reference/local.yaml like the suite judges them, and damaged the ways
tests/helpers/mutations.py damages them."""

import glob
import json
import os
import subprocess
import sys

import pytest

from helpers import mutations as M
from conftest import REPO

STAGE = os.path.join(REPO, 'tests', 'fixtures', 'device', 'suite-run', 'keep',
                     '{run}', 'stage', 'local', 'gpu', 'builtin', '{case}')
INTRA = ('o-main', 'AllReduceSweep_a9fd2800')        # intra, 8 B .. 8 GiB
SOCKET = ('o-main', 'AllReduceSweep_6a3da28c')       # net-socket
PLUGIN = ('o-main', 'AllReduceSweep_28a5e52c')       # net-plugin
FALLBACK = ('o-fallback', 'AllReduceSweep_28a5e52c')  # plugin missing
HANG = ('o-hang', 'AllReduceSweep_6a3da28c')         # killed: cut output
LOCAL = ['--system', 'local', '--partition', 'gpu']


def files(run, case, json_file=True, logs=True):
    d = STAGE.format(run=run, case=case)
    out = [os.path.join(d, 'rfm_job.out')]
    if json_file:
        out.append(os.path.join(d, 'result.json'))
    if logs:
        out += sorted(glob.glob(os.path.join(d, 'nccl-debug.*.log')))
    return out


def explain(*args, env=None):
    e = dict(os.environ)
    e.pop('CCL_HEALTH_REFERENCE_DIR', None)
    e.update(env or {})
    p = subprocess.run([sys.executable, '-m', 'ccl_health.explain', *args],
                       capture_output=True, text=True, cwd=REPO, env=e)
    return p


def doc_of(*args, **kw):
    p = explain(*args, '--json', **kw)
    assert p.stdout, p.stderr
    return p.returncode, json.loads(p.stdout)


@pytest.mark.parametrize('run, transport, sizes', [
    (INTRA, 'intra', 31), (SOCKET, 'net-socket', 28),
    (PLUGIN, 'net-plugin', 28)])
def test_real_runs_pass_with_their_reference(run, transport, sizes):
    p = explain(*files(*run), *LOCAL, '--transport', transport,
                '--exit-status', '0')
    assert p.returncode == 0, p.stdout + p.stderr
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith('PASS: ') and 'sizes within reference' in last
    rc, doc = doc_of(*files(*run), *LOCAL, '--transport', transport,
                     '--exit-status', '0')
    assert rc == 0 and doc['verdict'] == 'pass' and doc['exit_code'] == 0
    assert len(doc['rows']) == sizes and doc['complete']
    assert doc['transport']['proven'] == transport and doc['transport']['ok']
    assert doc['reference']['found'] and doc['reference']['file'].endswith(
        os.path.join('reference', 'local.yaml'))
    assert doc['versions']['nccl_tests'] == '2.19.6'
    assert doc['versions']['nccl_version'].startswith('2.28.3')
    assert [f['kind'] for f in doc['files']][:2] == ['output', 'json']
    assert all(f['kind'] == 'log' for f in doc['files'][2:])


def test_sizes_and_busbw_are_printed():
    p = explain(*files(*INTRA), *LOCAL, '--exit-status', '0')
    import re
    assert re.search(r'^\s+8GiB\s+348\.56\s+348\.56\s+313\.70$', p.stdout,
                     re.M)
    assert 'transport  proven intra' in p.stdout


def test_exit_status_unknown_is_could_not_check():
    p = explain(*files(*INTRA), *LOCAL)
    assert p.returncode == 2
    assert p.stdout.strip().splitlines()[-1] == (
        'COULD-NOT-CHECK: could not check: the exit status of '
        'all_reduce_perf is unknown (give it with --exit-status N)')


def test_nonzero_exit_after_a_complete_table_is_a_crash():
    rc, doc = doc_of(*files(*INTRA), *LOCAL, '--exit-status', '3')
    assert rc == 1 and doc['verdict'] == 'crash'
    assert 'status 3 after a complete table' in doc['reason']


def test_fallback_is_a_failure():
    rc, doc = doc_of(*files(*FALLBACK), *LOCAL, '--transport', 'net-plugin',
                     '--exit-status', '0')
    assert rc == 1 and doc['verdict'] == 'fallback'
    assert 'fell back to NET/Socket' in doc['reason']


def test_killed_run_with_a_cut_json_is_incomplete():
    rc, doc = doc_of(*files(*HANG), *LOCAL, '--exit-status', '0')
    assert rc == 1 and doc['verdict'] == 'incomplete'
    assert doc['json_error'] and 'not valid nccl-tests JSON' in \
        doc['json_error']
    assert len(doc['rows']) == 27 and not doc['complete']


@pytest.mark.parametrize('args, words', [
    (['--system', 'local', '--partition', 'gpuu'], "no partition 'gpuu'"),
    (['--system', 'locl', '--partition', 'gpu'],
     "no reference file for system 'locl'"),
    (['--system', 'local', '--partition', 'gpu', '--gpus-per-node', '8'],
     'no reference for local:gpu intra all_reduce 1 node x 8 GPUs'),
    ([], 'no reference given')])
def test_missing_or_misspelt_reference_is_no_reference(args, words):
    rc, doc = doc_of(*files(*INTRA), *args, '--exit-status', '0')
    assert rc == 2 and doc['verdict'] == 'no-reference', doc['reason']
    assert words in doc['reason']


def test_below_the_reference(tmp_path):
    ref = tmp_path / 'ref.yaml'
    ref.write_text(
        'system: elsewhere\npartitions:\n  gpu:\n    entries:\n'
        '    - transport: intra\n      collective: all_reduce\n'
        '      nodes: 1\n      gpus_per_node: 2\n      tolerance: 0.1\n'
        '      source: test\n      busbw: {1GiB: 330.0, 8GiB: 450.0}\n')
    rc, doc = doc_of(*files(*INTRA), '--reference', str(ref),
                     '--exit-status', '0')
    assert rc == 1 and doc['verdict'] == 'below-reference'
    assert doc['reason'] == ('below-reference: 8GiB 348.56 vs 450.00 GB/s '
                             '(allowed -10%)')
    below = [r['size'] for r in doc['rows'] if r['below']]
    assert below == [8 << 30]


def test_reference_dir_from_the_environment(tmp_path):
    (tmp_path / 'local.yaml').write_text(
        'system: local\npartitions:\n  other:\n    entries: []\n')
    rc, doc = doc_of(*files(*INTRA), *LOCAL, '--exit-status', '0',
                     env={'CCL_HEALTH_REFERENCE_DIR': str(tmp_path)})
    assert rc == 2 and doc['verdict'] == 'no-reference'
    assert str(tmp_path) in doc['reference']['file'] + doc['reason']


def test_without_debug_logs_the_transport_is_not_proven():
    rc, doc = doc_of(*files(*INTRA, logs=False), *LOCAL, '--exit-status',
                     '0')
    assert rc == 2 and doc['verdict'] == 'could-not-check'
    assert 'not proven' in doc['reason']


def test_damaged_outputs(tmp_path):
    out, js, *logs = files(*INTRA)
    text = open(out).read()
    cases = {
        'nan.txt': (M.inject_nonfinite(text, 20, 0, 2, '-nan'),
                    'wrong-results', 1),
        # every size there, its summary not: could not check (issue 43)
        'cut.txt': (M.truncate_lines(text, M.closing_index(text)),
                    'could-not-check', 2),
        'short.txt': (M.truncate_lines(text, M.row_indexes(text)[-1]),
                      'incomplete', 1),
        'cuda.txt': (M.insert_line(text, 15, M.FAILURE_LINES['test-cuda']),
                     'crash', 1),
        'oob.txt': (M.oob_failed(text, 4), 'wrong-results', 1),
        'prefixed.txt': (M.prefix_lines(text, 'time+openmpi'), 'pass', 0),
    }
    for name, (content, verdict, code) in cases.items():
        path = tmp_path / name
        path.write_text(content)
        rc, doc = doc_of(str(path), *logs, *LOCAL, '--exit-status', '0')
        assert (rc, doc['verdict']) == (code, verdict), (name, doc['reason'])
    # a damaged JSON does not hide the complete text table
    cut = tmp_path / 'result.json'
    cut.write_text(open(js).read()[:5000])
    rc, doc = doc_of(out, str(cut), *logs, *LOCAL, '--exit-status', '0')
    assert rc == 0 and doc['verdict'] == 'pass' and doc['json_error']


def test_rccl_tests_json_lines_alone_and_with_stdout(tmp_path):
    from ccl_health.evidence import nccltests
    out, js, *logs = files(*INTRA)
    jl = tmp_path / 'rccl.json'
    jl.write_text(M.rccl_json_lines(nccltests.parse_text(open(out).read())))
    rc, doc = doc_of(str(jl), *logs, *LOCAL, '--exit-status', '0')
    assert doc['format'] == 'rccl-tests-json-lines' and len(doc['rows']) == 31
    assert rc == 2 and doc['verdict'] == 'could-not-check'
    assert 'no closing summary' in doc['reason']
    rc, doc = doc_of(out, str(jl), *logs, *LOCAL, '--exit-status', '0')
    assert rc == 0 and doc['verdict'] == 'pass'


def test_unreadable_or_unrecognisable_files_name_the_file(tmp_path):
    junk = tmp_path / 'notes.txt'
    junk.write_text('hello\nnothing to see\n')
    for args, words in (([str(tmp_path / 'missing.txt')], 'missing.txt: '
                         'cannot read'),
                        ([str(junk)], 'notes.txt: not an nccl-tests')):
        p = explain(*args, *LOCAL)
        assert p.returncode == 2 and not p.stdout
        assert len(p.stderr.strip().splitlines()) == 1
        assert words in p.stderr


def test_debug_logs_alone_prove_the_transport_and_do_not_judge_bandwidth():
    # the suite's own runs: intra-node (P2P) and sockets between 2 ranks
    for case, proven in ((INTRA, 'intra'), (SOCKET, 'net-socket')):
        rc, doc = doc_of(*files(*case)[2:], *LOCAL)
        assert rc == 2 and doc['verdict'] == 'could-not-check'
        assert doc['transport']['proven'] == proven and doc['transport']['ok']
        assert 'debug log only' in doc['reason']
        assert 'bandwidth not judged' in doc['reason'] and not doc['rows']
    # the fallback run's logs alone: sockets where the plugin was missing;
    # the logs prove the fallback: failed, whatever the bandwidth (issue
    # 31.2)
    rc, doc = doc_of(*files(*FALLBACK)[2:], '--transport', 'net-plugin')
    assert rc == 1 and doc['verdict'] == 'fallback'
    assert doc['transport']['proven'] == 'net-socket'
    assert not doc['transport']['ok'] and 'fallback to net-socket' in \
        doc['reason']
    assert doc['reason'].startswith('fallback: ')


def test_the_script_wrapper():
    p = subprocess.run([os.path.join(REPO, 'scripts', 'explain'),
                        *files(*INTRA), *LOCAL, '--exit-status', '0'],
                       capture_output=True, text=True)
    assert p.returncode == 0 and 'PASS: ' in p.stdout


def test_the_json_alone_with_the_logs():
    out, js, *logs = files(*SOCKET)
    rc, doc = doc_of(js, *logs, *LOCAL, '--transport', 'net-socket',
                     '--exit-status', '0')
    assert rc == 0 and doc['verdict'] == 'pass' and doc['source'] == 'json'
    assert doc['collective'] == 'all_reduce_perf' and len(doc['rows']) == 28
    # asked for the plugin, the logs show sockets: a fallback
    rc, doc = doc_of(js, *logs, *LOCAL, '--transport', 'net-plugin',
                     '--exit-status', '0')
    assert rc == 1 and doc['verdict'] == 'fallback'


def test_gpus_per_node_comes_from_each_hosts_rank_count(tmp_path):
    from ccl_health.explain import explain as explain_doc
    row = ('%12li  %12li  %8s  %6s  %6i  %7.2f  %6.2f  %6.2f  %6i  %7.2f  '
           '%6.2f  %6.2f  %6i')

    def output(hosts):
        lines = ['# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) '
                 'warmup iters: 5 iters: 20 agg iters: 1 validation: 1 '
                 'graph: 0', '# Using devices']
        lines += ['#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s'
                  % (r, 0, 100 + r, h, r, '0000:05:00', 'NVIDIA H100')
                  for r, h in enumerate(hosts)]
        lines += [row % (8, 2, 'float', 'sum', -1, 10.0, 0, 0, 0, 10.0, 0, 0,
                         0), '# Out of bounds values : 0 OK',
                  '# Avg bus bandwidth    : 0 ', '#']
        p = tmp_path / f'out{len(hosts)}.txt'
        p.write_text('\n'.join(lines) + '\n')
        return str(p)
    # 3 ranks on a, 1 on b: no one GPUs-per-node (not 4 / 2 = 2)
    doc = explain_doc([output(['a', 'a', 'a', 'b'])], exit_status=0)
    assert doc['reference']['key'].endswith('2 node(s) x ? GPUs')
    assert any('different numbers of ranks: a 3, b 1' in n
               for n in doc['notes'])
    doc = explain_doc([output(['a', 'a', 'b', 'b', 'c', 'c'])], exit_status=0)
    assert doc['reference']['key'].endswith('3 node(s) x 2 GPUs')


def test_gpus_per_node_given_that_the_output_does_not_show_is_not_judged():
    # the 2x H200 sweep explained as a run of 1 node x 4 GPUs (an operator's
    # --gpus-per-node): judged before by the 4-GPU reference (below it
    # here; a lower reference, e.g. 8 GPUs', would have passed it)
    p = explain(*files(*INTRA), *LOCAL, '--transport', 'intra',
                '--exit-status', '0', '--gpus-per-node', '4')
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stdout.strip().splitlines()[-1] == (
        'COULD-NOT-CHECK: could not check: the output of all_reduce_perf is '
        'of 2 ranks, the case asked 4: 1 node x 4 GPUs (its bandwidth is '
        'not that of the case)')
    p = explain(*files(*INTRA), *LOCAL, '--transport', 'intra',
                '--exit-status', '0', '--gpus-per-node', '2')
    assert p.returncode == 0, p.stdout
