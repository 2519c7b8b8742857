"""Issue 43, round 5: the classes and extras read on lines built from the
upstream format strings where the earlier rounds had real pastes only, and
a plugin NCCL found and could not load.

* A, every generation's words for a plugin named by the environment and
  not found (NCCL 2.18/2.19 ``src/net.cc``, 2.20-2.22's
  ``tryOpenDynamicLib`` / ``summarizeOpenNetPluginErrors``, 2.23's
  ``tryOpenLibCheck`` "Could not find:%s. Using internal network plugin.",
  2.28's ``ncclOsDlopen``, RCCL's "Using internal net plugin."), then
  "Using network Socket" or "IB": a fallback to that network;
* A plugin that NCCL found where it looked and could not load (the dynamic
  loader's error names a library it needs, a symbol or a glibc version it
  lacks: aws-ofi-rccl installed as ``librccl-net.so`` without its
  libfabric): it was there to be used, so NCCL's own network after it is a
  fallback, named with the loader's words (was "no plugin asked",
  could-not-check); the plugin's own name not found stays NCCL's probe
  (class G);
* E from nccl-tests 2.19.6 ``src/util.cu``: every size of the header's
  sweep without ``writeResultFooter``'s lines, or those lines without a
  row, is could-not-check; a row short is incomplete, said as what the
  output shows (it "ends after N sizes"), never that the run stopped;
* extra 2, the GDR-off lines of NCCL's ``net_ib.cc`` ("NET/IB : GPU Direct
  RDMA Disabled for HCA %d '%s' (no module)"), RCCL's ``paths.cc`` and
  aws-ofi-nccl's ``nccl_ofi_ofiutils.cpp`` named where GDR was asked;
* extra 3, NCCL's logger lines inline in an nccl-tests output: a debug
  log, not "no NCCL debug log among the files".
Each through ``scripts/explain`` and every door of the cross-door matrix
(tests/helpers/doors.py ``through_every_door``)."""

import os

import pytest

from conftest import REPO
from helpers.doors import capture, through_every_door
from helpers.ncclformats import (nccl_info, sweep, util_cu_head,
                                 util_cu_summary)

from ccl_health import explain as X
from ccl_health.evidence import debuglog
from ccl_health.evidence import proof as transport_proof


def _log(tmp_path, lines, net='Socket', name='nccl.log'):
    """``lines`` (each one line of ``NET/Plugin`` text) as two ranks on two
    hosts print them, then ``"Using network %s"`` (src/init.cc) and the
    Init COMPLETE line, behind NCCL's logger prefix."""
    out = []
    for host, pid, rank in (('nid001', 11, 0), ('nid002', 22, 1)):
        out += [nccl_info(host, pid, pid, 0, ln) for ln in lines]
        out += [nccl_info(host, pid, pid, 0, f'Using network {net}'),
                nccl_info(host, pid, pid, 0,
                          f'comm 0x1{rank} rank {rank} nranks 2 cudaDev 0 '
                          f'busId 1000 - Init COMPLETE')]
    path = tmp_path / name
    path.write_text('\n'.join(out) + '\n')
    return str(path)


# -- A: a plugin named by the environment and not found, every generation -----

#: NCCL_NET_PLUGIN=ofi (RCCL: librccl-net-ofi.so, anp) not found, in the
#: words of each generation; the name each asks for
NAMED_NOT_FOUND = [
    # NCCL 2.18/2.19 src/net.cc: "Plugin name set by env to %s",
    # "NET/Plugin : dlerror=%s No plugin found (%s), using internal
    # implementation"
    (['Plugin name set by env to libnccl-net-ofi.so',
      'NET/Plugin : dlerror=libnccl-net-ofi.so: cannot open shared object '
      'file: No such file or directory No plugin found (libnccl-net-ofi.so), '
      'using internal implementation'], 'libnccl-net-ofi.so'),
    # NCCL 2.20-2.22: "NET/Plugin: No plugin found (%s)" for each name
    # tried, "Plugin load returned %d : %s : when loading %s", "NET/Plugin:
    # Using internal network plugin."
    (['NET/Plugin: No plugin found (ofi)',
      'NET/Plugin: No plugin found (libnccl-net-ofi.so)',
      'NET/Plugin: Plugin load returned 2 : libnccl-net-ofi.so: cannot open '
      'shared object file: No such file or directory : when loading ofi',
      'NET/Plugin: Using internal network plugin.'], 'ofi'),
    # RCCL of ROCm 6.2/6.3 (the same code, RCCL's plugin names)
    (['NET/Plugin: No plugin found (librccl-net-ofi.so)',
      'NET/Plugin: Plugin load returned 2 : librccl-net-ofi.so: cannot open '
      'shared object file: No such file or directory : when loading '
      'librccl-net-ofi.so', 'NET/Plugin: Using internal network plugin.'],
     'librccl-net-ofi.so'),
    # NCCL 2.23-2.27 tryOpenLibCheck: " %s" per name not found, then "Could
    # not find:%s. Using internal network plugin." (CSCS's page prints it)
    (['NET/Plugin: Could not find: ofi libnccl-net-ofi.so. Using internal '
      'network plugin.'], 'ofi'),
    # RCCL of ROCm 7 (AMD's AINIC plugin, NCCL_NET_PLUGIN=anp)
    (['NET/Plugin: Could not find: librccl-net-anp.so. Using internal net '
      'plugin.'], 'librccl-net-anp.so'),
    # NCCL 2.28 src/plugin/plugin_open.cc: "ncclOsDlopen(%s) failed: %s",
    # "%s/Plugin: Could not find:%s", then "Initialized NET plugin %s"
    (['ncclOsDlopen(ofi) failed: ofi: cannot open shared object file: No '
      'such file or directory',
      'ncclOsDlopen(libnccl-net-ofi.so) failed: libnccl-net-ofi.so: cannot '
      'open shared object file: No such file or directory',
      'NET/Plugin: Could not find: ofi libnccl-net-ofi.so',
      'Initialized NET plugin Socket', 'Assigned NET plugin Socket to comm'],
     'ofi'),
]


@pytest.mark.parametrize('net,proven', [('Socket', 'net-socket'),
                                        ('IB', 'net-ib')])
@pytest.mark.parametrize('lines,name', NAMED_NOT_FOUND)
def test_a_named_plugin_not_found_in_every_generations_words(
        tmp_path, lines, name, net, proven):
    if net == 'IB':
        lines = [ln.replace('NET plugin Socket', 'NET plugin IB')
                 for ln in lines]
    log = _log(tmp_path, lines, net)
    ev = debuglog.read_evidence([log])
    assert ev.plugin_asked == name
    assert transport_proof.asked_from_log(ev) == 'net-plugin'
    for asked in (None, 'net-plugin', 'net-plugin-gdr'):
        proof = transport_proof.prove(asked, ev, nodes=2)
        assert proof.proven == proven and not proof.ok, proof
        assert f'"Using network {net}"' in proof.reason
    doc = X.explain([log], exit_status=0)
    assert doc['verdict'] == 'fallback' and doc['exit_code'] == 1
    # asked for that very network: nothing fell back
    same = transport_proof.prove(proven, ev, nodes=2)
    assert same.proven is None and 'fell back' not in same.reason


# -- A: a plugin found where NCCL looked, and not loadable -------------------

DEP = 'libfabric.so.1: cannot open shared object file: No such file or ' \
    'directory'

#: the plugin's file is there (the default name: a site installs its
#: plugin there, Frontier's aws-ofi-rccl as librccl-net.so) and the loader
#: cannot load it; the line that names why
FOUND_NOT_LOADED = [
    # RCCL rocm-5.7.1 src/net.cc:186 "NET/Plugin : Plugin load (%s)
    # returned %d : %s" with dlerror(), then :187
    ([f'NET/Plugin : Plugin load (librccl-net.so) returned 2 : {DEP}',
      'NET/Plugin : No plugin found, using internal implementation'],
     'librccl-net.so', DEP),
    # NCCL 2.18/2.19: errno ENOENT (the library it needs is missing) and
    # the loader's words
    ([f'NET/Plugin : dlerror={DEP} No plugin found (libnccl-net.so), using '
      f'internal implementation'], 'libnccl-net.so', DEP),
    # NCCL 2.18/2.19 otherwise: "NET/Plugin : Plugin load returned %d :
    # %s."
    (['NET/Plugin : Plugin load returned 0 : /opt/aws-ofi-nccl/lib/'
      'libnccl-net.so: undefined symbol: fi_getinfo.'],
     '/opt/aws-ofi-nccl/lib/libnccl-net.so', 'undefined symbol: fi_getinfo'),
    # NCCL 2.20-2.22: "No plugin found (%s)", then the summary with dlerror
    (['NET/Plugin: No plugin found (libnccl-net.so)',
      f'NET/Plugin: Plugin load returned 2 : {DEP} : when loading '
      f'libnccl-net.so', 'NET/Plugin: Using internal network plugin.'],
     'libnccl-net.so', DEP),
    # NCCL 2.23-2.27 tryOpenLibCheck: an error that is not "No such file"
    # of the name tried is logged as "NET/Plugin: %s"
    ([f'NET/Plugin: {DEP}', 'NET/Plugin: Using internal network plugin.'],
     'the net plugin', DEP),
    # RCCL of ROCm 7 in an Ubuntu 22.04 image: the AINIC plugin built for
    # glibc 2.38
    (["NET/Plugin: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' "
      "not found (required by /opt/rocm/lib/librccl-net.so)",
      'NET/Plugin: Using internal net plugin.'],
     '/opt/rocm/lib/librccl-net.so', "GLIBC_2.38' not found"),
]


@pytest.mark.parametrize('lines,name,said', FOUND_NOT_LOADED)
@pytest.mark.parametrize('status', [0, None])
def test_a_plugin_found_and_not_loadable_is_a_fallback(tmp_path, lines,
                                                       name, said, status):
    """The plugin was there to be used: NCCL's own network after it is a
    fallback, the loader's words in the reason (was: "no plugin asked",
    could-not-check)."""
    log = _log(tmp_path, lines)
    ev = debuglog.read_evidence([log])
    assert ev.plugin_asked == name
    assert transport_proof.asked_from_log(ev) == 'net-plugin'
    doc = X.explain([log], exit_status=status)
    t = doc['transport']
    assert t['proven'] == 'net-socket' and not t['ok'], t
    assert doc['verdict'] == 'fallback' and doc['exit_code'] == 1
    assert said in t['reason'] and '"Using network Socket"' in t['reason']
    assert 'FALLBACK' in X.render(doc)
    # asked for sockets, or the node's own links: nothing fell back
    for asked in ('net-socket', 'intra'):
        doc = X.explain([log], transport_asked=asked)
        assert doc['verdict'] != 'fallback', (asked, doc['reason'])


def test_a_plugin_found_and_not_loadable_after_socket_channels(tmp_path):
    """The same with the channels connected over sockets: a fallback
    proven by them, the loader's error named."""
    log = tmp_path / 'nccl.log'
    log.write_text('\n'.join(
        [nccl_info('nid001', 11, 11, 0, FOUND_NOT_LOADED[0][0][0]),
         nccl_info('nid001', 11, 11, 0, FOUND_NOT_LOADED[0][0][1]),
         nccl_info('nid001', 11, 11, 0, 'Using network Socket'),
         nccl_info('nid001', 11, 40, 0, 'Channel 00/0 : 1[0] -> 0[0] '
                   '[receive] via NET/Socket/0'),
         nccl_info('nid001', 11, 40, 0, 'Channel 00/0 : 0[0] -> 1[0] [send] '
                   'via NET/Socket/0')]) + '\n')
    doc = X.explain([str(log)], exit_status=0)
    assert doc['transport']['proven'] == 'net-socket'
    assert doc['verdict'] == 'fallback', doc['reason']


#: the plugin's own name not found: NCCL's probe of its default plugin, no
#: plugin asked (class G), in each generation's words
DEFAULT_NOT_FOUND = [
    ['NET/Plugin : Plugin load (librccl-net.so) returned 2 : librccl-net.so: '
     'cannot open shared object file: No such file or directory',
     'NET/Plugin : No plugin found, using internal implementation'],
    ['NET/Plugin: No plugin found (libnccl-net.so)',
     'NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open '
     'shared object file: No such file or directory : when loading '
     'libnccl-net.so', 'NET/Plugin: Using internal network plugin.'],
    ['ncclOsDlopen(librccl-net.so) failed: librccl-net.so: cannot open '
     'shared object file: No such file or directory',
     'NET/Plugin: Could not find: librccl-net.so',
     # NCCL 2.28's other plugins, opened the same way: not the net plugin
     'ncclOsDlopen(libnccl-env.so) failed: libfabric.so.1: cannot open '
     'shared object file: No such file or directory'],
]


@pytest.mark.parametrize('lines', DEFAULT_NOT_FOUND)
def test_the_default_plugins_own_name_not_found_is_no_plugin_asked(
        tmp_path, lines):
    log = _log(tmp_path, lines)
    ev = debuglog.read_evidence([log])
    assert ev.plugin_asked is None
    assert transport_proof.asked_from_log(ev) is None
    doc = X.explain([log], exit_status=0)
    assert doc['transport']['proven'] is None
    assert doc['verdict'] == 'could-not-check', doc['reason']


#: vllm-project/vllm#18731 (a window of turn 1): NCCL 2.21's probe of the
#: default libnccl-net.so by two processes whose lines merged, and the name
#: wrapped by the paste ("when loading libnccl-" / "net.so")
WRAPPED = 'nccl-debug_default-probe-wrapped-in-name_merged-lines_k8s-vllm-' \
    'issue-18731.log'


def test_a_default_name_wrapped_by_the_paste_asks_for_nothing(tmp_path):
    """The start of the default name is no plugin asked (was: "the log asks
    for the plugin: libnccl-", so a fallback wherever NCCL named its own
    network)."""
    real = os.path.join(REPO, 'tests', 'fixtures', 'published', WRAPPED)
    ev = debuglog.read_evidence([real])
    assert ev.plugin_asked is None
    assert transport_proof.asked_from_log(ev) is None
    doc = X.explain([real])
    assert doc['transport']['asked'] is None, doc['transport']
    assert 'plugin' not in doc['transport']['reason']
    # the same wrap in NCCL 2.21's words on two hosts, then "Using network
    # Socket": NCCL's own network, no fallback
    log = _log(tmp_path, [
        'NET/Plugin: No plugin found (libnccl-net.so)',
        'NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open '
        'shared object file: No such file or directory : when loading '
        'libnccl-\nnet.so', 'NET/Plugin: Using internal network plugin.'])
    doc = X.explain([log], exit_status=0)
    assert doc['verdict'] == 'could-not-check', doc['reason']
    assert doc['transport']['proven'] is None
    # the real window beside a healthy socket table, in every door: one
    # verdict, never a pass (its processes are not the output's)
    text, _ = capture('net-socket')
    for asked in ('net-socket', 'net-plugin'):
        got = through_every_door(tmp_path, asked, text, [real], rc=0,
                                 clean_text=text)
        assert len(set(got.values())) == 1 and 'pass' not in got.values(), \
            (asked, got)


def test_a_plugin_not_loadable_is_a_fallback_in_every_door(tmp_path):
    """NCCL 2.23's words for a plugin whose libfabric is missing (the
    loader's error alone: no name not found), beside a healthy socket
    table: asked for the plugin, every door says fallback (was
    could-not-check: not proven); asked for sockets, every door agrees and
    none passes (the log's processes are not the output's)."""
    text, _ = capture('net-socket')
    log = _log(tmp_path, FOUND_NOT_LOADED[4][0])
    got = through_every_door(tmp_path, 'net-plugin', text, [log], rc=0,
                             clean_text=text)
    assert set(got.values()) == {'fallback'}, got
    got = through_every_door(tmp_path, 'net-socket', text, [log], rc=0)
    assert len(set(got.values())) == 1 and 'pass' not in got.values(), got


# -- E: what the output shows, from nccl-tests' own format -------------------

RANKS = [(0, 'vm', 0), (1, 'vm', 1)]


def _explain(tmp_path, text, **kw):
    path = tmp_path / 'all_reduce.out'
    path.write_text(text)
    return X.explain([str(path)], exit_status=0, **kw)


def test_every_size_of_the_header_without_the_footer_is_not_checked(
        tmp_path):
    head = util_cu_head(8, 1 << 20, ranks=RANKS)
    rows = sweep(8, 1 << 20)
    doc = _explain(tmp_path, head + ''.join(rows))
    assert doc['verdict'] == 'could-not-check', doc['reason']
    assert f'every size announced by its header ({len(rows)})' in \
        doc['reason']
    # a row short: the output ends early, said as what the text shows
    doc = _explain(tmp_path, head + ''.join(rows[:-1]))
    assert doc['verdict'] == 'incomplete', doc['reason']
    assert f'the output of all_reduce_perf ends after {len(rows) - 1} ' \
        f'size(s)' in doc['reason']
    assert 'stopped' not in doc['reason']


def test_the_footer_without_a_row_is_not_checked(tmp_path):
    head = util_cu_head(8, 1 << 20, ranks=RANKS)
    doc = _explain(tmp_path, head + util_cu_summary(12.5))
    assert doc['verdict'] == 'could-not-check', doc['reason']
    assert '"Avg bus bandwidth : 12.5"' in doc['reason']
    # neither rows nor footer: the output holds no row, never "the run
    # printed none"
    doc = _explain(tmp_path, head)
    assert doc['verdict'] == 'incomplete', doc['reason']
    assert 'the output of all_reduce_perf holds no result rows' in \
        doc['reason']
    assert 'printed' not in doc['reason']


@pytest.mark.parametrize('cut', ['footer', 'rows'])
def test_what_the_output_left_out_agrees_in_every_door(tmp_path, cut):
    head = util_cu_head(8, 1 << 30, ranks=RANKS)
    rows = sweep(8, 1 << 30)
    text = head + (''.join(rows) if cut == 'footer' else
                   util_cu_summary(10.0))
    got = through_every_door(tmp_path, 'intra', text, [], rc=0,
                             clean_text=text)
    assert set(got.values()) == {'could-not-check'}, got


# -- extra 2: the GDR-off lines of the upstream sources -----------------------

@pytest.mark.parametrize('line', [
    # NCCL src/transport/net_ib.cc ncclIbGetProperties (and HPC-X's
    # nccl-rdma-sharp plugins' p2p_plugin.c)
    "NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)",
    # RCCL rocm-5.7.1 src/graph/paths.cc:418 "GPU Direct RDMA Disabled for
    # GPU %lx / HCA %d (distance %d > %d)"
    'GPU Direct RDMA Disabled for GPU c1000 / HCA 0 (distance 5 > 3)',
    # aws-ofi-nccl 1.21.1 src/nccl_ofi_ofiutils.cpp:362
    'NET/OFI Could not disable CUDA API usage for HMEM, disabling GDR'])
def test_a_gdr_off_line_from_the_sources_is_named_where_gdr_was_asked(
        tmp_path, line):
    net = 'OFI' if 'NET/OFI' in line else 'IB'
    via = 'NET/Libfabric/0' if net == 'OFI' else 'NET/IB/0'
    log = tmp_path / 'nccl.log'
    log.write_text('\n'.join(
        [nccl_info('n1', 11, 11, 0, line)] +
        [nccl_info(h, p, p + 1, 0, f'Channel 00/0 : {a}[0] -> {b}[0] '
                   f'[{d}] via {via}')
         for h, p, a, b, d in (('n1', 11, 1, 0, 'receive'),
                               ('n1', 11, 0, 1, 'send'),
                               ('n2', 22, 0, 1, 'receive'),
                               ('n2', 22, 1, 0, 'send'))]) + '\n')
    for asked in ('net-plugin-gdr',) + (('net-ib-gdr',) if net == 'IB'
                                         else ()):
        doc = X.explain([str(log)], transport_asked=asked)
        assert not doc['transport']['ok'] and doc['verdict'] != 'pass'
        assert line.replace('NET/OFI ', '') in doc['transport']['reason'], \
            (asked, doc['transport']['reason'])


# -- extra 3: NCCL's lines inline in an output --------------------------------

def test_an_output_with_the_loggers_lines_inline_has_a_debug_log(tmp_path):
    """nccl-tests' header and rank lines with NCCL's INFO lines written
    between them (one stream, as ``NCCL_DEBUG=INFO`` prints to stdout):
    the output carries a debug log; no channel line in it proves nothing."""
    head = util_cu_head(8, 1 << 20, ranks=RANKS)
    inline = '\n'.join(nccl_info('vm', 1000 + r, 1000 + r, r, t)
                       for r in (0, 1) for t in (
                           'Bootstrap : Using eth0:10.0.0.1<0>',
                           'NET/Plugin : dlerror=libnccl-net.so: cannot open '
                           'shared object file: No such file or directory No '
                           'plugin found (libnccl-net.so), using internal '
                           'implementation', 'Using network Socket')) + '\n'
    at = head.index('#\n#  ')
    text = head[:at] + inline + head[at:] + ''.join(sweep(8, 1 << 20)) + \
        util_cu_summary(10.0)
    doc = _explain(tmp_path, text)
    assert doc['files'][0]['kind'] == 'output' and len(doc['rows']) == 18
    reason = doc['transport']['reason']
    assert 'no NCCL debug log among the files' not in reason
    assert 'no channel lines among the NCCL lines of the output' in reason
    assert doc['verdict'] != 'pass'
    # with its channel lines inline too: the transport is proven
    chans = '\n'.join(nccl_info('vm', 1000 + r, 2000 + r, r,
                                f'Channel 00/0 : {r}[{r}] -> {1 - r}[{1 - r}]'
                                f' via P2P/CUMEM/read') for r in (0, 1))
    doc = _explain(tmp_path, head[:at] + inline + chans + '\n' + head[at:] +
                   ''.join(sweep(8, 1 << 20)) + util_cu_summary(10.0),
                   transport_asked='intra')
    assert doc['transport']['proven'] == 'intra', doc['transport']


# -- D / E: two tables in one text --------------------------------------------

def test_interleaved_tables_name_their_repeated_sizes(tmp_path):
    """NVIDIA/nccl-tests#182: two processes' tables interleaved, 8 and 16 B
    printed twice; their busbw both round to 0.00, their times differ (was:
    "the run stopped after 10 sizes", the repeats unnamed)."""
    real = os.path.join(REPO, 'tests', 'fixtures', 'published',
                        'nccl-tests_interleaved-duplicate-sizes_nccl-tests-'
                        'issue-182.txt')
    doc = X.explain([real], exit_status=0)
    assert doc['verdict'] == 'incomplete', doc['reason']
    assert '2 size(s) printed twice with different values, first 8 B' in \
        doc['reason']
    # the same from util.cu's rows: a second run's first rows written into
    # the first run's table, the footer not reached
    head = util_cu_head(8, 1 << 20, ranks=RANKS)
    first, second = sweep(8, 1 << 20), sweep(8, 64, busbw=0.004)
    text = head + ''.join(first[:4] + second[:2] + first[4:9])
    doc = _explain(tmp_path, text)
    assert doc['verdict'] == 'incomplete', doc['reason']
    assert '2 size(s) printed twice' in doc['reason']
    got = through_every_door(tmp_path, 'intra', text, [], rc=0,
                             clean_text=text)
    assert set(got.values()) == {'incomplete'}, got


def test_a_window_without_channels_is_not_said_to_have_stopped():
    """A window that ends before any channel line (the vllm-project/
    vllm#18731 window, a transport asked): the log may have been cut, so
    the run is not said to have stopped there (class E)."""
    real = os.path.join(REPO, 'tests', 'fixtures', 'published', WRAPPED)
    doc = X.explain([real], transport_asked='net-socket')
    reason = doc['transport']['reason']
    assert 'no channel was connected in the log' in reason
    assert 'or the log was cut before them' in reason


def test_rows_of_a_run_with_its_check_off_say_so(tmp_path):
    """util.cu writes ``"  %7s  %6s  %6s    N/A"`` per half where the
    results were not checked (``-c 0``, the header's ``validation: 0``):
    could-not-check, said as the run was given (was "run without -c
    0")."""
    head = util_cu_head(8, 64, ranks=RANKS).replace('validation: 1',
                                                   'validation: 0')
    rows = ''.join(r.replace('       0     ', '     N/A     ', 1)
                   .replace('       0\n', '     N/A\n') for r in
                   sweep(8, 64))
    assert rows.count('N/A') == 8
    doc = _explain(tmp_path, head + rows + util_cu_summary(10.0))
    assert doc['verdict'] == 'could-not-check', doc['reason']
    assert 'its check was off, -c 0' in doc['reason']
    assert 'without -c 0' not in doc['reason']
