"""The field matrix (issue 27): what real sites run never fails a healthy
node, and nothing broken passes.

Every healthy real output the project holds (the public outputs of
tests/fixtures/published/ that their authors show as healthy runs, and the
project's own healthy device captures of tests/fixtures/device/cap/) goes
through every door that judges a case: ``scripts/explain``, the sweep's
judging path, ingest, a fleet step and, for one-node outputs, the node
health hook's judging path.  Each output is judged against a reference made
for its own key (half its measured busbw at each size, the way a site's
calibration at a lower level would): a door may say ``pass`` or that it
could not check (no debug log proves the transport), never a failing
verdict.  Then each output is damaged in every way
tests/helpers/mutations.py knows
(cut, non-finite, wrong results, a failure line, impossible numbers, a
repeated or missing size, a fatal WARN ...): no door may pass it.

The published outputs are the fast ones that a fixed ceiling failed: a
GB200 NVL72 rack at 847 GB/s, 8 x H200 at 477 GB/s with NVLS, 2 nodes x 8
H200 over RoCE at 486 GB/s, 2 nodes x 8 H100 (A3 Mega), 2 x p4d over EFA
with GPUDirect RDMA, MI300X on one and two nodes."""

import glob
import math
import os
import random

import pytest
import yaml

from helpers import mutations
from conftest import REPO

from ccl_health import CclHealthError, explain
from ccl_health.db import recorder
from ccl_health.evidence import debuglog, nccltests
from ccl_health.sitedata.fleetconfig import FleetConfig
from ccl_health.fleet.rounds import Raw, Step, judge_step
from ccl_health.hook import judging as hook_judging
from ccl_health.judge import reference
from ccl_health.judge.casejudge import judge
from ccl_health.sitedata import transports
from ccl_health.units import size_sweep

pytest.importorskip('reframe')
from ccl_health.rfm.sweep import sweep_evidence  # noqa: E402

PUB = os.path.join(REPO, 'tests', 'fixtures', 'published')
CAP = os.path.join(REPO, 'tests', 'fixtures', 'device', 'cap')

#: the published outputs whose authors show a healthy run (SOURCES.md says
#: where each comes from); the other published files are failures or logs
HEALTHY_PUBLISHED = [
    'nccl-debug_aws-libfabric_gdrdma_efa-p4d-2node.log',
    'nccl-tests_all_reduce_gb200-nvl72-1rack-72rank_excerpt_coreweave-'
    'nccl-tests.txt',
    'nccl-tests_all_reduce_h100-a3mega_2node-16rank.txt',
    'nccl-tests_all_reduce_h200-2node-16rank_485gbps_spectrum-x-roce-doc.txt',
    'nccl-tests_all_reduce_h200-8gpu-1node_476gbps_azure-h200-debian-doc.txt',
    'rccl-tests_all_reduce_mi300x_aac10_2node.txt',
    'rccl-tests_all_reduce_mi300x_aac8_1node.txt',
    # issue 31: ALCF Polaris (HPE Slingshot 11, cxi), 8 nodes x 4 A100
    # with NCCL_NET="AWS Libfabric" and with the default environment, and
    # 128 nodes x 4 A100 (512 ranks)
    'nccl-tests_all_reduce_polaris-8node-32rank_nccl-net-aws-libfabric-'
    'cxi.txt',
    'nccl-tests_all_reduce_polaris-8node-32rank_default-env.txt',
    'nccl-tests_all_reduce_polaris-128node-512rank.txt',
    # GKE A4 (2 pods x 8 B200) and A3 Ultra (2 pods x 1 H200) all_gather
    # over RoCE; Azure MI300X VF, one process driving 8 GPUs
    'nccl-tests_all_gather_b200-2pod-16rank_gib-roce_dranet-gke.txt',
    'nccl-tests_all_gather_h200-2pod-2rank_gib-roce_dranet-demo.txt',
    'rccl-tests_all_reduce_mi300x-vf-8gpu-1proc-ngpus8_azure_rccl-issue-'
    '1562.txt',
]
#: the project's own healthy device captures (one H200 node, 2 GPUs)
HEALTHY_CAPTURES = ['intra', 'net-socket', 'net-plugin', 'coll-all_gather',
                    'coll-alltoall', 'coll-broadcast', 'coll-reduce',
                    'coll-reduce_scatter', 'coll-sendrecv']

#: what no door may say of a healthy output
FAILING = {'below-reference', 'drop', 'fallback', 'wrong-results', 'hang',
           'crash', 'contended', 'aborted', 'build-failed', 'node-fault',
           'missing-gpu', 'incomplete'}
PASS = 'pass'


class Field:
    """One healthy real output and what is known of it."""

    def __init__(self, name, text, logs):
        self.name, self.text, self.logs = name, text, logs
        self.result = nccltests.parse(text)
        hosts = self.result.rank_hosts or self.result.hosts
        self.nodes = max(1, len(set(hosts))) if hosts else (
            2 if '2node' in name else 1)
        ranks = self.result.nranks or 1
        self.gpus_per_node = max(1, ranks // self.nodes)
        coll = (self.result.collective or 'all_reduce_perf')
        self.collective = coll[:-len('_perf')] if coll.endswith('_perf') \
            else coll
        ev = debuglog.read_evidence(logs)
        debuglog.feed_lines(ev, text.splitlines(), source=name)
        self.evidence = ev
        #: the transport its logs prove, else the one its shape needs
        proven = ev.proven()
        self.transport = str(proven) if proven else (
            'intra' if self.nodes == 1 else 'net-plugin-gdr')

    def sizes(self):
        r = self.result
        if getattr(r, 'header', None) and getattr(r.header, 'min_bytes',
                                                    None):
            return size_sweep(r.header.min_bytes, r.header.max_bytes,
                              r.header.step)
        return sorted({row.size for row in r.rows})

    def best(self, row):
        vals = [m.busbw for m in (row.out_of_place, row.in_place)
                if m is not None and m.busbw is not None
                and math.isfinite(m.busbw)]
        return max(vals) if vals else None


def fields():
    out = []
    for name in HEALTHY_PUBLISHED:
        with open(os.path.join(PUB, name), errors='replace') as fp:
            out.append(Field(f'published/{name}', fp.read(), []))
    for name in HEALTHY_CAPTURES:
        d = os.path.join(CAP, name)
        with open(os.path.join(d, 'stdout.txt'), errors='replace') as fp:
            text = fp.read()
        out.append(Field(f'cap/{name}', text,
                         sorted(glob.glob(os.path.join(d,
                                                       'nccl-debug.*.log')))))
    return out


FIELDS = {f.name: f for f in fields()}


def reference_for(field, tmp_path):
    """A reference file of ``field``'s own key: half its measured busbw at
    each size that measured one (sizes under 1 MiB are too noisy to hold a
    reference, as calibration leaves them out)."""
    busbw = {}
    for row in field.result.rows:
        b = field.best(row)
        if b and row.size >= (1 << 20):
            busbw[int(row.size)] = round(b / 2, 3)
    doc = {'system': 'field', 'partitions': {'gpu': {'entries': [{
        'transport': field.transport, 'collective': field.collective,
        'nodes': field.nodes, 'gpus_per_node': field.gpus_per_node,
        'tolerance': 0.1, 'source': f'test_field_matrix: half of '
        f'{field.name}', 'busbw': busbw}]}}}
    refdir = tmp_path / 'reference'
    refdir.mkdir(exist_ok=True)
    path = refdir / 'field.yaml'
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(refdir), str(path)


def through_every_door(tmp_path, field, text):
    """``{door: verdict name}`` of ``text`` (``field``'s output, maybe
    damaged), judged for ``field``'s key against its reference."""
    refdir, refpath = reference_for(field, tmp_path)
    out = tmp_path / 'output.txt'
    out.write_text(text)
    t = field.transport
    try:
        verdict = explain.explain(
            [str(out), *field.logs], system='field', partition='gpu',
            transport_asked=t, nodes=field.nodes,
            gpus_per_node=field.gpus_per_node, exit_status=0,
            collective=field.collective, refdir=refdir)['verdict']
    except CclHealthError:      # scripts/explain: one line, exit 2
        verdict = 'error: not an output'
    res = nccltests.parse(text)
    entry = reference.load_for_system(refdir, 'field').lookup(
        'gpu', t, field.collective, field.nodes, field.gpus_per_node)
    swept = judge(sweep_evidence(
        res, 0, entry, what=f'{field.collective}_perf', transport=t,
        collective=field.collective, nodes=field.nodes,
        gpus_per_node=field.gpus_per_node, algo='default',
        sizes_run=field.sizes(), exact=True, log_paths=field.logs,
        stdout_path=str(out)))
    ingested = recorder.case_verdict(
        str(swept.verdict), recorder.sizes_from_sweep(res, entry))
    got = {'explain': verdict, 'sweep': str(swept.verdict),
           'ingest': ingested}
    if field.collective == 'all_reduce':
        cfg = FleetConfig(transport=t, tasks_per_node=field.gpus_per_node,
                          reference=refpath, reference_partition='gpu',
                          prove_transport=True)
        nodes = tuple(f'n{i}' for i in range(field.nodes))
        kind = 'pair' if field.nodes == 2 else 'group'
        size = max(r.size for r in field.result.rows)
        got['fleet'] = str(judge_step(
            Raw(Step(kind, nodes, 60), 0, text, debug_logs=field.logs),
            size, 60, cfg)[0])
        if field.nodes == 1 and t == 'intra':
            # the hook's probe: one all_reduce at its largest size
            hook_entry = reference.load_for_system(refdir, 'field').lookup(
                'gpu', 'intra', 'all_reduce', 1, field.gpus_per_node)
            att = hook_judging.output_attempt(text, field.logs, 0)
            got['hook'] = str(judge(hook_judging.probe_evidence(
                [att], size, tuple(range(field.gpus_per_node)),
                hook_entry)).verdict)
    return got


@pytest.mark.parametrize('name', sorted(FIELDS))
def test_healthy_field_output_fails_no_door(tmp_path, name):
    field = FIELDS[name]
    got = through_every_door(tmp_path, field, field.text)
    bad = {door: v for door, v in got.items() if v in FAILING}
    assert not bad, f'{name} ({field.transport}): a healthy real output ' \
                    f'failed: {got}'
    # where the output's own logs prove its transport, every door passes
    if field.logs or name.endswith('.log'):
        assert set(got.values()) == {PASS}, got


#: the fast outputs that a fixed 400 GB/s ceiling failed: each must be
#: judged, and passed where proven, at its real busbw
FAST = [n for n in FIELDS if any(k in n for k in ('h200', 'gb200'))]


def test_the_fast_outputs_are_in_the_matrix():
    assert len(FAST) >= 3, FAST
    top = max(FIELDS[n].best(r) or 0 for n in FAST
              for r in FIELDS[n].result.rows)
    assert top > 800, top          # GB200 NVL72's NVLS busbw


def _damaged(field, key, seed):
    return mutations.DAMAGING[key](field.text, random.Random(seed))


@pytest.mark.parametrize('key', sorted(mutations.DAMAGING))
@pytest.mark.parametrize('name', sorted(FIELDS))
def test_damaged_field_output_passes_no_door(tmp_path, name, key):
    field = FIELDS[name]
    if (key, field.transport) in mutations.NOT_OF_THE_CASE:
        pytest.skip(f'{key} is no damage of a {field.transport} case')
    try:
        text = _damaged(field, key, hash((name, key)) & 0xffff)
    except (ValueError, IndexError) as err:
        pytest.skip(f'{key} does not apply to {name}: {err}')
    if text == field.text:
        pytest.skip(f'{key} leaves {name} unchanged')
    got = through_every_door(tmp_path, field, text)
    passed = [door for door, v in got.items() if v == PASS]
    assert not passed, f'{name} damaged by {key} passed in {passed}: {got}'


def test_every_transport_is_judged_by_the_matrix():
    """The matrix covers intra-node, socket and plugin outputs of the
    field (what every transport of the registry is proven from)."""
    seen = {f.transport for f in FIELDS.values()}
    assert {'intra', 'net-socket', 'net-plugin'} <= seen, seen
    assert seen <= set(transports.NAMES), seen
