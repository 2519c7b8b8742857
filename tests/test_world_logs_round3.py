"""Issue 43: read the world's logs, round 3: say only what the paste shows.

Each class is read in the readers and the judge (so every door reads it
alike), proven on real outputs published by others
(tests/fixtures/published/SOURCES.md, "Issue 43") through ``scripts/explain``
and through every door of the cross-door matrix
(tests/test_cross_door.py ``through_every_door``), and on lines built from
the upstream format strings:

* H: a crash announced by the launcher or the C library (Open MPI's
  handler ``[%s:%05d] Signal: %s (%d)``, mpirun's "exited on signal %d
  (%s)", srun's "task %d: %s", the shell's "Aborted (core dumped)",
  glibc's malloc_printerr messages) is a crash naming the signal, never
  "nothing recognisable";
* E: an output that shows its closing summary, or every size of its sweep,
  reached its end: what the paste left out is could-not-check, never
  incomplete;
* G: NCCL's ``Using network IB`` without a channel line proves no transport
  and no fallback; NCCL's probe of the default ``libnccl-net.so`` is no
  plugin asked;
* extras: rccl-tests' ``# rccl-tests version ... rccl-headers=...`` banner,
  a GDR-off line named where GPUDirect RDMA was asked, and an output with
  NCCL INFO lines inline is not "without a debug log"."""

import glob
import os
import random
import re

import pytest

from helpers import mutations as M
from conftest import REPO
from helpers.doors import capture, through_every_door
from helpers.ncclformats import nccl_info, sweep, util_cu_head, util_cu_row, \
    util_cu_summary

from ccl_health import explain as X
from ccl_health.evidence import debuglog, nccltests
from ccl_health.evidence import proof as transport_proof
from ccl_health.judge.casejudge import judge_output
from ccl_health.judge.verdicts import Verdict

PUB = os.path.join(REPO, 'tests', 'fixtures', 'published')


def pub(name):
    return os.path.join(PUB, name)


def text_of(name):
    with open(pub(name)) as fp:
        return fp.read()


# -- H: crashes announced by the launcher or the C library -----------------

#: real pastes: (file, signal named)
CRASHES = [
    # all_reduce_perf -g 8 under Open MPI: its openib warnings, then its
    # signal handler's lines; no nccl-tests line at all
    ('nccl-tests_openmpi-segfault-before-header_8gpu_nccl-issue-817.txt',
     'Segmentation fault (11)'),
    # all_reduce_perf in 4 containers: UCX / UCC backtraces, then Open MPI's
    ('nccl-tests_ucx-backtrace-then-openmpi-segfault_4container_nccl-tests-'
     'issue-218.txt', 'Segmentation fault (11)'),
]


@pytest.mark.parametrize('name,signal', CRASHES)
@pytest.mark.parametrize('status', [0, None])
def test_a_crash_announced_by_the_launcher_is_a_crash(name, signal, status):
    doc = X.explain([pub(name)], exit_status=status)
    assert doc['files'] == [{'path': pub(name), 'kind': 'output'}]
    assert doc['verdict'] == 'crash' and doc['exit_code'] == 1
    assert f'died of signal {signal}' in doc['reason']
    assert 'CRASH' in X.render(doc)


@pytest.mark.parametrize('name,signal', CRASHES)
def test_a_crash_announced_by_the_launcher_is_a_crash_in_every_door(
        tmp_path, name, signal):
    got = through_every_door(tmp_path, 'intra', text_of(name), [], rc=0)
    assert set(got.values()) == {'crash'}, got


#: lines built from the upstream format strings (Open MPI
#: opal/util/stacktrace.c and orte/prte's help-errmgr-base.txt, Slurm's
#: srun, bash, MPICH's hydra, UCX's ucs/debug, glibc malloc/malloc.c
#: malloc_printerr and debug/stack_chk_fail), with the signal each names
SIGNAL_LINES = [
    ('[node01:12345] Signal: Aborted (6)', 'Aborted (6)'),
    ('[node01:12345] Signal: Bus error (7)', 'Bus error (7)'),
    ('mpirun noticed that process rank 3 with PID 4242 on node node01 '
     'exited on signal 11 (Segmentation fault).', 'Segmentation fault (11)'),
    ('prterun noticed that process rank 0 with PID 0 on node node01 exited '
     'on signal 6 (Aborted).', 'Aborted (6)'),
    ('srun: error: nid001234: task 5: Segmentation fault (core dumped)',
     'Segmentation fault (11)'),
    ('srun: error: nid001234: tasks 0-7: Aborted (core dumped)',
     'Aborted (6)'),
    ('./run.sh: line 12: 861483 Aborted                 (core dumped) '
     './build/all_reduce_perf -b 8 -e 1G -f 2', 'Aborted (6)'),
    ('Segmentation fault (core dumped)', 'Segmentation fault (11)'),
    ('YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Segmentation fault '
     '(signal 11)', 'Segmentation fault (11)'),
    ('[node01:4242:0:4250] Caught signal 11 (Segmentation fault: address '
     'not mapped to object at address 0x8)', 'Segmentation fault (11)'),
    ('free(): corrupted unsorted chunks', 'Aborted (6)'),
    ('double free or corruption (out)', 'Aborted (6)'),
    ('malloc(): corrupted top size', 'Aborted (6)'),
    ("*** Error in `./build/all_reduce_perf': free(): invalid pointer: "
     "0x00007f00deadbeef ***", 'Aborted (6)'),
    ('*** glibc detected *** all_reduce_perf: free(): invalid next size '
     '(fast): 0x00007f9c73913ec0 ***', 'Aborted (6)'),
    ('*** stack smashing detected ***: terminated', 'Aborted (6)'),
]


@pytest.mark.parametrize('line,signal', SIGNAL_LINES)
def test_every_form_of_a_signal_is_read(line, signal):
    assert nccltests.signal_of(line) == signal
    # after a complete healthy table, with exit status 0: still a crash
    text, logs = capture('intra')
    res = nccltests.parse_text(text + line + '\n')
    assert res.signal == signal and res.complete
    v, why = judge_output(res, 0)
    assert v is Verdict.CRASH and signal in why and line[:40] in why


@pytest.mark.parametrize('line,signal', SIGNAL_LINES[::3])
def test_a_signal_after_a_healthy_table_is_a_crash_in_every_door(
        tmp_path, line, signal):
    text, logs = capture('intra')
    got = through_every_door(tmp_path, 'intra', text + line + '\n', logs,
                             rc=0)
    assert set(got.values()) == {'crash'}, got


@pytest.mark.parametrize('line', [
    'the job has been aborted.', 'Primary job  terminated normally, but 1 '
    'process returned', 'comm 0x1 rank 0 nranks 2 - Abort COMPLETE',
    '# Collective test concluded: all_reduce_perf'])
def test_words_that_are_no_signal_are_not_one(line):
    assert nccltests.signal_of(line) is None


def test_a_jobs_stderr_with_the_signal_is_read_with_its_output(tmp_path):
    """The job's stderr beside its output: the signal it names makes the
    run a crash (mpirun's words alone are still not read)."""
    text, logs = capture('intra')
    out = tmp_path / 'stdout.txt'
    out.write_text(text)
    err = tmp_path / 'stderr.txt'
    err.write_text('[vm:26138] *** Process received signal ***\n'
                   '[vm:26138] Signal: Aborted (6)\n'
                   '[vm:26138] Signal code:  (-6)\n')
    doc = X.explain([str(out), str(err), *logs], exit_status=0,
                    transport_asked='intra')
    assert doc['verdict'] == 'crash' and 'Aborted (6)' in doc['reason']
    assert {'path': str(err), 'kind': 'output'} in doc['files']


# -- E: what the paste left out is not a failure ----------------------------

B200_CUT = 'nccl-tests_all_gather_b200-4pod-16rank_rows-truncated-by-author_' \
    'dranet-gke.txt'
MI250X = 'rccl-tests_all_gather_mi250x-4node-32rank_srun-label_no-header_' \
    'rccl-issue-1490.txt'


@pytest.mark.parametrize('status', [0, None])
def test_a_paste_with_only_its_summary_is_not_checked_not_failed(status):
    doc = X.explain([pub(B200_CUT)], exit_status=status)
    assert doc['verdict'] == 'could-not-check' and doc['exit_code'] == 2
    assert 'not in the text' in doc['reason']
    assert 'Avg bus bandwidth : 22.2173' in doc['reason']


def test_every_size_of_the_pasted_command_without_its_summary(tmp_path):
    """ROCm/rccl#1490's table (rank 0's, behind srun's label) with the
    author's own command line above it and its two summary lines left out:
    all 17 sizes of ``-b 64K -e 4G -f 2`` are there."""
    lines = text_of(MI250X).splitlines(keepends=True)
    rows = [ln for ln in lines if 'Out of bounds' not in ln and
            'Avg bus bandwidth' not in ln]
    cmd = (' 0: srun --nodes=4 --ntasks-per-node=8 --cpus-per-task=8 '
           '--threads-per-core=1 --label -- all_gather_perf -b 64K -e 4G '
           '-f 2 -g 1\n')
    path = tmp_path / 'pasted.txt'
    path.write_text(cmd + ''.join(rows))
    res = nccltests.parse_text(path.read_text())
    assert res.command_sizes == (64 << 10, 4 << 30, 2)
    assert res.collective == 'all_gather_perf' and len(res.rows) == 17
    doc = X.explain([str(path)], exit_status=0)
    assert doc['verdict'] == 'could-not-check', doc['reason']
    assert 'every size asked by the command line' in doc['reason']
    assert 'stopped after' not in doc['reason']
    # a row gone as well: the run did not get to its end
    last = max(i for i, ln in enumerate(rows) if ' 4294967296 ' in ln)
    path.write_text(cmd + ''.join(rows[:last] + rows[last + 1:]))
    doc = X.explain([str(path)], exit_status=0)
    assert doc['verdict'] == 'incomplete', doc['reason']


def test_a_cut_table_of_our_own_runs_stays_never_a_pass(tmp_path):
    text, logs = capture('intra')
    rnd = random.Random(43)
    for damaged in (M.drop_closing(text), M.only_header(text),
                    M.drop_row(text, rnd, 'end')):
        got = through_every_door(tmp_path, 'intra', damaged, logs)
        assert len(set(got.values())) == 1 and 'pass' not in got.values(), \
            got


# -- G: no transport claimed without a channel line -------------------------

USING_IB = [
    # "Using network IB", "GPU Direct RDMA Disabled for HCA", 16 ranks asked
    'nccl-debug_using-network-ib_gdr-disabled-hca_no-channels_nccl-issue-'
    '1537.log',
    # NCCL 2.28's "NET/Plugin: Could not find: libnccl-net.so" (its default
    # probe) and "Using network IB"
    'nccl-debug_could-not-find-default-plugin_using-network-ib_no-channels_'
    'nccl-issue-1925.log',
    # NCCL 2.19's default probe, two hosts each "Using network IB"
    'nccl-debug_default-plugin-dlerror_using-network-ib_2host-no-channels_'
    'nccl-tests-issue-185.log',
]


#: the two of them that show NCCL's probe of its default plugin name
DEFAULT_PROBE = USING_IB[1:]


@pytest.mark.parametrize('name,asked', [
    (n, a) for n in USING_IB for a in (None, 'net-plugin', 'net-plugin-gdr',
                                       'net-ib')
    if not (n in DEFAULT_PROBE and a in ('net-plugin', 'net-plugin-gdr'))])
def test_using_network_without_a_channel_proves_nothing(name, asked):
    """Nothing asked for a plugin, or IB asked: "Using network IB" proves
    no transport (where a plugin transport is asked and the default probe
    found none: :func:`test_the_default_probe_is_the_request_where_a_
    plugin_is_asked`)."""
    ev = debuglog.read_evidence([pub(name)])
    assert ev.plugin_asked is None and transport_proof.asked_from_log(ev) is None
    doc = X.explain([pub(name)], transport_asked=asked)
    t = doc['transport']
    assert t['proven'] is None and not t['ok'], t
    assert doc['verdict'] == 'could-not-check' and doc['exit_code'] == 2
    assert 'fell back' not in t['reason'] and 'fallback' not in doc['reason']


@pytest.mark.parametrize('line', [
    'h:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so.',
    'h:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using '
    'internal network plugin.',
    'h:1:1 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), '
    'using internal implementation'])
def test_the_default_plugin_probe_is_no_plugin_asked(tmp_path, line):
    log = tmp_path / 'nccl.log'
    log.write_text(line + '\nh:1:1 [0] NCCL INFO Using network IB\n')
    ev = debuglog.read_evidence([str(log)])
    assert ev.plugin_asked is None and transport_proof.asked_from_log(ev) is None
    # a plugin named by the environment and not found is one: a fallback
    log.write_text('h:1:1 [0] NCCL INFO NET/Plugin: Could not find: '
                   'libnccl-net-ofi.so. Using internal network plugin.\n'
                   'h:1:1 [0] NCCL INFO Using network Socket\n'
                   'h:2:2 [1] NCCL INFO Using network Socket\n')
    ev = debuglog.read_evidence([str(log)])
    assert transport_proof.asked_from_log(ev) == 'net-plugin'
    proof = transport_proof.prove(None, ev)
    assert proof.proven == 'net-socket' and not proof.ok


# -- the default plugin, asked -----------------------------------------------

@pytest.mark.parametrize('name', DEFAULT_PROBE)
@pytest.mark.parametrize('asked', ['net-plugin', 'net-plugin-gdr'])
@pytest.mark.parametrize('status', [0, None])
def test_the_default_probe_is_the_request_where_a_plugin_is_asked(
        name, asked, status):
    """A plugin transport asked (``--transport``, or the site's: Frontier
    installs aws-ofi-rccl as the default ``librccl-net.so``): NCCL's probe
    of the default name found nothing, no plugin was loaded, NCCL named
    IB: a fallback to IB, the not-found line named (was could-not-check:
    "no channel line ... the transport is not proven")."""
    doc = X.explain([pub(name)], transport_asked=asked, exit_status=status)
    t = doc['transport']
    assert t['proven'] == 'net-ib' and not t['ok'], t
    assert doc['verdict'] == 'fallback' and doc['exit_code'] == 1
    assert 'libnccl-net.so' in t['reason'] and 'no plugin was loaded' in \
        t['reason'], t['reason']
    assert '"Using network IB"' in t['reason']
    assert 'FALLBACK' in X.render(doc)


def test_the_default_probe_is_a_fallback_in_every_door(tmp_path):
    """NVIDIA/nccl-tests#185's log (two hosts, the default probe, "Using
    network IB") beside a healthy socket table, the plugin asked: every
    door says fallback; asked for sockets, nothing fell back."""
    text, _ = capture('net-socket')
    log = pub(DEFAULT_PROBE[1])
    got = through_every_door(tmp_path, 'net-plugin', text, [log], rc=0,
                             clean_text=text)
    assert set(got.values()) == {'fallback'}, got
    got = through_every_door(tmp_path, 'net-socket', text, [log], rc=0)
    assert len(set(got.values())) == 1 and 'pass' not in got.values() and \
        'fallback' not in got.values(), got


def _rccl_571_default_probe(host, pid, rank, nranks, net='Socket',
                            loaded=None):
    """The lines RCCL 5.7.1 prints without ``NCCL_NET_PLUGIN`` (src/net.cc
    ncclNetPluginInit: the default ``librccl-net.so``, "NET/Plugin : Plugin
    load (%s) returned %d : %s", "NET/Plugin : No plugin found, using
    internal implementation"; or, found, "NET/Plugin: Loaded net plugin %s
    (v5)"), then src/init.cc's "Using network %s" and its Init COMPLETE
    line, behind NCCL's logger prefix."""
    pre = f'{host}:{pid}:{pid} [0] NCCL INFO '
    name = 'librccl-net.so'
    lines = ([pre + f'NET/Plugin: Loaded net plugin {loaded} (v5)']
             if loaded else
             [pre + f'NET/Plugin : Plugin load ({name}) returned 2 : {name}: '
                    f'cannot open shared object file: No such file or '
                    f'directory',
              pre + 'NET/Plugin : No plugin found, using internal '
                    'implementation'])
    return lines + [pre + f'Using network {net}',
                    pre + f'comm 0x1{rank} rank {rank} nranks {nranks} '
                          f'cudaDev 0 busId c1000 localSize 0 used 0 bytes - '
                          f'Init COMPLETE']


def test_the_default_probe_from_the_rccl_format_strings(tmp_path):
    log = tmp_path / 'rccl.log'
    log.write_text('\n'.join(_rccl_571_default_probe('frontier1', 11, 0, 2) +
                             _rccl_571_default_probe('frontier2', 22, 1, 2))
                   + '\n')
    ev = debuglog.read_evidence([str(log)])
    # nothing asked for a plugin: the probe is no request (class G)
    assert ev.plugin_asked is None and transport_proof.asked_from_log(ev) is None
    assert transport_proof.prove(None, ev, nodes=2).proven is None
    for asked in ('net-plugin', 'net-plugin-gdr'):
        proof = transport_proof.prove(asked, ev, nodes=2)
        assert proof.proven == 'net-socket' and not proof.ok, proof
        assert 'on 2 rank(s)' in proof.reason
        assert 'No plugin found, using internal implementation' in \
            proof.reason and 'no plugin was loaded' in proof.reason
        doc = X.explain([str(log)], transport_asked=asked, exit_status=0)
        assert doc['verdict'] == 'fallback', doc['reason']
    for asked in ('net-socket', 'net-ib', 'intra'):
        proof = transport_proof.prove(asked, ev, nodes=2)
        assert proof.proven is None and 'fell back' not in proof.reason, \
            (asked, proof)
    # the plugin found under the default name (aws-ofi-rccl as
    # librccl-net.so): no fallback, and no channel proves it either
    log.write_text('\n'.join(
        _rccl_571_default_probe('frontier1', 11, 0, 2, net='AWS Libfabric',
                                loaded='AWS Libfabric') +
        _rccl_571_default_probe('frontier2', 22, 1, 2, net='AWS Libfabric',
                                loaded='AWS Libfabric')) + '\n')
    ev = debuglog.read_evidence([str(log)])
    proof = transport_proof.prove('net-plugin', ev, nodes=2)
    assert proof.proven is None and 'fell back' not in proof.reason, proof


@pytest.mark.parametrize('line', [
    # NCCL 2.19 src/net.cc: "NET/Plugin : dlerror=%s No plugin found (%s),
    # using internal implementation"
    'h1:1:1 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open '
    'shared object file: No such file or directory No plugin found '
    '(libnccl-net.so), using internal implementation',
    # NCCL 2.2x src/plugin/plugin_open.cc: "%s/Plugin: Could not find: %s"
    'h1:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using '
    'internal network plugin.'])
def test_the_default_probe_from_the_nccl_format_strings(tmp_path, line):
    log = tmp_path / 'nccl.log'
    log.write_text(line + '\nh1:1:1 [0] NCCL INFO Using network IB\n'
                   'h1:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 '
                   'busId 1000 - Init COMPLETE\n'
                   + line.replace('h1:1:1', 'h2:2:2') +
                   '\nh2:2:2 [0] NCCL INFO Using network IB\n')
    ev = debuglog.read_evidence([str(log)])
    assert transport_proof.asked_from_log(ev) is None
    proof = transport_proof.prove('net-plugin', ev, nodes=2)
    assert proof.proven == 'net-ib' and not proof.ok, proof
    assert line.split('NCCL INFO ')[1][:40] in proof.reason
    assert transport_proof.prove('net-ib', ev, nodes=2).proven is None


# -- extras -------------------------------------------------------------------

@pytest.mark.parametrize('name,version,code', [
    ('rccl-tests_all_reduce_banner-2.17.9_8gpu-1node_aion-perf-notes.txt',
     'rccl-tests 2.17.9-develop:2596ca5f71', 22707),
    ('rccl-tests_banner-2.18.3_header-only_mi50-4gpu_mx-llama-cpp-issue-7.'
     'txt', 'rccl-tests 2.18.3-HEAD:418cd5f', 23004)])
def test_the_rccl_tests_banner_names_rccl_tests_and_its_versions(
        name, version, code):
    doc = X.explain([pub(name)], exit_status=0)
    assert doc['format'] == 'rccl-tests'
    assert doc['versions']['nccl_tests'] == version
    assert doc['versions']['rccl_code'] == code
    assert 'nccl_code' not in doc['versions']


def test_the_rccl_tests_banner_from_its_format_string():
    # rccl-tests src/util.cu: "# rccl-tests version %s rccl-headers=%d
    # rccl-library=%d"; nccl-tests: the same with nccl-
    res = nccltests.parse_text('# rccl-tests version 2.19.0 rccl-headers=23'
                               '100 rccl-library=23101\n')
    assert (res.format, res.tests_version, res.nccl_version) == \
        ('rccl-tests', 'rccl-tests 2.19.0', 23101)
    res = nccltests.parse_text('# nccl-tests version 2.17.6 nccl-headers='
                               '22809 nccl-library=22809\n')
    assert (res.format, res.tests_version, res.nccl_version) == \
        ('nccl-tests', '2.17.6', 22809)


@pytest.mark.parametrize('name,said', [
    ('nccl-debug_ib-no-gdr_gdr-disabled-no-module_2host_nccl-issue-899.log',
     "GPU Direct RDMA Disabled for HCA 1 'mlx5_1' (no module)"),
    ('nccl-debug_using-network-ib_gdr-disabled-hca_no-channels_nccl-issue-'
     '1537.log', "GPU Direct RDMA Disabled for HCA 0 'mlx5_0'"),
    ('nccl-debug_libfabric-v10_efa-no-gdr_g6e-4pod-rank0.log',
     'disabling GDR')])
def test_a_gdr_off_line_is_named_when_gdr_was_asked(name, said):
    doc = X.explain([pub(name)], transport_asked='net-plugin-gdr')
    assert not doc['transport']['ok']
    assert said in doc['transport']['reason'], doc['transport']['reason']
    assert doc['verdict'] != 'pass'


@pytest.mark.parametrize('name', [
    'nccl-tests_with-log_socket-lo_nccl-2.4.8_nccl-issue-352.txt',
    'nccl-tests_broadcast_c0-error-na_2node_ibverbs-warn_nccl-tests-issue-'
    '82.txt'])
def test_an_output_with_nccl_lines_inline_has_a_debug_log(name):
    doc = X.explain([pub(name)], exit_status=0)
    assert 'no NCCL debug log among the files' not in doc['transport'][
        'reason']
    assert 'no channel lines among the NCCL lines of the output' in \
        doc['transport']['reason']
    assert doc['verdict'] != 'pass'


# -- never a false pass -------------------------------------------------------

def test_no_published_file_passes_with_exit_status_zero():
    names = sorted(os.path.basename(p) for p in glob.glob(pub('*'))
                   if not p.endswith('.md'))
    for name in names:
        try:
            doc = X.explain([pub(name)], exit_status=0)
        except Exception as err:          # an unreadable file is exit 2
            assert 'explain' not in str(type(err)), (name, err)
            continue
        assert doc['verdict'] != 'pass', (name, doc['reason'])


# -- C: a rank count never from a cut listing ---------------------------------

SOPERATOR = 'nccl-tests_all_reduce_srun-2node-8tpn_rank-lines-cut_h100_' \
    'soperator-pr-428.txt'


def test_a_cut_listing_takes_its_ranks_from_the_launcher_line():
    """nebius/soperator#428: ``srun --nodes=2 --ntasks-per-node=8 ...
    -g 1`` and rank lines 0..11 only (the window cut them): 16 ranks, the
    nodes and GPUs per node unknown (never "12 ranks", "1 node")."""
    res = nccltests.parse_text(text_of(SOPERATOR))
    assert res.launcher_ranks == 16 and res.collective == 'all_reduce_perf'
    assert res.nranks == 16 and res.rank_lines_partial
    doc = X.explain([pub(SOPERATOR)], exit_status=0)
    assert doc['nranks'] == 16
    assert '? node(s) x ? GPUs' in doc['reference']['key']
    text = X.render(doc)
    assert '16 ranks; hosts shown: worker-1, worker-0 (the rank lines are ' \
        'cut)' in text


@pytest.mark.parametrize('launcher,ranks', [
    ('mpirun -np 16 --map-by ppr:8:node ./build/all_reduce_perf -b 8 -e 8G '
     '-f 2 -g 1', 16),
    ('mpirun -np 2 ./build/all_reduce_perf -b 8 -e 8G -f 2 -g 4', 8),
    ('srun -N 4 --ntasks-per-node 8 all_reduce_perf -b 8 -e 8G -f 2', 32),
    ('srun --ntasks=12 all_reduce_perf -b 8 -e 8G -f 2 -g 1', 12)])
def test_the_launcher_line_names_the_ranks_of_a_cut_listing(launcher,
                                                           ranks):
    # nccl-tests src/util.cu writeDeviceReport's rank line, ranks 0..2 only
    lines = [launcher,
             '# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: '
             '2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 '
             'graph: 0', '#', '# Using devices']
    lines += [f'#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on      node1 '
              f'device {r:2d} [0x{r:02x}] NVIDIA H100 80GB HBM3'
              for r in range(3)]
    res = nccltests.parse_text('\n'.join(lines) + '\n')
    assert res.nranks == ranks and res.rank_lines_partial


def test_a_cut_listing_with_rows_counts_by_the_factor(tmp_path):
    """The Spectrum-X H200 run (16 ranks, one process of 8 GPUs per node)
    with its rank lines cut after rank 4: 16 by the busbw / algbw factor,
    the nodes unknown (was "1 node(s) x 16 GPUs")."""
    name = 'nccl-tests_all_reduce_h200-2node-16rank_485gbps_spectrum-x-' \
        'roce-doc.txt'
    kept = [ln for ln in text_of(name).splitlines(keepends=True)
            if not any(f'Rank {r:2d} ' in ln for r in range(5, 16))]
    path = tmp_path / 'cut.txt'
    path.write_text(''.join(kept))
    doc = X.explain([str(path)], exit_status=0)
    assert doc['nranks'] == 16 and doc['rank_lines_cut']
    assert '? node(s) x ? GPUs' in doc['reference']['key']


# -- F: a plugin that fails after its channels were connected -----------------

POLARIS_LOG = 'nccl-debug_aws-libfabric-cxi_gdrdma_plugin-loaded_polaris-2node.log'

#: aws-ofi-nccl 1.21.1's own format strings (src/nccl_ofi_net.cpp:854,
#: src/nccl_ofi_ofiutils.cpp:273, src/nccl_ofi_api.cpp:268) behind NCCL's
#: logger prefix ("%s:%d:%d [%d] %s:%d NCCL WARN "): the plugin-init class
#: of the WARN table, printed while connecting
PLUGIN_ERRORS = [
    'x3006c0s1b0n0:4138719:4138800 [1] nccl_net_ofi_net.cpp:854 NCCL WARN '
    'NET/OFI Creating new endpoint for domain 0x7f9befa99380 failed',
    "x3006c0s1b0n0:4138719:4138800 [1] nccl_net_ofi_ofiutils.cpp:273 NCCL "
    "WARN NET/OFI Couldn't allocate endpoint. RC: -12, ERROR: Cannot "
    "allocate memory",
]


@pytest.mark.parametrize('line', PLUGIN_ERRORS)
def test_a_plugin_error_after_its_channels_is_a_crash_not_a_fallback(
        tmp_path, line):
    """The Polaris log (2 nodes, 21 channels ``via NET/AWS Libfabric/N/
    GDRDMA``, no socket anywhere) with the plugin's error after them: the
    plugin ran and failed, a crash naming its error (was ``fallback``)."""
    log = tmp_path / 'nccl.log'
    log.write_text(text_of(POLARIS_LOG) + line + '\n')
    doc = X.explain([str(log)], transport_asked='net-plugin-gdr')
    assert doc['transport']['proven'] == 'net-plugin-gdr'
    assert doc['verdict'] == 'crash' and doc['exit_code'] == 1
    assert 'failed after its channels were connected' in doc['reason']
    assert line.split('NCCL WARN ')[1][:40] in doc['reason']
    assert 'fallback' not in doc['reason']


def test_a_plugin_error_after_its_channels_is_a_crash_in_every_door(
        tmp_path):
    text, logs = capture('net-socket')
    log = tmp_path / 'plugin.log'
    log.write_text(text_of(POLARIS_LOG) + PLUGIN_ERRORS[0] + '\n')
    got = through_every_door(tmp_path, 'net-socket', text, [str(log)], rc=0)
    assert 'pass' not in got.values() and 'fallback' not in got.values(), \
        got


@pytest.mark.parametrize('name', [
    'nccl-debug_ofi-init-failed_socket_aws-ofi-nccl-issue-889.log',
    'nccl-debug_ofi-init-failed_mixed-socket_aws-ofi-nccl-issue-715.log'])
def test_a_plugin_that_failed_to_start_is_still_a_fallback(name):
    doc = X.explain([pub(name)])
    assert doc['verdict'] == 'fallback', doc['reason']


# -- B: tables behind a launcher's rank tags ----------------------------------

def _tagged(text, cut_at):
    """``text`` as MPICH / Intel MPI ``-prepend-rank`` print it (``[%d] ``
    before every line of rank 0), the row of ``cut_at`` bytes cut in two by
    rank 1's NCCL line (its own tag first), as two processes' writes
    interleave; and a tag written into the middle of the next row."""
    out = []
    rows = 0
    for line in text.splitlines():
        toks = line.split()
        if toks and toks[0].isdigit() and len(toks) > 8:
            rows += 1
            if int(toks[0]) == cut_at:
                out.append('[0] ' + '  '.join(toks[:5]) + '[1] vm:26139:26139'
                           ' [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via '
                           'P2P/CUMEM/read')
                out.append('[0] ' + '  '.join(toks[5:]))
                continue
            if int(toks[0]) == cut_at * 2:
                out.append('[0] ' + '  '.join(toks[:5]) + '[0]   ' +
                           '  '.join(toks[5:]))
                continue
        out.append('[0] ' + line)
    return '\n'.join(out) + '\n', rows


def test_rows_behind_rank_tags_and_interleaved_lines_are_all_read(tmp_path):
    text, logs = capture('intra')
    plain = nccltests.parse_text(text)
    tagged, rows = _tagged(text, 64 << 20)
    res = nccltests.parse_text(tagged)
    assert len(res.rows) == rows == len(plain.rows)
    assert [(r.size, r.busbw) for r in res.rows] == \
        [(r.size, r.busbw) for r in plain.rows]
    assert res.complete
    path = tmp_path / 'tagged.txt'
    path.write_text(tagged)
    doc = X.explain([str(path)], exit_status=0)
    assert doc['files'][0]['kind'] == 'output' and len(doc['rows']) == rows


def test_a_collapse_behind_rank_tags_is_seen_in_every_door(tmp_path):
    """A busbw that collapses at 64 MiB (a fifth of its value), in a table
    behind rank tags with another process's line written into that row:
    below the reference in every door (was: 0 rows, a debug log only)."""
    text, logs = capture('intra')
    row = next(ln for ln in text.splitlines()
               if ln.split()[:1] == [str(64 << 20)])
    slow = row
    for col in (6, 7, 10, 11):        # algbw, busbw of both halves
        toks = slow.split()
        v = float(toks[col]) / 5
        slow = slow.replace(f' {toks[col]} ', f' {v:.2f} ', 1)
    tagged, _ = _tagged(text.replace(row, slow), 64 << 20)
    got = through_every_door(tmp_path, 'intra', tagged, logs, rc=0)
    # the hook checks its own probe size (1 GiB) only: fine there
    assert got.pop('hook') == 'pass'
    assert set(got.values()) == {'below-reference'}, got


# -- D: several runs in one paste ---------------------------------------------

POLARIS_SOCKET = 'nccl-debug_socket_default-no-plugin_polaris-2node.log'


def test_two_runs_pasted_one_after_the_other_are_not_one_mixed_run(tmp_path):
    """The two real Polaris logs (the same job without the plugin: 8
    processes over NET/Socket, communicator 0x915e...; with it: 4 processes
    over NET/AWS Libfabric/GDRDMA), pasted one after the other: two runs,
    each named with what it shows, never one run whose ranks "used
    different networks" (was ``fallback``)."""
    log = tmp_path / 'pasted.log'
    log.write_text(text_of(POLARIS_SOCKET) + text_of(POLARIS_LOG))
    ev = debuglog.read_evidence([str(log)])
    assert len(ev.runs) == 2
    for asked in (None, 'net-plugin-gdr', 'net-socket'):
        doc = X.explain([str(log)], transport_asked=asked)
        t = doc['transport']
        assert t['proven'] is None and not t['ok'], t
        assert 'the log holds 2 separate runs' in t['reason']
        assert 'NET/Socket x24' in t['reason'] and \
            'NET/AWS Libfabric/GDRDMA x21' in t['reason']
        assert 'different networks' not in t['reason']
        assert doc['verdict'] == 'could-not-check', doc['reason']
    # each alone is what it was
    for name, proven in ((POLARIS_SOCKET, 'net-socket'),
                         (POLARIS_LOG, 'net-plugin-gdr')):
        assert debuglog.read_evidence([pub(name)]).runs == []
        assert X.explain([pub(name)])['transport']['proven'] == proven


def test_communicators_joined_by_a_rank_are_one_run(tmp_path):
    """NCCL's init line ("comm %p rank %d nranks %d ... commId 0x%llx -
    Init COMPLETE", src/init.cc): a world communicator and its
    sub-communicators share ranks: one run; two that share none: two."""
    def init(host, pid, rank, n, comm):
        return (f'{host}:{pid}:{pid} [0] NCCL INFO comm 0x1 rank {rank} '
                f'nranks {n} cudaDev 0 nvmlDev 0 busId 1000 commId {comm} '
                f'- Init COMPLETE\n')

    def chan(host, pid, net):
        return (f'{host}:{pid}:{pid + 1} [0] NCCL INFO Channel 00/0 : 0[0] '
                f'-> 1[0] [send] via NET/{net}/0\n')
    log = tmp_path / 'one.log'
    log.write_text(init('a', 1, 0, 2, '0xaa') + init('b', 2, 1, 2, '0xaa') +
                   init('a', 1, 0, 1, '0xbb') + init('b', 2, 0, 1, '0xcc') +
                   chan('a', 1, 'IB') + chan('b', 2, 'IB'))
    assert debuglog.read_evidence([str(log)]).runs == []
    log.write_text(init('a', 1, 0, 2, '0xaa') + init('b', 2, 1, 2, '0xaa') +
                   init('c', 3, 0, 2, '0xdd') + init('d', 4, 1, 2, '0xdd') +
                   chan('a', 1, 'IB') + chan('b', 2, 'IB') +
                   chan('c', 3, 'Socket') + chan('d', 4, 'Socket'))
    ev = debuglog.read_evidence([str(log)])
    assert sorted(map(sorted, ev.runs)) == [['a:1', 'b:2'], ['c:3', 'd:4']]
    proof = transport_proof.prove('net-ib', ev, nodes=2)
    assert proof.proven is None and 'separate runs' in proof.reason


def _via_counts(text):
    """The oracle of a run's channels: its ``via`` paths counted by grep
    (every occurrence, merged lines too), by kind: ``NET/<net>[/GDRDMA]``,
    ``P2P/<kind>``."""
    got = {}
    for net, gdr in re.findall(r' via NET/([^/\n]+)/\d+(/GDRDMA)?', text):
        key = f'NET/{net}{gdr}'
        got[key] = got.get(key, 0) + 1
    for kind in re.findall(r' via P2P/(\w+)', text):
        got[f'P2P/{kind}'] = got.get(f'P2P/{kind}', 0) + 1
    return got


def test_each_runs_line_names_the_channels_of_its_own_lines(tmp_path):
    """The two real Polaris logs pasted one after the other (the second
    with a line two hosts wrote at once: ``x3006c0s19b1x3006c0s1b0n0``):
    what the reason says each run shows is read from that run's own
    lines, the lines its proof is made from: the channels counted by grep
    in its file alone (the oracle), nothing of the other run's."""
    log = tmp_path / 'pasted.log'
    log.write_text(text_of(POLARIS_SOCKET) + text_of(POLARIS_LOG))
    reason = X.explain([str(log)])['transport']['reason']
    said = re.findall(r'run (\d) on [^(]*\(\d+ process\(es\)\): (.*?), '
                      r'(?:proven|not proven|net-)', reason)
    assert [n for n, _ in said] == ['1', '2'], reason
    for (_, line), name in zip(said, (POLARIS_SOCKET, POLARIS_LOG)):
        want = _via_counts(text_of(name))
        assert want, name
        assert line == ', '.join(f'{k} x{n}' for k, n in sorted(
            want.items())), (line, want)


def _bare(text):
    """``text`` (NCCL's message) as a user pastes it without the logger's
    ``host:pid:tid [dev]`` prefix: ``NCCL INFO <message>``."""
    return f'NCCL INFO {text}\n'


@pytest.mark.parametrize('table_of', [None, 'A'])
def test_a_run_pasted_without_the_logger_prefix_is_its_own(tmp_path,
                                                            table_of):
    """One file: run A behind NCCL's logger prefix (src/debug.cc "%s:%d:%d
    [%d] NCCL INFO "), then run B of another communicator as pasted
    without it ("NCCL INFO ncclCommInitRank comm %p rank %d nranks %d ...
    commId 0x%llx - Init COMPLETE", "Channel %02d/%d : %d[%d] -> %d[%d]
    [send] via NET/%s/%d").  NCCL prints the prefix on every line it logs,
    so B's lines are the file's own, not the process whose line came
    before them: each run is read from its own lines and proven as its
    part given alone (the oracle), and the explanation is made (was a
    RecursionError: run A's part held run B's communicator, so it was two
    runs again, without end)."""
    a = _two_node_run(*RUN_A, 'IB', '0xaa')
    b = (_bare('ncclCommInitRank comm 0x55d1 rank 0 nranks 2 cudaDev 0 '
               'nvmlDev 0 busId 1000 commId 0xbb - Init COMPLETE') +
         ''.join(_bare(f'Channel {c:02d}/0 : 0[0] -> 1[0] [send] via '
                       f'NET/Socket/0') for c in (0, 1, 2)))
    log = tmp_path / 'pasted.log'
    log.write_text(a + b)
    paths = [str(log)]
    if table_of:
        out = tmp_path / 'all_reduce.out'
        out.write_text(_table(*RUN_A))
        paths.insert(0, str(out))
    doc = X.explain(paths, transport_asked='net-ib', exit_status=0)
    runs = doc['runs']
    assert [r['processes'] for r in runs] == [['a:1000', 'b:1001'],
                                              [str(log)]]
    for run, part in zip(runs, (a, b)):
        alone = tmp_path / f'alone-{run["run"]}.log'
        alone.write_text(part)
        assert run['transport'] == _proof_alone([str(alone)], 'net-ib')
    t = doc['transport']
    assert 'NET/IB x8, proven net-ib' in t['reason']
    assert 'NET/Socket x3, net-socket, not net-ib as asked' in t['reason']
    if table_of:
        assert (t['proven'], t['ok']) == ('net-ib', True), t
    else:
        assert t['proven'] is None and doc['verdict'] == 'could-not-check'


#: issue 147: eight processes of one node writing at once (NCCL 2.3):
#: "learnfair062:40515:40655 [6] NCCL INFO learnfair062:40517:40631 [7] NCCL
#: INFO Ring 04 : 7[7] -> 3[3] via P2P/IPC", process 40515's own ring on a
#: line of its own after
RING_147 = 'nccl-debug_merged-lines_ring-p2p_1node_nccl-issue-147.log'


def test_a_line_another_process_wrote_into_is_each_ones():
    """A launcher forwards each process's output in pieces that need not
    end with a line: what follows a logger prefix is the output of the
    process it names, also inside another's line.  Issue 147 (rank i on
    GPU i): each process's channel lines name its own rank alone (the
    oracle: the device of its prefix; was two ranks for processes 40505
    and 40515).  Polaris ("... [1] NCCL INFO Channx3006c0s19b1n0:4138721:
    4138721 [3] NCCL INFO cudaDriverVersion 12020"): the processes that
    print NCCL's driver line are those whose prefix is before one (the
    oracle: grep; was 1612791 for 1612793's)."""
    ev = debuglog.read_evidence([pub(RING_147)])
    devs = dict(re.findall(r'^learnfair062:(\d+):\d+ \[(\d)\]',
                           text_of(RING_147), re.M))
    assert len(devs) == 8
    for key, rank in ev.ranks.items():
        assert rank.ids == {int(devs[str(rank.pid)])}, (key, rank.ids)
    ev = debuglog.read_evidence([pub(POLARIS_LOG)])
    want = set(map(int, re.findall(r':(\d+):\d+ \[\d+\] NCCL INFO '
                                   r'cudaDriverVersion \d+',
                                   text_of(POLARIS_LOG))))
    assert len(want) == 5
    assert {r.pid for r in ev.ranks.values()
            if 'cuda_driver' in r.versions} == want


def test_a_channel_line_forwarded_into_another_runs_line_is_its_own(
        tmp_path):
    """Two runs in one paste (run A over NET/IB, run B over NET/Socket,
    NCCL's format strings), a launcher's forwarding cut one of A's channel
    lines after "Chann", B's whole channel line glued there and A's rest
    ("el 00/0 : ...") on a line of its own: B's line is B's, and each run
    is proven as its lines alone prove it (the oracle: A without its cut
    line, which no prefix names any more; was net-socket for run A, B's
    channel counted as A's).  B's processes have logged before: text glued
    before a host name is cut off where the host is known."""
    a = _two_node_run(*RUN_A, 'IB', '0xaa').splitlines(keepends=True)
    b = _two_node_run(*RUN_B, 'Socket', '0xbb').splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(a) if ' via NET/IB/' in ln)
    head, rest = a[cut].split('Chann', 1)
    glued = next(i for i, ln in enumerate(b) if ' via NET/Socket/' in ln)
    log = tmp_path / 'pasted.log'
    log.write_text(''.join(a[:cut] + b[:glued]) + head + 'Chann' +
                   b[glued] + rest + ''.join(a[cut + 1:] +
                                                    b[glued + 1:]))
    doc = X.explain([str(log)], transport_asked='net-ib')
    runs = doc['runs']
    assert [r['processes'] for r in runs] == [['a:1000', 'b:1001'],
                                              ['c:2000', 'd:2001']]
    for run, part in zip(runs, (a[:cut] + a[cut + 1:], b)):
        alone = tmp_path / f'alone-{run["run"]}.log'
        alone.write_text(''.join(part))
        assert run['transport'] == _proof_alone([str(alone)], 'net-ib')
    reason = doc['transport']['reason']
    assert 'NET/IB x7, proven net-ib' in reason, reason
    assert 'NET/Socket x8, net-socket, not net-ib as asked' in reason


def _proof_alone(paths, asked):
    """The oracle: explain's transport of ``paths`` given alone."""
    t = X.explain(paths, transport_asked=asked)['transport']
    return {k: t[k] for k in ('asked', 'proven', 'ok', 'reason')}


@pytest.mark.parametrize('asked', [None, 'net-plugin-gdr', 'net-socket'])
def test_each_run_of_a_paste_is_proven_as_its_file_alone(tmp_path, asked):
    """The two real Polaris logs pasted one after the other: explain names
    each run (its processes, NCCL's rank count) and proves it exactly as
    explain proves its file alone (the oracle), asked or not."""
    log = tmp_path / 'pasted.log'
    log.write_text(text_of(POLARIS_SOCKET) + text_of(POLARIS_LOG))
    doc = X.explain([str(log)], transport_asked=asked)
    runs = doc['runs']
    assert [r['run'] for r in runs] == [1, 2]
    for run, name in zip(runs, (POLARIS_SOCKET, POLARIS_LOG)):
        alone = debuglog.read_evidence([pub(name)])
        assert run['processes'] == sorted(alone.ranks), run
        assert run['hosts'] == alone.hosts
        assert run['nranks'] == alone.nranks_seen == 8
        assert run['table'] is False        # no table: no run is the output
        assert run['transport'] == _proof_alone([pub(name)], asked), name
    assert doc['transport']['proven'] is None
    assert 'no nccl-tests / rccl-tests table among the files' in \
        doc['transport']['reason']
    shown = X.render(doc)
    assert 'run 1 ' in shown and 'run 2 ' in shown


def _init(host, pid, rank, n, comm):
    """src/init.cc: "comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId
    %lx commId 0x%llx - Init COMPLETE" behind NCCL's logger prefix."""
    return nccl_info(host, pid, pid, 0,
                     f'ncclCommInitRankConfig comm 0x55d1 rank {rank} '
                     f'nranks {n} cudaDev 0 nvmlDev 0 busId 1000 commId '
                     f'{comm} - Init COMPLETE') + '\n'


def _channels(host, pid, me, peer, net):
    """src/transport/net.cc: "Channel %02d/%d : %d[%d] -> %d[%d] [send]
    via NET/%s/%d%s" and its [receive] twin, two channels."""
    out = ''
    for c in (0, 1):
        out += nccl_info(host, pid, pid + 7, 0,
                         f'Channel {c:02d}/0 : {me}[0] -> {peer}[0] [send] '
                         f'via NET/{net}/0') + '\n'
        out += nccl_info(host, pid, pid + 7, 0,
                         f'Channel {c:02d}/0 : {peer}[0] -> {me}[0] '
                         f'[receive] via NET/{net}/0') + '\n'
    return out


def _two_node_run(hosts, pids, net, comm, subs=False):
    """One 2-rank run on ``hosts`` x ``pids`` over ``net``; ``subs``: each
    rank also in a communicator of its own (ncclCommSplit's children:
    the same processes, so still one run)."""
    text = ''
    for rank, (h, p) in enumerate(zip(hosts, pids)):
        text += _init(h, p, rank, 2, comm)
        if subs:
            text += _init(h, p, 0, 1, f'{comm}{rank + 1}')
    for rank, (h, p) in enumerate(zip(hosts, pids)):
        text += _channels(h, p, rank, 1 - rank, net)
    return text


def _table(hosts, pids=None):
    """nccl-tests' output of a 2-rank all_reduce on ``hosts``: its rank
    lines name ``pids`` ("Pid %6d"; None: an nccl-tests that prints no
    Pid)."""
    head = util_cu_head(1 << 20, 1 << 22, ranks=[(0, hosts[0], 0),
                                                 (1, hosts[1], 0)])
    for rank, pid in enumerate(pids or [None, None]):
        old = 'Pid %6d' % (1000 + rank)
        head = head.replace(old, 'Pid %6d' % pid if pid else '', 1)
    return head + ''.join(sweep(1 << 20, 1 << 22)) + util_cu_summary(10.0)


#: run A on hosts a, b (pids 1000, 1001: util_cu_head's), run B on c, d
RUN_A = (('a', 'b'), (1000, 1001))
RUN_B = (('c', 'd'), (2000, 2001))


@pytest.mark.parametrize('subs', [False, True])
@pytest.mark.parametrize('table_of', ['A', 'B'])
def test_the_run_of_the_table_is_judged_on_its_own(tmp_path, table_of,
                                                    subs):
    """Two runs in one log built from NCCL's format strings (run A over
    NET/IB, with or without sub-communicators; run B over NET/Socket), and
    nccl-tests' output whose rank lines name one run's pids: the paste's
    transport is that run's, proven as explain proves it beside that
    run's log alone (the oracle); the other run is named apart."""
    a = _two_node_run(*RUN_A, 'IB', '0xaa', subs=subs)
    b = _two_node_run(*RUN_B, 'Socket', '0xbb')
    log = tmp_path / 'nccl.log'
    log.write_text(a + b)
    hosts, pids = RUN_A if table_of == 'A' else RUN_B
    out = tmp_path / 'all_reduce.out'
    out.write_text(_table(hosts, pids))
    doc = X.explain([str(out), str(log)], transport_asked='net-ib',
                    exit_status=0)
    alone = tmp_path / 'alone.log'
    alone.write_text(a if table_of == 'A' else b)
    oracle = X.explain([str(out), str(alone)], transport_asked='net-ib',
                       exit_status=0)
    t, want = doc['transport'], oracle['transport']
    assert (t['proven'], t['ok']) == (want['proven'], want['ok']) == \
        (('net-ib', True) if table_of == 'A' else ('net-socket', False))
    assert t['reason'].startswith(want['reason'])
    assert 'the log holds 2 separate runs' in t['reason']
    assert doc['verdict'] == oracle['verdict']
    runs = doc['runs']
    assert [r['processes'] for r in runs] == [['a:1000', 'b:1001'],
                                              ['c:2000', 'd:2001']]
    assert [r['table'] for r in runs] == [table_of == 'A', table_of == 'B']
    assert [r['nranks'] for r in runs] == [2, 2]
    assert [r['transport']['proven'] for r in runs] == ['net-ib',
                                                        'net-socket']


@pytest.mark.parametrize('nets', [('IB', 'Socket'), ('IB', 'IB')])
def test_a_table_that_names_no_run_is_never_a_pass(tmp_path, nets):
    """Two runs (of different networks, or both over NET/IB) and an
    nccl-tests that prints no Pid on hosts of neither run: nothing tells
    which run the table is, so the transport is not proven (never a pass
    from a mix, also where both runs show the same network); each run is
    still proven on its own."""
    log = tmp_path / 'nccl.log'
    log.write_text(_two_node_run(*RUN_A, nets[0], '0xaa') +
                   _two_node_run(*RUN_B, nets[1], '0xbb'))
    out = tmp_path / 'all_reduce.out'
    out.write_text(_table(('e', 'f')))
    doc = X.explain([str(out), str(log)], transport_asked='net-ib',
                    exit_status=0)
    t = doc['transport']
    assert t['proven'] is None and not t['ok'], t
    assert 'nothing tells which run the output\'s table belongs to' in \
        t['reason']
    assert 'NET/IB x8' in t['reason']
    assert doc['verdict'] == 'could-not-check', doc['reason']
    assert [r['transport']['ok'] for r in doc['runs']] == \
        [True, nets[1] == 'IB']


def test_the_run_whose_lines_are_in_the_output_is_the_tables(tmp_path):
    """An output with its run's NCCL lines inline (no Pid on its rank
    lines) beside the log of another run: the output's own lines tell its
    run."""
    out = tmp_path / 'all_reduce.out'
    out.write_text(_two_node_run(*RUN_A, 'IB', '0xaa') +
                   _table(RUN_A[0]))
    log = tmp_path / 'other.log'
    log.write_text(_two_node_run(*RUN_B, 'Socket', '0xbb'))
    doc = X.explain([str(out), str(log)], transport_asked='net-ib',
                    exit_status=0)
    assert doc['transport']['proven'] == 'net-ib' and \
        doc['transport']['ok'], doc['transport']
    told = {tuple(r['processes']): r['table'] for r in doc['runs']}
    assert told == {('a:1000', 'b:1001'): True, ('c:2000', 'd:2001'): False}


@pytest.mark.parametrize('mine,other', [('net-socket', 'intra'),
                                         ('intra', 'net-socket')])
def test_every_door_judges_the_run_of_the_table(tmp_path, mine, other):
    """The real 2x H200 captures: one run's output and logs beside the
    logs of the other run (another communicator, other pids, another
    transport): every door (the hook's too, for the intra-node one) judges
    the output's run as it judges it alone (the oracle); with the Pid cut
    from its rank lines, no door can tell the run and none passes."""
    text, logs = capture(mine)
    _, others = capture(other)
    alone = through_every_door(tmp_path, mine, text, logs, rc=0)
    got = through_every_door(tmp_path, mine, text, logs + others, rc=0)
    assert got == alone and set(got.values()) == {'pass'}, (got, alone)
    cut = re.sub(r'Pid\s+\d+ ', '', text)
    assert cut != text
    got = through_every_door(tmp_path, mine, cut, logs + others,
                             rc=0, clean_text=text)
    assert set(got.values()) == {'could-not-check'}, got


# -- A: a plugin named by the environment, not found, then "Using network" ----

#: LUMI (HPE Slingshot, MI250X), RCCL 2.20.5: "Plugin name set by env to
#: librccl-net-ofi.so", its "No plugin found (librccl-net-ofi.so), using
#: internal implementation", "Using network Socket" and no channel line
#: (one rank: "rank 0 nranks 1 ... Init START", the author's "..." after)
LUMI = 'rccl-debug_plugin-ofi-named-not-found_using-network-socket_no-' \
    'channels_lumi-rccl-tests-readme.log'


@pytest.mark.parametrize('status', [0, None])
@pytest.mark.parametrize('asked', [None, 'net-plugin', 'net-plugin-gdr'])
def test_a_named_plugin_not_found_then_sockets_is_a_fallback(status, asked):
    """Class A: the plugin the environment names was not found and RCCL
    named its own network instead: a fallback to that network (was
    could-not-check: "no channel line ... the transport is not proven")."""
    doc = X.explain([pub(LUMI)], transport_asked=asked, exit_status=status)
    t = doc['transport']
    assert t['proven'] == 'net-socket' and not t['ok'], t
    assert doc['verdict'] == 'fallback' and doc['exit_code'] == 1
    assert 'No plugin found (librccl-net-ofi.so)' in t['reason']
    assert '"Using network Socket"' in t['reason']
    assert 'FALLBACK' in X.render(doc)


@pytest.mark.parametrize('asked', ['net-socket', 'intra'])
def test_a_named_plugin_not_found_is_no_fallback_where_none_was_needed(
        asked):
    # asked for sockets, or a one-rank run asked for the node's own links:
    # nothing fell back, and no channel line proves anything
    doc = X.explain([pub(LUMI)], transport_asked=asked)
    assert doc['transport']['proven'] is None
    assert doc['verdict'] == 'could-not-check', doc['reason']


def test_a_named_plugin_not_found_is_a_fallback_in_every_door(tmp_path):
    """The LUMI log beside a healthy socket table, the plugin asked: every
    door says fallback; asked for sockets, every door agrees it cannot
    check (the log's process is not the output's)."""
    text, _ = capture('net-socket')
    got = through_every_door(tmp_path, 'net-plugin', text, [pub(LUMI)],
                             rc=0, clean_text=text)
    assert set(got.values()) == {'fallback'}, got
    got = through_every_door(tmp_path, 'net-socket', text, [pub(LUMI)],
                             rc=0)
    assert len(set(got.values())) == 1 and 'pass' not in got.values(), got


def _rccl_571_plugin_not_found(host, pid, rank, nranks, plugin='ofi'):
    """The lines RCCL 5.7.1 prints for ``NCCL_NET_PLUGIN=<plugin>`` not
    found (src/net.cc ncclNetPluginInit: "Plugin name set by env to %s",
    "NET/Plugin : Plugin load (%s) returned %d : %s", "NET/Plugin : No
    plugin found, using internal implementation"), then src/init.cc's
    "Using network %s" and its "comm %p rank %d nranks %d cudaDev %d busId
    %lx localSize %zi used %ld bytes - Init COMPLETE", behind NCCL's
    logger prefix "%s:%d:%d [%d] NCCL INFO "."""
    name = f'librccl-net-{plugin}.so'
    pre = f'{host}:{pid}:{pid} [0] NCCL INFO '
    return [pre + f'Plugin name set by env to {name}',
            pre + f'NET/Plugin : Plugin load ({name}) returned 2 : {name}: '
                  f'cannot open shared object file: No such file or '
                  f'directory',
            pre + 'NET/Plugin : No plugin found, using internal '
                  'implementation',
            pre + 'Using network Socket',
            pre + f'comm 0x1{rank} rank {rank} nranks {nranks} cudaDev 0 '
                  f'busId c1000 localSize 0 used 0 bytes - Init COMPLETE']


def test_a_fallback_from_the_rccl_format_strings(tmp_path):
    log = tmp_path / 'rccl.log'
    log.write_text('\n'.join(_rccl_571_plugin_not_found('nid001', 11, 0, 2) +
                             _rccl_571_plugin_not_found('nid002', 22, 1, 2))
                   + '\n')
    ev = debuglog.read_evidence([str(log)])
    assert transport_proof.asked_from_log(ev) == 'net-plugin'
    proof = transport_proof.prove(None, ev, nodes=2)
    assert proof.proven == 'net-socket' and not proof.ok, proof
    assert 'on 2 rank(s)' in proof.reason
    assert 'No plugin found, using internal implementation' in proof.reason
    doc = X.explain([str(log)], exit_status=0)
    assert doc['verdict'] == 'fallback', doc['reason']
    # the plugin found after all (its channels connected): no fallback
    log.write_text('\n'.join(
        ln for ln in _rccl_571_plugin_not_found('nid001', 11, 0, 2)
        if 'Plugin' not in ln) + '\nnid001:11:11 [0] NCCL INFO Channel 00 '
        ': 1[c1000] -> 0[c1000] [receive] via NET/Socket/1\n')
    assert X.explain([str(log)])['verdict'] != 'fallback'


# -- B: tables behind a launcher's tag on every write -------------------------

#: NVIDIA/nccl#1453 ("Poor NCCL allreduce performance", 2 x 8 H100 with
#: HPC-X's IBext plugin): rank 0's rows, a "[0]" before every write of
#: nccl-tests' row (its size part and each of its two timing parts), and
#: the collapse from 29.50 GB/s at 32 MiB to 5.27 at 64 MiB
TAGGED_ROWS = 'nccl-tests_all_reduce_rows-behind-bracket-tags_collapse-at-' \
    '64m_h100_nccl-issue-1453.txt'
#: the same thread, turn 2: rank lines 1..14 behind "[0] " on two hosts
TAGGED_RANKS = 'nccl-tests_rank-lines-behind-bracket-tags_2node-h100_nccl-' \
    'issue-1453.txt'

#: the busbw of the paste, in-place and out-of-place, size by size (read by
#: eye from the issue's text: the independent oracle)
ISSUE_1453_BUSBW = [
    (1 << 20, 1.24, 0.87), (2 << 20, 1.73, 9.65), (4 << 20, 12.91, 12.85),
    (8 << 20, 16.20, 16.31), (16 << 20, 24.09, 24.06),
    (32 << 20, 29.50, 28.14), (64 << 20, 5.27, 5.27),
    (128 << 20, 5.22, 5.30), (256 << 20, 4.09, 4.23),
    (512 << 20, 5.31, 5.33)]


@pytest.mark.parametrize('status', [0, None])
def test_rows_behind_tags_on_every_write_are_read_as_rows(status):
    """Class B on the real paste: every row read, its two halves apart
    (was: a debug log only, 0 rows); never a pass."""
    res = nccltests.parse_text(text_of(TAGGED_ROWS))
    got = [(r.size, r.out_of_place.busbw, r.in_place.busbw)
           for r in res.rows]
    assert got == ISSUE_1453_BUSBW
    doc = X.explain([pub(TAGGED_ROWS)], exit_status=status)
    assert doc['files'] == [{'path': pub(TAGGED_ROWS), 'kind': 'output'}]
    assert [r['size'] for r in doc['rows']] == [s for s, _, _ in
                                                ISSUE_1453_BUSBW]
    assert doc['verdict'] != 'pass'


def test_the_collapse_behind_tags_is_below_its_reference(tmp_path):
    """With a reference at the paste's own 32 MiB level (29.5 GB/s, the
    healthy part of the same run) for 32 MiB and above, every size from
    64 MiB is below it and 32 MiB is not, and the verdict's words say so."""
    ref = tmp_path / 'ref.yaml'
    ref.write_text(
        'system: h100\npartitions:\n  gpu:\n    entries:\n'
        '    - transport: net-plugin-gdr\n      collective: all_reduce\n'
        '      nodes: 2\n      gpus_per_node: 8\n      tolerance: 0.2\n'
        '      source: the healthy 32 MiB row of NVIDIA/nccl#1453\n'
        '      busbw: {32MiB: 29.5, 64MiB: 29.5, 128MiB: 29.5, '
        '256MiB: 29.5, 512MiB: 29.5}\n')
    doc = X.explain([pub(TAGGED_ROWS)], reference_file=str(ref),
                    transport_asked='net-plugin-gdr', collective='all_reduce',
                    nodes=2, gpus_per_node=8, exit_status=0)
    below = {r['size'] for r in doc['rows'] if r['below']}
    assert below == {64 << 20, 128 << 20, 256 << 20, 512 << 20}, doc['rows']
    # the window shows neither the header nor the summary: incomplete, and
    # the collapse it shows is said with it
    assert doc['verdict'] == 'incomplete', doc['reason']
    assert 'the sizes it shows: below-reference: 64MiB 5.27 vs 29.50' in \
        doc['reason']


def test_rows_behind_tags_agree_in_every_door(tmp_path):
    got = through_every_door(tmp_path, 'net-socket', text_of(TAGGED_ROWS),
                             [], rc=0)
    assert len(set(got.values())) == 1 and 'pass' not in got.values(), got


def test_rank_lines_behind_tags_are_read_as_a_cut_listing():
    res = nccltests.parse_text(text_of(TAGGED_RANKS))
    assert res.rank_lines_partial and res.nranks is None
    assert res.hosts == ['h100clust-worker-1', 'h100clust-worker-32']
    for status in (0, None):
        doc = X.explain([pub(TAGGED_RANKS)], exit_status=status)
        assert doc['files'][0]['kind'] == 'output' and doc['nranks'] is None
        assert doc['verdict'] != 'pass'


@pytest.mark.parametrize('tag', ['[0] ', '[12] '])
def test_rows_from_the_util_cu_format_behind_a_tag_on_every_write(tag):
    sizes = [(1 << 20) << i for i in range(10)]
    text = ''.join(util_cu_row(s, s // 4, [('%.1f' % (s / 1e4), 1.0, bw),
                                           ('%.1f' % (s / 1e4), 1.0, bw)],
                               tag)
                   for s, bw in zip(sizes, [29.5] * 6 + [5.3] * 4))
    res = nccltests.parse_text(text)
    assert [(r.size, r.busbw) for r in res.rows] == \
        list(zip(sizes, [29.5] * 6 + [5.3] * 4))


# -- F: the real paste of a plugin failing after its channels ----------------

#: gnosia93/training-on-eks: rank 0 of a 4-pod EFA job, 4 channels "via
#: NET/Libfabric/0/GDRDMA", then aws-ofi-nccl's "NET/OFI Request ...
#: completed with error. RC: 103. Error: 4126 (Unresponsive receiver ...)"
#: and PyTorch's "remote process exited or there was a network error"
EFA_FAILED = 'nccl-debug_ofi-gdrdma_request-completed-with-error_remote-' \
    'exited_efa-rank0.log'


@pytest.mark.parametrize('status', [0, None])
@pytest.mark.parametrize('asked', [None, 'net-plugin-gdr'])
def test_a_real_plugin_error_after_its_channels_is_a_crash(status, asked):
    doc = X.explain([pub(EFA_FAILED)], transport_asked=asked,
                    exit_status=status)
    assert doc['transport']['proven'] == 'net-plugin-gdr'
    assert doc['verdict'] == 'crash' and doc['exit_code'] == 1
    assert 'NET/OFI Request' in doc['reason'] and \
        'Unresponsive receiver' in doc['reason']
    assert 'fallback' not in doc['reason']


def test_a_real_plugin_error_after_its_channels_in_every_door(tmp_path):
    text, _ = capture('net-socket')
    got = through_every_door(tmp_path, 'net-socket', text, [pub(EFA_FAILED)],
                             rc=0)
    assert len(set(got.values())) == 1, got
    assert 'pass' not in got.values() and 'fallback' not in got.values(), got


#: aws-ofi-nccl 1.21.1's completion errors (NCCL_OFI_WARN: "NET/OFI " fmt,
#: behind NCCL's "%s:%d:%d [%d] %s:%d NCCL WARN " with the plugin's
#: __PRETTY_FUNCTION__): include/nccl_ofi_platform.h:125,
#: src/nccl_ofi_rdma.cpp:1342 and :1463
OFI_COMPLETION_ERRORS = [
    'x3006c0s1b0n0:4138719:4138800 [1] int nccl_net_ofi_rdma_context::'
    'handle_error_entry(fid_cq*, fi_cq_err_entry*, uint16_t):125 NCCL WARN '
    'NET/OFI Request 0x7f9bef001200 (send) completed with error: err: 5, '
    'flags: 0, prov_errno: 4126, strerror: Unresponsive receiver, len: 0',
    'x3006c0s1b0n0:4138719:4138800 [1] int nccl_net_ofi_rdma_ep_t::'
    'process_pending_reqs():1342 NCCL WARN NET/OFI Fatal: rx buffer recv '
    'completed with error',
    'x3006c0s1b0n0:4138719:4138800 [1] int rdma_process_error_entry('
    'fi_cq_err_entry*, fid_cq*, uint16_t):1463 NCCL WARN NET/OFI Remote '
    'write completed with error. RC: 5. Flags: 8. Error: 15 (Remote access '
    'error). Completed length: 0',
]


@pytest.mark.parametrize('line', OFI_COMPLETION_ERRORS)
def test_a_completion_error_after_the_plugins_channels_is_a_crash(
        tmp_path, line):
    log = tmp_path / 'nccl.log'
    log.write_text(text_of(POLARIS_LOG) + line + '\n')
    doc = X.explain([str(log)], transport_asked='net-plugin-gdr',
                    exit_status=0)
    assert doc['transport']['proven'] == 'net-plugin-gdr'
    assert doc['verdict'] == 'crash', doc['reason']
    assert line.split('NCCL WARN ')[1][:40] in doc['reason']
    assert 'fallback' not in doc['reason']


# -- F: a second real paste: HPC-X's IB plugin failing after its channels ----

#: NVIDIA/nccl#1814 (newfarmer): turn 1's window of channel lines, 13
#: connections ``via NET/IBext_v8/N`` (HPC-X's nccl-rdma-sharp plugin) of
#: processes 980, 981 and 984 on ``hostname-test`` (ranks 32, 33, 36 of 64)
IBEXT_CHANNELS = 'nccl-debug_ibext-v8-channels_64rank-pid984_nccl-issue-1814.log'
#: the description's log of the same process 984: the plugin's
#: ``ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer ... with
#: status=12 ... vendor err 129`` (retry exceeded), then status=5 / 249
IBEXT_ERRORS = 'nccl-debug_ib-plugin-completion-errors_pid984_nccl-issue-' \
    '1814.log'


@pytest.mark.parametrize('status', [0, None])
@pytest.mark.parametrize('asked', [None, 'net-plugin'])
def test_the_ib_plugins_completion_error_after_its_channels_is_a_crash(
        status, asked):
    """Class F, second real paste: the IB plugin's channels connected, then
    its completion errors in the same process: a crash naming the
    plugin's error, never a fallback."""
    files = [pub(IBEXT_CHANNELS), pub(IBEXT_ERRORS)]
    doc = X.explain(files, transport_asked=asked, exit_status=status)
    assert doc['transport']['proven'] == 'net-plugin', doc['transport']
    assert doc['verdict'] == 'crash' and doc['exit_code'] == 1
    assert 'NET/IB : Got completion from peer 172.36.143.59<44206> with ' \
        'status=12' in doc['reason']
    assert 'fallback' not in doc['reason']
    # the channels alone: the plugin proven, nothing failed in sight
    alone = X.explain([pub(IBEXT_CHANNELS)], exit_status=status)
    assert alone['transport']['proven'] == 'net-plugin'
    assert alone['verdict'] == 'could-not-check', alone['reason']


def test_the_ib_plugins_completion_error_in_every_door(tmp_path):
    text, _ = capture('net-plugin')
    got = through_every_door(tmp_path, 'net-plugin', text,
                             [pub(IBEXT_CHANNELS), pub(IBEXT_ERRORS)], rc=0,
                             clean_text=text)
    assert set(got.values()) == {'crash'}, got
