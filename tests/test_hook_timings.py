"""Where the hook's time goes (issue 42, item 2): ``--json``'s ``timings``
(ccl_health/hook/timings.py) and the table of
benchmarks/device/hook_timing.sh, whose "outside the probes" column
counted the one probe process twice (-1.03 s on 2x H200)."""

import glob
import json
import os
import re
import statistics
import subprocess
import sys

import pytest

from conftest import REPO
from helpers.probe import probe_hook

KEEP = os.path.join(REPO, 'tests', 'fixtures', 'device', 'hook-timing-x2',
                    'keep')
LINKS_FIXTURE = os.path.join(REPO, 'tests', 'fixtures', 'links',
                             '2gpu-healthy.txt')
#: the main thread's phases, back to back: they add up to the total
SEQUENTIAL = ('start', 'options', 'resource_manager', 'probe_start_ahead',
              'site', 'node_state_before_wait', 'plan', 'probe',
              'node_state_after', 'judging', 'line', 'record')


def test_json_says_where_the_time_went(tmp_path):
    rc, line, doc, run = probe_hook(tmp_path, True)
    assert rc == 0, line
    t = doc['timings']
    for phase in ('start', 'options', 'resource_manager', 'site', 'plan',
                  'probe', 'node_state_after', 'judging', 'line', 'record',
                  'node_state_before', 'total'):
        assert phase in t, (phase, t)
    assert sum(t.get(p, 0) for p in SEQUENTIAL) == pytest.approx(
        t['total'], abs=0.02)
    # the probe's own lines, as the program printed them (the stand-in
    # prints the captured copy matrix: its init and copies)
    text = open(LINKS_FIXTURE).read()
    init = float(re.search(r'^# init ([0-9.]+) s', text, re.M)[1])
    copies = float(re.search(r'^# done .* in ([0-9.]+) s', text, re.M)[1])
    assert (t['probe_init'], t['probe_copies']) == (init, copies)
    assert t['probe_all_reduce'] == pytest.approx(
        t['probe_program'] - init - copies, abs=0.002)
    main = doc['probes'][0]
    assert main['program_s'] == t['probe_program']
    assert t['probe_outside'] == pytest.approx(
        main['seconds'] - main['program_s'], abs=0.002)
    # the probe phase is the process's wall time, counted once
    assert t['probe'] >= main['seconds']


def test_the_apart_path_has_no_program_lines(tmp_path):
    rc, line, doc, run = probe_hook(tmp_path, False)
    assert rc == 0, line
    assert 'probe' in doc['timings'] and \
        'probe_program' not in doc['timings']


def _table(tmp_path, docs):
    runs = tmp_path / 'runs.tsv'
    with open(runs, 'w') as fp:
        for name, doc in docs:
            kind, label, i = re.fullmatch(r'(one-process|apart)-(.*)-(\d+)',
                                          name).groups()
            fp.write(f'{kind}\t{label}\t{i}\t{doc["code"]}\t'
                     f'{doc["seconds"]:.3f}\t{doc["line"]}\n')
    p = subprocess.run([sys.executable, os.path.join(
        REPO, 'benchmarks', 'device', '_hook_timing_table.py'), str(runs),
        str(tmp_path), '2'], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_outside_the_probes_counts_the_one_process_once(tmp_path):
    """The device capture's --json files (the wall: the hook's own
    seconds): the one process stood behind both probes of its try."""
    docs = []
    for path in sorted(glob.glob(os.path.join(KEEP, '*-0,1-*.json'))):
        name = os.path.basename(path)[:-5]
        doc = json.load(open(path))
        docs.append((name, doc))
        (tmp_path / f'{name}.json').write_text(json.dumps(doc))
    out = _table(tmp_path, docs)
    one = [d for n, d in docs if n.startswith('one-process')]
    want = statistics.median(d['seconds'] - max(p['seconds'] for p in
                                                d['probes']) for d in one)
    row = [ln for ln in out.splitlines() if '| one-process |' in ln][0]
    assert float(row.split('|')[6]) == pytest.approx(want, abs=0.006)
    assert want > 0.3


def test_the_table_gives_the_phase_medians(tmp_path):
    docs = []
    for i, probe in enumerate((1.0, 1.2, 1.4), 1):
        doc = {'code': 0, 'seconds': probe + 0.5, 'line': 'HEALTHY: x',
               'probe_path': 'one process: p', 'probes': [],
               'timings': {'site': 0.1 * i, 'probe': probe}}
        docs.append((f'one-process-0,1-{i}', doc))
        (tmp_path / f'one-process-0,1-{i}.json').write_text(json.dumps(doc))
    out = _table(tmp_path, docs)
    assert '| 0,1 | one-process | 0.200 | 1.200 |' in out
    row = [ln for ln in out.splitlines() if ln.startswith('| 2 (0,1) |')][0]
    assert float(row.split('|')[6]) == pytest.approx(0.5)


def test_the_program_lines_of_each_try_add_up():
    """Two tries of the one process: each one's own lines (its ``# init``,
    ``# done ... in``, ``# nccl init``, ``# probe total``) added."""
    from ccl_health.hook.probe import LinksProbe, Probe
    from ccl_health.hook.timings import Clock, probe_phases
    clock = Clock()
    tries = []
    for init, copies, nccl, total, wall in ((0.5, 0.01, 0.3, 1.2, 1.6),
                                            (0.6, 0.02, 0.4, 1.4, 1.9)):
        main = Probe((0, 1), 1 << 30, seconds=wall, program_s=total,
                     nccl_init_s=nccl)
        links = LinksProbe((0, 1), seconds=wall, init_s=init, copy_s=copies)
        tries.append([main, links])
    probe_phases(clock, tries)
    t = clock.phases
    assert t['probe_init'] == pytest.approx(1.1)
    assert t['probe_copies'] == pytest.approx(0.03)
    assert t['probe_nccl_init'] == pytest.approx(0.7)
    assert t['probe_program'] == pytest.approx(2.6)
    assert t['probe_all_reduce'] == pytest.approx(2.6 - 1.1 - 0.03)
    assert t['probe_outside'] == pytest.approx(0.4 + 0.5)


def test_the_overlap_table_compares_the_two_modes(tmp_path):
    """benchmarks/device/_probe_overlap_table.py on the device's probe
    output (2x H200), once as -O 0 printed it and once with slower copies
    and a '# nccl init' line as -O 1 would print them."""
    text = open(os.path.join(KEEP, 'probe-0,1.txt')).read()
    rank1 = [ln for ln in text.splitlines() if '#  Rank  1 ' in ln][0]
    (tmp_path / 'overlap-O0-1.txt').write_text(text.replace(
        rank1, rank1 + '\n# nccl init 0.400 s') + '# wall 1.71 s\n')
    slow = text.replace(' 389.74\n', ' 300.00\n').replace(
        'probe total 1.277 s', 'probe total 0.900 s').replace(
        rank1, rank1 + '\n# nccl init 0.420 s (during the copy matrix)')
    (tmp_path / 'overlap-O1-1.txt').write_text(slow)
    (tmp_path / 'overlap-O1-2.txt').write_text('# error: it stopped\n')
    p = subprocess.run([sys.executable, os.path.join(
        REPO, 'benchmarks', 'device', '_probe_overlap_table.py')] +
        sorted(str(f) for f in tmp_path.iterdir()), capture_output=True,
        text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rows = [ln for ln in p.stdout.splitlines() if re.match(r'\| \d \|', ln)]
    assert rows == [
        '| 0 | 1 | 1 | 389.9 | 389.7 | 0.400 | 1.277 | 1.710 |',
        '| 1 | 2 | 1 | 345.0 | 300.0 | 0.420 | 0.900 |  |']
