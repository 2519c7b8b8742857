"""NVLink error counters and link states in one NVML call per GPU each
(issue 42: the node's state is read before and after the probes, on the
hook's path): ``nvmlDeviceGetFieldValues`` with the per-link fields of
links 0-11, as DCGM reads them; links 12-17 (an H100 / H200 has 18) and
any field NVML does not answer are read link by link with
``nvmlDeviceGetNvLinkErrorCounter``.  The links themselves: their count
and every link's state (scopeId = the link) in one field read; a state not
answered asked with ``nvmlDeviceGetNvLinkState``, and every link so where
the count is not answered (old drivers, and the old recordings, which hold
only per-link calls).  The oracle: the counters and states read link by
link (the old reader's calls, the recording's own answers), and the field
ids looked up by their names in nvidia-ml-py (pynvml), not taken from the
reader."""

import glob
import json
import os

import pytest

from conftest import REPO

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


def pynvml_name(name):
    return getattr(pytest.importorskip('pynvml'), name)


def link_active(gpu, link):
    """Links 2 and 9 of GPU 1 are down (their state 0), the rest up."""
    return not (gpu == 1 and link in (2, 9))


def reading(ngpus=2, nlinks=18, fields='all', unanswered=(), states=None,
            count=None):
    """NVML's answers: every link active but :func:`link_active`'s, every
    state and counter answered link by link; ``fields``: 'all' (the field
    call answers links 0-11), or 'error' (the call fails: NOT_SUPPORTED);
    ``unanswered``: (gpu, link, counter) whose field NVML answers
    NOT_SUPPORTED.  ``states``: None (an old recording: no call for the
    links' count and states), 'error' (that call fails), or a dict
    (gpu, link) -> the state field's answer for that link where it is
    not the link's state (an int: another NVML_NVLINK_STATE_*; 'error':
    NOT_SUPPORTED); ``count``: the count field's answer (default
    ``nlinks``; 'error': NOT_SUPPORTED)."""
    calls = [{'call': 'nvmlInit', 'args': [], 'ok': None},
             {'call': 'nvmlDeviceGetCount', 'args': [], 'ok': ngpus},
             {'call': 'nvmlShutdown', 'args': [], 'ok': None}]
    for g in range(ngpus):
        calls.append({'call': 'nvmlDeviceGetUUID', 'args': [g],
                      'ok': f'GPU-{g}'})
        if states is not None:
            calls.append(state_fields(g, nlinks, states, count))
        for link in range(nlinks):
            calls.append({'call': 'nvmlDeviceGetNvLinkState',
                          'args': [g, link],
                          'ok': int(link_active(g, link))})
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
            if not link_active(g, link):
                continue             # the reader asks the active links'
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


def state_fields(g, nlinks, states, count=None):
    """The recorded answer of GPU ``g``'s one field call for its links:
    the count field and the state field of links 0-17 (scopeId = the
    link), as nvidia-ml-py answers it: one nvmlFieldValue_t per field
    asked, NVML's own return in each (a link beyond the GPU's count:
    INVALID_ARGUMENT)."""
    count_id = pynvml_name('NVML_FI_DEV_NVLINK_LINK_COUNT')
    state_id = pynvml_name('NVML_FI_DEV_NVLINK_GET_STATE')
    active = pynvml_name('NVML_NVLINK_STATE_ACTIVE')
    inactive = pynvml_name('NVML_NVLINK_STATE_INACTIVE')
    asked = [count_id] + [[state_id, link] for link in range(18)]
    if states == 'error':
        return {'call': 'nvmlDeviceGetFieldValues', 'args': [g, asked],
                'error': nvml.NOT_SUPPORTED, 'text': 'Not Supported'}
    count = nlinks if count is None else count
    answer = [{'fieldId': count_id, 'scopeId': 0, 'valueType': 1,
               'nvmlReturn': 3 if count == 'error' else 0,
               'value': {'uiVal': 0 if count == 'error' else count}}]
    for link in range(18):
        said = states.get((g, link))
        ret = 0 if link < nlinks and said != 'error' else \
            3 if said == 'error' else nvml.INVALID_ARGUMENT
        value = said if isinstance(said, int) else \
            active if link_active(g, link) else inactive
        answer.append({'fieldId': state_id, 'scopeId': link,
                       'valueType': 1, 'nvmlReturn': ret,
                       'value': {'uiVal': value if ret == 0 else 0}})
    return {'call': 'nvmlDeviceGetFieldValues', 'args': [g, asked],
            'ok': answer}


def read(doc):
    api = nvml.Recording(nvml.RecordedNvml(doc))
    state = nvml.read(api=api)
    counts = {}
    for c in api.calls:
        name = c['call']
        if name == 'nvmlDeviceGetFieldValues':   # which of the two
            name += ':links' if c['args'][1][0] == pynvml_name(
                'NVML_FI_DEV_NVLINK_LINK_COUNT') else ':counters'
        counts[name] = counts.get(name, 0) + 1
    return state, counts


def every_counter(state):
    return {(g.index, ln.index, name): count for g in state.gpus
            for ln in g.nvlinks for name, count in ln.errors.items()}


def oracle(ngpus=2, nlinks=18):
    return {(g, link, NAMES[c]): value(g, link, c) for g in range(ngpus)
            for link in range(nlinks) for c in COUNTERS
            if link_active(g, link)}


def links_of(state):
    return {g.index: [(ln.index, ln.active) for ln in g.nvlinks]
            for g in state.gpus}


def links_oracle(ngpus=2, nlinks=18):
    """The links as NVML answers them link by link (the recording)."""
    return {g: [(link, link_active(g, link)) for link in range(nlinks)]
            for g in range(ngpus)}


def test_nvlink_counters_of_links_0_to_11_come_in_one_call_per_gpu():
    state, counts = read(reading())
    assert every_counter(state) == oracle()
    assert counts['nvmlDeviceGetFieldValues:counters'] == 2
    # only links 12-17 link by link: 2 GPUs x 6 links x 5 counters (was
    # 2 x 18 x 5 = 180)
    assert counts['nvmlDeviceGetNvLinkErrorCounter'] == 2 * 6 * 5


def test_a_gpu_of_12_links_reads_its_counters_in_one_call():
    state, counts = read(reading(ngpus=1, nlinks=12))
    assert every_counter(state) == oracle(1, 12)
    assert counts['nvmlDeviceGetFieldValues:counters'] == 1
    assert 'nvmlDeviceGetNvLinkErrorCounter' not in counts


def test_a_field_not_answered_is_read_link_by_link():
    state, counts = read(reading(unanswered={(1, 3, 1), (0, 0, 4)}))
    assert every_counter(state) == oracle()
    assert counts['nvmlDeviceGetNvLinkErrorCounter'] == 2 * 6 * 5 + 2


def test_no_field_call_reads_every_link_as_before():
    state, counts = read(reading(fields='error'))
    assert every_counter(state) == oracle()
    assert counts['nvmlDeviceGetNvLinkErrorCounter'] == (2 * 18 - 2) * 5


# -- the links and their states in one field read per GPU ------------------

def test_the_link_fields_are_nvmls_names():
    """The count and state fields, and the states read as active or not,
    are nvidia-ml-py's (nvml.h's) by name."""
    assert nvml.NVLINK_LINK_COUNT == pynvml_name(
        'NVML_FI_DEV_NVLINK_LINK_COUNT')
    assert nvml.NVLINK_GET_STATE == pynvml_name(
        'NVML_FI_DEV_NVLINK_GET_STATE')
    assert nvml.NVLINK_FIELD_STATES == {
        pynvml_name('NVML_NVLINK_STATE_INACTIVE'): False,
        pynvml_name('NVML_NVLINK_STATE_ACTIVE'): True}
    # the states that say something else are asked link by link
    for other in ('NVML_NVLINK_STATE_SLEEP',
                  'NVML_NVLINK_STATE_ACTIVE_TRAFFIC_DISABLED'):
        assert pynvml_name(other) not in nvml.NVLINK_FIELD_STATES


@pytest.mark.parametrize('nlinks', [18, 12])
def test_link_states_come_in_one_call_per_gpu(nlinks):
    """The same links, states and counters as the link-by-link reading of
    the same answers (the recording's own per-link answers: the oracle),
    with no nvmlDeviceGetNvLinkState call (was 18 per GPU on 18 links,
    13 on 12: until one errors, at most 18)."""
    doc = reading(nlinks=nlinks, states={})
    state, counts = read(doc)
    old, old_counts = read(reading(nlinks=nlinks))      # per link, as before
    assert links_of(state) == links_oracle(2, nlinks) == links_of(old)
    assert [g.nvlinks for g in state.gpus] == [g.nvlinks for g in old.gpus]
    assert every_counter(state) == oracle(2, nlinks)
    assert counts['nvmlDeviceGetFieldValues:links'] == 2
    assert 'nvmlDeviceGetNvLinkState' not in counts
    assert old_counts['nvmlDeviceGetNvLinkState'] == 2 * min(nlinks + 1,
                                                             18)


def test_a_state_not_answered_or_unknown_is_asked_alone():
    """A link whose state field NVML does not answer, or answers with a
    state other than inactive / active (SLEEP), is asked with
    nvmlDeviceGetNvLinkState: the link's state is the per-link answer."""
    sleep = pynvml_name('NVML_NVLINK_STATE_SLEEP')
    state, counts = read(reading(states={(0, 5): 'error', (1, 2): sleep}))
    assert links_of(state) == links_oracle()
    assert counts['nvmlDeviceGetNvLinkState'] == 2


@pytest.mark.parametrize('how', ['old-recording', 'call-fails',
                                 'count-unanswered', 'count-zero'])
def test_no_count_reads_every_link_one_by_one_as_before(how):
    """The count not answered (an old recording: no such call; the call
    fails; the count field NOT_SUPPORTED or 0): every link asked one by
    one (until one errors, at most 18), exactly the calls of the reader
    before."""
    states, count = {'old-recording': (None, None), 'call-fails':
                     ('error', None), 'count-unanswered': ({}, 'error'),
                     'count-zero': ({}, 0)}[how]
    state, counts = read(reading(states=states, count=count))
    assert links_of(state) == links_oracle()
    assert every_counter(state) == oracle()
    assert counts['nvmlDeviceGetNvLinkState'] == 2 * 18


def test_the_old_recordings_are_answered_exactly_as_before():
    """The device recordings (tests/fixtures/device/nodestate: an H100 of
    driver 580 without NVLink, recorded by the per-link reader) hold no
    field call for the links: the reader falls back and makes exactly the
    per-link calls they recorded, to the state they recorded ('nvlink'
    not supported, no link)."""
    files = sorted(glob.glob(os.path.join(
        REPO, 'tests', 'fixtures', 'device', 'nodestate', '*', '*.json')))
    docs = {p: json.load(open(p)) for p in files}
    docs = {p: d for p, d in docs.items() if 'readings' in d}
    assert len(docs) >= 8
    for path, doc in docs.items():
        for i, rd in enumerate(doc['readings']):
            recorded = [c for c in rd['calls']
                        if c['call'] == 'nvmlDeviceGetNvLinkState']
            api = nvml.Recording(nvml.RecordedNvml(doc, i))
            state = nvml.read(api=api)
            asked = [c for c in api.calls
                     if c['call'] == 'nvmlDeviceGetNvLinkState']
            assert [(c['args'], c.get('error')) for c in asked] == \
                [(c['args'], c.get('error')) for c in recorded], path
            assert all(g.nvlinks == [] and 'nvlink' in g.unsupported
                       for g in state.gpus), path


def test_nvidia_ml_py_passes_each_links_scope(monkeypatch):
    """Through nvidia-ml-py's own nvmlDeviceGetFieldValues (its ctypes
    array of nvmlFieldValue_t, a (fieldId, scopeId) pair per field asked),
    the C function stood in for: every state field reaches NVML with its
    link as scopeId, and the answer read back gives each link's state."""
    import ctypes
    pynvml = pytest.importorskip('pynvml')
    seen = []

    def c_field_values(handle, count, ref):
        values = ref._obj
        assert count.value == len(values)
        for v in values:
            seen.append((v.fieldId, v.scopeId))
            v.nvmlReturn, v.valueType = 0, pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
            if v.fieldId == pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT:
                v.value.uiVal = 18
            elif v.fieldId == pynvml.NVML_FI_DEV_NVLINK_GET_STATE:
                v.value.uiVal = int(link_active(1, v.scopeId))
        return 0
    monkeypatch.setattr(pynvml, '_nvmlGetFunctionPointer',
                        lambda name: c_field_values)
    monkeypatch.setattr(pynvml, 'nvmlDeviceGetHandleByIndex',
                        lambda i: ctypes.c_void_p(i))
    count, known = nvml.link_states(nvml.LiveNvml(pynvml), 1)
    assert seen == [(pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT, 0)] + [
        (pynvml.NVML_FI_DEV_NVLINK_GET_STATE, link) for link in range(18)]
    assert count == 18
    assert known == {link: link_active(1, link) for link in range(18)}
