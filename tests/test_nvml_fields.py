"""NVLink error counters in one NVML call per GPU (issue 42: the node's
state is read before and after the probes, on the hook's path):
``nvmlDeviceGetFieldValues`` with the per-link fields of links 0-11, as
DCGM reads them; links 12-17 (an H100 / H200 has 18) and any field NVML
does not answer are read link by link with ``nvmlDeviceGetNvLinkErrorCounter``.
The oracle: the counters read link by link (the old reader's calls), and
the field ids looked up by their names in nvidia-ml-py (pynvml), not
taken from the reader."""

import pytest

from ccl_health.evidence.nodestate import nvml

#: nvmlNvLinkErrorCounter_t (nvml.h) and the name of each in NVML's fields
COUNTERS = {0: 'REPLAY', 1: 'RECOVERY', 2: 'CRC_FLIT', 3: 'CRC_DATA',
            4: 'ECC_DATA'}
NAMES = {0: 'replay', 1: 'recovery', 2: 'crc_flit', 3: 'crc_data',
         4: 'ecc_data'}


def value(gpu, link, counter):
    """A different count for every GPU, link and counter."""
    return 1000 * gpu + 10 * link + counter


def field_id(link, counter):
    pynvml = pytest.importorskip('pynvml')
    return getattr(pynvml, f'NVML_FI_DEV_NVLINK_{COUNTERS[counter]}_'
                           f'ERROR_COUNT_L{link}')


def reading(ngpus=2, nlinks=18, fields='all', unanswered=()):
    """NVML's answers: every link active, every counter answered link by
    link; ``fields``: 'all' (the field call answers links 0-11), or
    'error' (the call fails: NOT_SUPPORTED); ``unanswered``: (gpu, link,
    counter) whose field NVML answers NOT_SUPPORTED."""
    calls = [{'call': 'nvmlInit', 'args': [], 'ok': None},
             {'call': 'nvmlDeviceGetCount', 'args': [], 'ok': ngpus},
             {'call': 'nvmlShutdown', 'args': [], 'ok': None}]
    for g in range(ngpus):
        calls.append({'call': 'nvmlDeviceGetUUID', 'args': [g],
                      'ok': f'GPU-{g}'})
        for link in range(nlinks):
            calls.append({'call': 'nvmlDeviceGetNvLinkState',
                          'args': [g, link], 'ok': 1})
            for c in COUNTERS:
                calls.append({'call': 'nvmlDeviceGetNvLinkErrorCounter',
                              'args': [g, link, c], 'ok': value(g, link, c)})
        calls.append({'call': 'nvmlDeviceGetNvLinkState',
                      'args': [g, nlinks], 'error': nvml.INVALID_ARGUMENT,
                      'text': 'Invalid Argument'})
        # the reader asks the fields link by link, the counters in NVML's
        # order; the answer is keyed by exactly what it asks
        ids, answer = [], []
        for link in range(min(nlinks, 12)):
            for c in (0, 1, 2, 3, 4):
                fid = field_id(link, c)
                ids.append(fid)
                ok = (g, link, c) not in unanswered
                answer.append({'fieldId': fid, 'scopeId': 0,
                               'valueType': 3, 'nvmlReturn': 0 if ok else 3,
                               'value': {'ullVal': value(g, link, c) if ok
                                         else 0}})
        if fields == 'all':
            calls.append({'call': 'nvmlDeviceGetFieldValues',
                          'args': [g, ids], 'ok': answer})
        else:
            calls.append({'call': 'nvmlDeviceGetFieldValues',
                          'args': [g, ids], 'error': nvml.NOT_SUPPORTED,
                          'text': 'Not Supported'})
    return {'readings': [{'calls': calls}]}


def read(doc):
    api = nvml.Recording(nvml.RecordedNvml(doc))
    state = nvml.read(api=api)
    counts = {}
    for c in api.calls:
        counts[c['call']] = counts.get(c['call'], 0) + 1
    return state, counts


def every_counter(state):
    return {(g.index, ln.index, name): count for g in state.gpus
            for ln in g.nvlinks for name, count in ln.errors.items()}


def oracle(ngpus=2, nlinks=18):
    return {(g, link, NAMES[c]): value(g, link, c) for g in range(ngpus)
            for link in range(nlinks) for c in COUNTERS}


def test_nvlink_counters_of_links_0_to_11_come_in_one_call_per_gpu():
    state, counts = read(reading())
    assert every_counter(state) == oracle()
    assert counts['nvmlDeviceGetFieldValues'] == 2
    # only links 12-17 link by link: 2 GPUs x 6 links x 5 counters (was
    # 2 x 18 x 5 = 180)
    assert counts['nvmlDeviceGetNvLinkErrorCounter'] == 2 * 6 * 5


def test_a_gpu_of_12_links_reads_its_counters_in_one_call():
    state, counts = read(reading(ngpus=1, nlinks=12))
    assert every_counter(state) == oracle(1, 12)
    assert counts['nvmlDeviceGetFieldValues'] == 1
    assert 'nvmlDeviceGetNvLinkErrorCounter' not in counts


def test_a_field_not_answered_is_read_link_by_link():
    state, counts = read(reading(unanswered={(1, 3, 1), (0, 0, 4)}))
    assert every_counter(state) == oracle()
    assert counts['nvmlDeviceGetNvLinkErrorCounter'] == 2 * 6 * 5 + 2


def test_no_field_call_reads_every_link_as_before():
    state, counts = read(reading(fields='error'))
    assert every_counter(state) == oracle()
    assert counts['nvmlDeviceGetNvLinkErrorCounter'] == 2 * 18 * 5
