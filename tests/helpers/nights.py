"""Nights of the nightly's soak: the recorded device series (raw
nccl-tests outputs) recorded as the suite records them, the keys and sizes
they hold, and what a mail told, read back from its lines."""

import datetime
import os
import re

from ccl_health import news
from ccl_health.db import recorder, store
from ccl_health.evidence import nccltests
from ccl_health.judge import reference
from ccl_health.rehearsal import scenarios

A = 'AllReduceSweep %transport=net-socket %collective=all_reduce ' \
    '%algo=default'
B = 'AllReduceSweep %transport=intra %collective=all_reduce %algo=default'
WHERE = {A: 'local/gpu/net-socket all_reduce 1n/2r',
         B: 'local/gpu/intra all_reduce 1n/2r'}
SIZES = ('64MiB', '128MiB', '256MiB')
TOL = 0.15
T0 = datetime.datetime(2026, 12, 1, 2, 30, tzinfo=datetime.timezone.utc)


_SIZE = r'(\d+[KMG]?i?B)'
_PARSE = (
    (re.compile(rf'^recovered: (DRIFT|DROP|INTERMITTENT) (.+?) {_SIZE}: '),
     lambda m: ('recovered', m[1].lower(), m[2], m[3])),
    (re.compile(r'^recovered: (AllReduceSweep .+?): '),
     lambda m: ('recovered', m[1])),
    (re.compile(rf'^(DRIFT|DROP|INTERMITTENT) (.+?) {_SIZE}: '),
     lambda m: (m[1].lower(), m[2], m[3])),
    (re.compile(rf'^DROP (.+?) in run \S+: \d+ sizes below history '
                rf'\({_SIZE}\.\.{_SIZE}\)'),
     lambda m: ('drop', m[1], f'{m[2]}..{m[3]}')),
    (re.compile(r'^never told, from run (\S+) \((.+?)\): nothing '
                r'(measured|recorded)'),
     lambda m: ('lost night', m[2])),
    (re.compile(r'^([A-Z][A-Z-]+) (AllReduceSweep .+?): '),
     lambda m: ('failing', m[1].lower(), m[2])),
)


def told(lines):
    """The items a mail told: {(kind, ...)}; a WORSE line gives one item
    per size, a ``not measured`` line one per case."""
    out = []
    for ln in lines[1:]:
        ln = ln.strip()
        if ln.startswith(('changed: ', 'page: ', 'could not publish: ')) or \
                re.match(r'^never told, from run \S+ \([^)]*\):$', ln):
            continue
        m = re.match(r'^WORSE ([A-Z-]+) (AllReduceSweep .+?): (.*)$', ln)
        if m:
            out += [('worse', m[2], size) for size in re.findall(
                rf'(?:^|\); ){_SIZE} -\d+ % ', m[3])]
            continue
        m = re.match(r'^not measured \((.*)\): (.*)$', ln)
        if m:
            out += [('not measured', name) for name in m[2].split(', ')]
            continue
        for rx, item in _PARSE:
            m = rx.match(ln)
            if m:
                out.append(item(m))
                break
        else:
            raise AssertionError(f'a mail line the soak cannot read: {ln!r}')
    assert len(out) == len(set(out)), f'told twice in one mail: {lines}'
    return set(out)


def raw_runs(folder):
    """[(label, raw nccl-tests output)] of a recorded device series."""
    raw = os.path.join(folder, 'raw')
    out = []
    for name in sorted(os.listdir(raw)):
        with open(os.path.join(raw, name)) as fp:
            out.append((name[4:-4], fp.read()))
    return out


def level(runs):
    """The reference of a key: the median busbw per size of ``runs``."""
    import statistics
    per = {}
    for text in runs:
        for r in nccltests.parse_text(text).rows:
            per.setdefault(r.size, []).append(r.busbw)
    return {s: round(statistics.median(v), 2) for s, v in per.items()}


class Series:
    """The cases of one key, recorded as the suite records them: the raw
    output parsed, judged against the key's reference per size
    (:func:`ccl_health.db.recorder.sizes_from_sweep`), the case verdict
    the judge's (:func:`ccl_health.db.recorder.case_verdict`)."""

    def __init__(self, name, transport, folder):
        self.name, self.transport = name, transport
        runs = raw_runs(folder)
        self.runs = {}
        for label, text in runs:
            self.runs.setdefault(label, []).append(text)
        self.ref = reference.Entry(
            transport, 'all_reduce', 1, 2, TOL, 'the soak: median of the '
            'recorded healthy runs', level(self.runs['healthy']))

    def case(self, run_id, n, verdict='pass', label='healthy', i=0,
             factor=1.0, env=None, reason=''):
        sizes = []
        if verdict == 'pass':
            text = self.runs[label][i % len(self.runs[label])]
            if factor != 1.0:
                text = scenarios.scaled(text, factor)
            sizes = recorder.sizes_from_sweep(nccltests.parse_text(text),
                                              self.ref)
            verdict = recorder.case_verdict('pass', sizes)
        return store.CaseRecord(
            run_id, self.name, verdict, time=(T0 + datetime.timedelta(
                days=n)).isoformat(), system='local', partition='gpu',
            nodes=1, ranks=2, collective='all_reduce',
            transport=self.transport, proven=self.transport, nodelist='h100',
            env=dict(env or {}), sizes=sizes,
            reason=reason or (f'{verdict}: as recorded in the soak'
                              if verdict != 'pass' else ''))


def rid(n):
    return f'{news.RUN_PREFIX}soak-{n:03d}'
