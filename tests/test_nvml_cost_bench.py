"""benchmarks/device/nvml_cost.sh's CPU parts (issue 42): the shell
script parses, and its Python (_nvml_cost.py) measures and tables on a
stand-in nvidia-ml-py of two GPUs of 18 NVLinks (two of them down): the
old way (NVML per reading, links one by one) makes the per-link calls,
the new way none, and both give the same links."""

import importlib.util
import json
import os
import subprocess
import sys
import types

import pytest

from conftest import REPO

BENCH = os.path.join(REPO, 'benchmarks', 'device')


def bench():
    spec = importlib.util.spec_from_file_location(
        '_nvml_cost', os.path.join(BENCH, '_nvml_cost.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _Err(Exception):
    def __init__(self, value):
        super().__init__(f'NVML error {value}')
        self.value = value


def down(gpu, link):
    return gpu == 1 and link in (4, 11)


def stand_in():
    """nvidia-ml-py's functions the benchmark and the reader call, as
    pynvml answers them (field values as nvmlFieldValue_t's fields)."""
    real = pytest.importorskip('pynvml')
    lib = types.ModuleType('pynvml')
    count = {'n': 0}

    def init():
        count['n'] += 1

    def shutdown():
        count['n'] -= 1

    def state(h, link):
        if link >= 18:
            raise _Err(2)
        return 0 if down(h[1], link) else 1

    def fields(h, ids):
        out = []
        for fid in ids:
            fid, scope = fid if isinstance(fid, tuple) else (fid, 0)
            ok, value = 0, 0
            if fid == real.NVML_FI_DEV_NVLINK_LINK_COUNT:
                value = 18
            elif fid == real.NVML_FI_DEV_NVLINK_GET_STATE:
                value = 0 if down(h[1], scope) else 1
            else:
                ok = 3            # the error counters: NOT_SUPPORTED here
            out.append({'fieldId': fid, 'scopeId': scope, 'valueType': 1,
                        'nvmlReturn': ok, 'value': {'uiVal': value}})
        return out
    lib.__dict__.update(
        NVMLError=_Err, nvmlInit=init, nvmlShutdown=shutdown,
        nvmlDeviceGetCount=lambda: 2,
        nvmlSystemGetNVMLVersion=lambda: '13.580',
        nvmlSystemGetDriverVersion=lambda: '580.1',
        nvmlDeviceGetHandleByIndex=lambda i: ('h', i),
        nvmlDeviceGetName=lambda h: 'NVIDIA H200',
        nvmlDeviceGetUUID=lambda h: f'GPU-{h[1]}',
        nvmlDeviceGetNvLinkState=state, nvmlDeviceGetFieldValues=fields)
    return lib, count


def test_the_script_parses():
    subprocess.run(['bash', '-n', os.path.join(BENCH, 'nvml_cost.sh')],
                   check=True)


def test_measure_and_table_on_a_stand_in(monkeypatch, tmp_path):
    lib, count = stand_in()
    monkeypatch.setitem(sys.modules, 'pynvml', lib)
    mod = bench()
    doc = mod.measure(reps=3)
    assert count['n'] == 0                      # every start stopped
    # written and read back as the script does
    (tmp_path / 'c.json').write_text(json.dumps(doc))
    doc = json.loads((tmp_path / 'c.json').read_text())
    links = [[k, not down(g, k)] for g in (0, 1) for k in range(18)]
    assert [ln for g in doc['gpus'] for ln in g['batched']] == links
    assert [ln for g in doc['gpus'] for ln in g['per_link']] == links
    assert [g['per_link_calls'] for g in doc['gpus']] == [18, 18]
    assert doc['same_links'] == [True, True]
    calls = doc['calls']
    assert calls['full reading, old way']['nvmlDeviceGetNvLinkState'] == \
        2 * 18
    assert 'nvmlDeviceGetNvLinkState' not in calls['full reading, new way']
    for what in ('cold', 'NVML held'):
        assert len(doc['times'][f'init+shutdown {what}' if what == 'cold'
                                else f'init+shutdown, {what}']) == 3
    text = mod.table(doc)
    rows = [r for r in text.splitlines() if r.startswith('| ')]
    assert len(rows) == 2 + len(doc['times']) + 2
    assert rows[-2].startswith('| 0 | 18 (18) | 18, ')
    assert rows[-1].startswith('| 1 | 18 (16) | 18, ')
    assert rows[-2].endswith('| - | yes, whole reading same | 30, ' +
                             rows[-2].rsplit(', ', 1)[1])
    # GPU 1's links 12-17 all up: 6 x 5 counters
    assert [g['counters_calls'] for g in doc['gpus']] == [30, 30]
    assert 'yes, whole reading same' in rows[-1]
    # the command line of the script's two steps
    out = subprocess.run([sys.executable, os.path.join(BENCH,
                                                       '_nvml_cost.py'),
                          'table', str(tmp_path / 'c.json')],
                         capture_output=True, text=True, check=True).stdout
    assert out == text


def test_the_table_says_where_the_links_disagree():
    mod = bench()
    doc = {'reps': 1, 'times': {'init+shutdown cold': [0.001]}, 'calls': {},
           'gpus': [{'index': 0, 'model': 'X', 'per_link': [[0, True],
                                                           [1, True]],
                     'per_link_calls': 3, 'batched': [[0, True], [1, False]],
                     'asked_alone': [], 'per_link_s': [0.001],
                     'batched_s': [0.0005]},
                    {'index': 1, 'model': 'X', 'per_link': [],
                     'per_link_calls': 1, 'batched': None,
                     'asked_alone': None, 'per_link_s': [0.001],
                     'batched_s': [0.0005]}]}
    text = mod.table(doc)
    assert '| NO |' in text
    assert 'count not answered: per link' in text
