"""The judge (ccl_health/judge/casejudge.py), rule by rule, on real captures
(tests/fixtures/device/cap) and on lines built from the upstream format
strings (tests/helpers/mutations.py cites them)."""

import glob
import os
import random
import re

from helpers import mutations
from conftest import REPO

from ccl_health.evidence import debuglog, nccltests, warns
from ccl_health.evidence.proof import Proof, prove
from ccl_health.judge import reference
from ccl_health.judge.caseevidence import Attempt, CaseEvidence
from ccl_health.judge import ceiling as bounds
from ccl_health.judge.casejudge import judge
from ccl_health.judge.verdicts import Verdict

CAP = os.path.join(REPO, 'tests', 'fixtures', 'device', 'cap', 'intra')
REFDIR = os.path.join(REPO, 'reference')


def _intra():
    with open(os.path.join(CAP, 'stdout.txt')) as fp:
        return fp.read()


def _logs():
    return sorted(glob.glob(os.path.join(CAP, 'nccl-debug.*.log')))


def case(text=None, rc=0, entry='lookup', attempts=None, **kw):
    """The evidence of the capture 'intra' (or ``text``), proven, with its
    reference entry."""
    logs = _logs()
    ev = debuglog.read_evidence(logs)
    proof = prove('intra', ev, nodes=1)
    if entry == 'lookup':
        entry = reference.load_for_system(REFDIR, 'local').lookup(
            'gpu', 'intra', 'all_reduce', 1, 2)
    text = _intra() if text is None else text
    w, versions = warns.read_logs(logs, text, 'stdout')
    ceiling, where = bounds.bound('intra')
    att = Attempt(nccltests.parse_text(text), rc, None, proof, ev, w,
                  rank_versions=versions)
    args = dict(what='all_reduce_perf', transport='intra',
                collective='all_reduce', nodes=1, gpus_per_node=2,
                attempts=attempts or [att], reference=entry,
                missing_reference='no reference for local:gpu intra',
                ceiling_gbps=ceiling, ceiling_source=where)
    args.update(kw)
    return CaseEvidence(**args)


def test_the_real_capture_passes_with_every_size_found():
    j = judge(case())
    assert j.verdict is Verdict.PASS, j.reason
    # the sizes both measured (the capture's rows) and in the reference
    measured = {int(ln.split()[0]) for ln in _intra().splitlines()
                if re.match(r'\s+\d+\s+\d+\s+float\s', ln)}
    refd = reference.load_for_system(REFDIR, 'local').lookup(
        'gpu', 'intra', 'all_reduce', 1, 2).busbw
    both = len(measured & set(refd))
    assert len(measured) == 31 and both == 14
    assert j.reason.startswith(f'{both} sizes within reference; '), j.reason
    assert j.attempt == 1 and len(j.findings) == 31
    assert all(f.verdict in ('pass', 'no-reference') for f in j.findings)


def test_an_output_of_other_ranks_than_the_case_is_not_checked():
    # the 2-rank capture judged as a case of 1 node x 8 GPUs (issue 46: an
    # 8-GPU node's all_reduce that ran on 2): its busbw is not the case's
    j = judge(case(gpus_per_node=8, ranks=8))
    assert j.verdict is Verdict.COULD_NOT_CHECK
    assert j.reason == (
        'could not check: the output of all_reduce_perf is of 2 ranks, the '
        'case asked 8: 1 node x 8 GPUs (its bandwidth is not that of the '
        'case)')
    assert judge(case(ranks=2)).verdict is Verdict.PASS


def test_busbw_above_the_bound_of_the_case_is_wrong_results():
    text = mutations.set_value(_intra(), 30, 0, 2, f'{1e308:.2f}')
    j = judge(case(text))
    assert j.verdict is Verdict.WRONG_RESULTS
    assert 'above 7200 GB/s, the most this case can reach' in j.reason
    assert '4 x NVLink 5 per GPU' in j.reason and 'no NVLink facts' in \
        j.reason


def test_the_site_ceiling_replaces_the_derived_bound():
    class Site:
        ceiling = {'links': 2, 'link_gbps': 50.0}
    gbps, where = bounds.bound('intra', site_transport=Site())
    assert gbps == 100.0 and 'site intra ceiling: 2 links' in where
    j = judge(case(ceiling_gbps=gbps, ceiling_source=where))
    assert j.verdict is Verdict.WRONG_RESULTS and 'site intra ceiling' in \
        j.reason


def test_a_time_of_zero_or_below_is_wrong_results():
    for value in ('0.00', '-3.10'):
        text = mutations.set_value(_intra(), 5, -1, 0, value)
        j = judge(case(text))
        assert j.verdict is Verdict.WRONG_RESULTS and '<= 0' in j.reason


def test_a_size_printed_twice_with_different_values_is_incomplete():
    text = mutations.repeat_size(_intra(), random.Random(3))
    j = judge(case(text))
    assert j.verdict is Verdict.INCOMPLETE and 'printed twice' in j.reason


def test_sizes_missing_from_the_headers_range_are_incomplete():
    res = nccltests.parse_text(_intra())
    assert (res.min_bytes, res.max_bytes, res.step, res.step_factor) == (
        8, 8589934592, 2, 2)
    for where in ('middle', 'end'):
        text = mutations.drop_row(_intra(), random.Random(5), where)
        j = judge(case(text))
        assert j.verdict is Verdict.INCOMPLETE, (where, j.reason)
        assert 'announced by its header' in j.reason


def test_ranks_with_different_nccl_versions_are_named():
    text = mutations.version_mismatch(_intra(), random.Random(1))
    j = judge(case(text))
    assert j.verdict is Verdict.NODE_FAULT
    assert '2.21.5 on 1 rank (vm:7002)' in j.reason
    assert '2.28.3 on 3 ranks' in j.reason


def test_fatal_warn_classes_fail_and_every_warn_is_named():
    for key, cls, transport in (('warn-progress', 'connection', 'intra'),
                                ('warn-regmem', 'memory-registration',
                                 'net-plugin')):
        text = mutations.add_warn(_intra(), random.Random(2), key)
        j = judge(case(text, transport=transport))
        assert j.verdict is Verdict.CRASH, j.reason
        assert f'class {cls}' in j.reason and '1 NCCL WARN line' in j.reason
        assert [w.fatal for w in j.warns] == [cls]


def test_a_network_warn_on_an_intra_case_is_named_not_fatal():
    """The net plugin's (NET/OFI) or the IB code's (NET/IB, ibvwrap) WARN
    cannot be of a case whose asked and proven transport is intra-node;
    the same WARN on a network case fails it."""
    for line in ('vm:1:1 [0] NCCL WARN NET/OFI Unable to register memory '
                 '(type = 2) for device 0. RC: -22, Error: Invalid argument',
                 'vm:1:1 [0] NCCL WARN NET/IB : mlx5_0:1 async fatal event: '
                 'local catastrophic error',
                 'vm:1:1 [0] misc/ibvwrap.cc:268 NCCL WARN Call to '
                 'ibv_create_cq failed'):
        text = mutations.insert_line(_intra(), 3, line)
        j = judge(case(text))
        assert j.verdict is Verdict.PASS, j.reason
        assert 'from the network code on an intra-node case' in j.reason
        assert j.warns[0].fatal is None and j.warns[0].network
        assert judge(case(text, transport='net-ib')).verdict is \
            Verdict.CRASH
    # a WARN of no network code still fails the intra case
    text = mutations.add_warn(_intra(), random.Random(2), 'warn-cuda')
    assert judge(case(text)).verdict is Verdict.CRASH


def test_a_link_that_went_down_is_a_node_fault_unless_it_came_back():
    down = 'vm:1:1 [0] NCCL WARN NET/IB : Got async event : port error'
    up = 'vm:1:1 [0] NCCL WARN NET/IB : Got async event : port active'
    text = mutations.insert_line(_intra(), 3, down)
    j = judge(case(text, transport='net-ib'))
    assert j.verdict is Verdict.NODE_FAULT and 'link-down' in j.reason
    text = mutations.insert_line(text, 4, up)
    assert judge(case(text, transport='net-ib')).verdict is not \
        Verdict.NODE_FAULT


def test_plugin_initialisation_failure_is_a_fallback():
    text = mutations.insert_line(
        _intra(), 3, 'vm:1:1 [0] NCCL WARN NET/OFI aws-ofi-nccl '
        'initialization failed')
    j = judge(case(text, transport='net-plugin'))
    assert j.verdict is Verdict.FALLBACK and 'plugin-init' in j.reason
    # no plugin is needed by an intra-node case: named, not fatal
    assert judge(case(text)).verdict is Verdict.PASS


def test_a_benign_warn_is_named_and_passes():
    text = mutations.add_warn(_intra(), random.Random(2), 'warn-progress')
    logs = _logs()
    w, v = warns.read_logs(logs, text, 'stdout', warns.benign_patterns(
        [{'pattern': 'progressing operation=Connect',
          'why': 'seen at teardown on this fabric',
          'overrides': 'connection'}]))
    ev = case(text)
    ev.attempts[0].warns = w
    j = judge(ev)
    assert j.verdict is Verdict.PASS, j.reason
    assert 'benign: seen at teardown on this fabric' in j.reason


def test_rccl_advice_warns_are_not_fatal():
    text = ('x:1:1 [0] NCCL WARN Missing "iommu=pt" from kernel command '
            'line which can lead to system instablity or hang!\n')
    [w] = warns.read_text(text)
    assert w.fatal is None
    # prefix-less, as users paste them
    [w] = warns.read_text('[0] NCCL WARN Cuda failure \'invalid argument\'')
    assert w.fatal == 'cuda'


def test_no_measured_size_in_the_reference_is_no_reference():
    entry = reference.load_for_system(REFDIR, 'local').lookup(
        'gpu', 'intra', 'all_reduce', 1, 2)
    import dataclasses
    other = dataclasses.replace(entry, busbw={3: 1.0})
    j = judge(case(entry=other))
    assert j.verdict is Verdict.NO_REFERENCE
    assert 'none of the sizes of the output is in the reference' in j.reason
    j = judge(case(entry=None))
    assert j.verdict is Verdict.NO_REFERENCE and 'local:gpu' in j.reason


def test_below_reference_names_each_size():
    text = mutations.set_value(_intra(), 30, 0, 2, '1.00')
    text = mutations.set_value(text, 30, -1, 2, '1.00')
    j = judge(case(text))
    assert j.verdict is Verdict.BELOW_REFERENCE and '8GiB 1.00 vs' in j.reason
    assert [f.size for f in j.findings if f.below] == [1 << 33]


def test_a_retry_absorbs_a_shortfall_only():
    good = case().attempts[0]
    wrong = case(mutations.set_wrong(_intra(), 4, 9)).attempts[0]
    slow_text = mutations.set_value(mutations.set_value(
        _intra(), 30, 0, 2, '1.00'), 30, -1, 2, '1.00')
    slow = case(slow_text).attempts[0]
    j = judge(case(attempts=[wrong, good]))
    assert j.verdict is Verdict.WRONG_RESULTS and j.attempt == 1
    assert j.reason.startswith('attempt 1 of 2: wrong-results')
    j = judge(case(attempts=[slow, good]))
    assert j.verdict is Verdict.PASS and j.attempt == 2
    crashed = Attempt(good.result, 1, None, good.proof, good.debug)
    assert judge(case(attempts=[crashed, good])).verdict is Verdict.CRASH


def test_unproven_transport_and_kills():
    att = case().attempts[0]
    att.proof = None
    assert judge(case(attempts=[att])).verdict is Verdict.COULD_NOT_CHECK
    j = judge(case(attempts=[att], proof_required=False,
                   judge_bandwidth=False))
    assert j.verdict is Verdict.PASS
    att.killed = 'the job exceeded its time limit'
    assert judge(case(attempts=[att])).verdict is Verdict.HANG
    assert judge(CaseEvidence()).verdict is Verdict.COULD_NOT_CHECK


def test_no_output_is_could_not_check_unless_a_fatal_warn_says_why():
    # a case whose program printed nothing: its debug logs alone
    quiet = Attempt(None, None, warns=warns.read_text(
        'x:1:1 [0] NCCL WARN NET/IB : mlx5_2:1 Got non-fatal async event: '
        'port active(9)'))
    j = judge(CaseEvidence(what='the run', attempts=[quiet]))
    assert j.verdict is Verdict.COULD_NOT_CHECK and 'no output' in j.reason
    failed = Attempt(None, None, warns=warns.read_text(
        'x:1:1 [0] misc/ibvwrap.cc:268 NCCL WARN Call to ibv_create_cq '
        'failed'))
    j = judge(CaseEvidence(what='the run', attempts=[failed]))
    assert j.verdict is Verdict.CRASH and 'class internal' in j.reason
    assert 'no output of the run' in j.reason
    plugin = Attempt(None, None, warns=warns.read_text(
        'x:1:1 [0] NCCL WARN NET/OFI aws-ofi-nccl initialization failed'))
    assert judge(CaseEvidence(attempts=[plugin])).verdict is Verdict.FALLBACK
    # a launch that never happened stays could-not-check
    plugin.launch_error = 'srun: error: Unable to create step'
    assert judge(CaseEvidence(attempts=[plugin])).verdict is \
        Verdict.COULD_NOT_CHECK


def test_a_rank_printed_by_two_processes_is_never_a_pass():
    # lines built from nccl-tests' format ("#  Rank %2d Group %2d Pid %6d on
    # %10s device %2d [%s] %s"): two complete tables of two processes that
    # each were rank 0, the second one's rows identical: one communicator
    # would have printed ranks 0 and 1
    one = ('# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) '
           'warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n'
           '#\n# Using devices\n'
           '#  Rank  0 Group  0 Pid   {pid} on {host} device  0 [0x00] '
           'NVIDIA H100 80GB HBM3\n#\n'
           '#       size         count      type   redop    root     time   '
           'algbw   busbw #wrong     time   algbw   busbw #wrong\n'
           '           8             2     float     sum      -1    10.00    '
           '0.00    0.00      0    10.00    0.00    0.00      0\n'
           '          16             4     float     sum      -1    10.00    '
           '0.00    0.00      0    10.00    0.00    0.00      0\n'
           '# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0 \n#\n')
    text = (one.format(pid=11, host='node-a') +
            one.format(pid=22, host='node-b'))
    res = nccltests.parse_text(text)
    assert res.repeated_ranks == [0] and res.nranks == 1
    j = judge(CaseEvidence(what='all_reduce_perf',
                           attempts=[Attempt(res, 0)]))
    assert j.verdict is Verdict.INCOMPLETE, j.reason
    assert 'rank 0 is printed by 2 processes' in j.reason
    # the same table from one process with ranks 0 and 1: not this rule
    two = one.format(pid=11, host='node-a').replace(
        '#\n#       size', '#  Rank  1 Group  0 Pid     22 on node-b device  '
        '0 [0x00] NVIDIA H100 80GB HBM3\n#\n#       size')
    res2 = nccltests.parse_text(two)
    assert res2.repeated_ranks == [] and res2.nranks == 2
    assert 'printed by' not in judge(CaseEvidence(
        what='all_reduce_perf', attempts=[Attempt(res2, 0)])).reason


NET = os.path.join(REPO, 'tests', 'fixtures', 'device', 'cap', 'net-plugin')


def net_case(extra=()):
    """The real net-plugin capture (one node, P2P off, over the plugin),
    proven, bandwidth not judged, with ``extra`` WARN texts in its first
    rank's log lines."""
    logs = sorted(glob.glob(os.path.join(NET, 'nccl-debug.*.log')))
    with open(os.path.join(NET, 'stdout.txt')) as fp:
        text = fp.read()
    ev = debuglog.read_evidence(logs)
    proof = prove('net-plugin', ev, nodes=1)
    with open(logs[0]) as fp:
        prefix = fp.read().split(' NCCL INFO', 1)[0]
    body = ''.join(f'{prefix} NCCL WARN {t}\n' for t in extra)
    w, versions = warns.read_logs(logs, text + body, 'stdout')
    att = Attempt(nccltests.parse_text(text), 0, None, proof, ev, w,
                  rank_versions=versions)
    return CaseEvidence(what='all_reduce_perf', transport='net-plugin',
                        collective='all_reduce', nodes=1, gpus_per_node=2,
                        attempts=[att], judge_bandwidth=False)


def test_every_advisory_warn_on_a_net_probe_passes():
    from helpers.warns import warn_samples
    assert judge(net_case()).verdict is Verdict.PASS
    j = judge(net_case(warn_samples('advisory')))
    assert j.verdict is Verdict.PASS, j.reason
    assert all(w.fatal is None for w in j.warns)


def test_ib_faults_on_a_net_probe_fail():
    qp = ('NET/IB : mlx5_0:1 Got async event : local work queue '
          'catastrophic error')
    j = judge(net_case([qp]))
    assert j.verdict is Verdict.CRASH and 'class connection' in j.reason
    down = 'NET/IB : Got async event : port error'
    j = judge(net_case([down]))
    assert j.verdict is Verdict.NODE_FAULT and 'link-down' in j.reason
    up = 'NET/IB : Got async event : port active'
    assert judge(net_case([down, up])).verdict is Verdict.PASS
    # a skipped HCA is no fallback
    j = judge(net_case(['NET/IB : Unable to open device mlx5_4',
                        'NET/IB : Unable to query port_num 2']))
    assert j.verdict is Verdict.PASS, j.reason
    # issue 41: the verbs wrapper's own line before it (ibvwrap.cc returns
    # an error, init.cc's caller skips the HCA and goes on)
    for pair in (['Call to ibv_open_device failed',
                  'NET/IB : Unable to open device mlx5_4'],
                 ['Call to ibv_query_device failed with error Invalid '
                  'argument errno 22',
                  'NET/IB : Unable to query device mlx5_4']):
        j = judge(net_case(pair))
        assert j.verdict is Verdict.PASS, (pair, j.reason)


# -- issue 31: failures named whatever the proof --------------------------

def _scaled(text, by):
    """The capture with every busbw / algbw divided by ``by`` (a run far
    below its reference at every size)."""
    out = []
    for line in text.splitlines(True):
        toks = line.split()
        if len(toks) >= 13 and toks[0].isdigit() and toks[1].isdigit():
            for i in (6, 7, 10, 11):
                toks[i] = f'{float(toks[i]) / by:.2f}'
            line = '  '.join(toks) + '\n'
        out.append(line)
    return ''.join(out)


def _unproven(c, proof=None):
    for a in c.attempts:
        a.proof = proof
    return c


def test_a_measured_shortfall_is_below_reference_whatever_the_proof():
    # 23x below the reference at every size: only a pass needs the proof
    slow = _scaled(_intra(), 23)
    for proof in (None, Proof('intra', None, False,
                                       'no channel lines in the logs')):
        j = judge(_unproven(case(slow), proof))
        assert j.verdict is Verdict.BELOW_REFERENCE, j.reason
        assert 'transport not proven: ' in j.reason
    j = judge(_unproven(case(slow)))
    assert 'transport not proven: no debug log' in j.reason
    # the healthy numbers without a proof: still no pass
    j = judge(_unproven(case()))
    assert j.verdict is Verdict.COULD_NOT_CHECK
    # a proven fallback says more than the shortfall
    fb = Proof('net-plugin', 'net-socket', False, 'fell back')
    assert judge(_unproven(case(slow), fb)).verdict is Verdict.FALLBACK


def test_a_log_alone_that_proves_a_fallback_is_a_fallback():
    c = case()
    c.attempts[0].result = None
    c.attempts[0].proof = Proof(
        'net-plugin', 'net-socket', False, 'fell back to NET/Socket instead '
        'of the plugin (NET/Socket x4)')
    j = judge(c)
    assert j.verdict is Verdict.FALLBACK and 'no output of' in j.reason
    # a log alone that proves nothing: not judged
    c.attempts[0].proof = Proof('net-plugin', None, False, 'none')
    assert judge(c).verdict is Verdict.COULD_NOT_CHECK


WARN_CONNECTION = ('h:1:2 [0] misc/socket.cc:58 NCCL WARN socketProgress: '
                   'Connection closed by remote peer h2<44312>')


def test_an_output_that_stops_after_a_fatal_warn_is_a_crash_or_a_hang():
    lines = _intra().splitlines(True)
    first = next(i for i, ln in enumerate(lines)
                 if ln.split() and ln.split()[0].isdigit())
    # the header, then the WARN, no row: the run failed (crash)
    text = ''.join(lines[:first]) + WARN_CONNECTION + '\n'
    for rc in (None, 0):
        j = judge(case(text, rc=rc))
        assert j.verdict is Verdict.CRASH, j.reason
        assert 'before any result row' in j.reason
    # rows, then the WARN and nothing more: it started, then stopped (hang)
    text = ''.join(lines[:first + 5]) + WARN_CONNECTION + '\n'
    j = judge(case(text, rc=None))
    assert j.verdict is Verdict.HANG and 'stopped after 5 size(s)' in \
        j.reason
    # an error line or an exit status says it ended: a crash
    assert judge(case(text, rc=1)).verdict is Verdict.CRASH
    # "Error: network AWS Libfabric not found." (NCCL_NET names a network
    # that is not there: ncclInvalidUsage) is a plugin's init failure
    text = ''.join(lines[:first]) + ('h:1:2 [0] net.cc:285 NCCL WARN Error: '
                                      'network AWS Libfabric not found.\n')
    j = judge(case(text, rc=None))
    assert j.verdict is Verdict.FALLBACK and 'plugin-init' in j.reason
