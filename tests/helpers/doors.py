"""One output through every door that judges it (issue 19): the assembler,
explain, the sweep, ingest, the fleet's step and the hook."""

import glob
import os

import pytest

from conftest import REPO

from ccl_health import explain
from ccl_health.db import recorder
from ccl_health.evidence import collectives, nccltests
from ccl_health.sitedata.fleetconfig import FleetConfig
from ccl_health.fleet.rounds import Raw, Step, judge_step
from ccl_health.hook import judging as hook_judging
from ccl_health.judge import assemble, reference
from ccl_health.judge.casejudge import judge
from ccl_health.units import size_sweep
from helpers.node import CAP

pytest.importorskip('reframe')
from ccl_health.rfm.sweep import sweep_evidence  # noqa: E402


REFDIR = os.path.join(REPO, 'reference')


def capture(name):
    d = os.path.join(CAP, name)
    with open(os.path.join(d, 'stdout.txt')) as fp:
        text = fp.read()
    return text, sorted(glob.glob(os.path.join(d, 'nccl-debug.*.log')))


def through_every_door(tmp_path, transport, text, logs, rc=0, docs=None,
                       clean_text=None, site=None, collective=None, nodes=1,
                       gpus_per_node=2):
    """``{door: verdict name}`` of one (damaged) output (``docs``: a dict
    that receives explain's whole document under ``'explain'``;
    ``clean_text``: the undamaged output whose sizes were asked, by default
    the capture of ``transport``, or the output itself where ``transport``
    has no capture; ``site``: the site every door is given).

    The collective and the sweep are the paste's, as explain reads them:
    ``collective`` (explain's ``--collective``), else the one the output
    names; the sizes asked from the clean output's header or its command
    line, else none (each door reads the output's own); the fleet's door
    (its one size, the largest asked) only where they are known.
    ``nodes`` x ``gpus_per_node``: the run's shape, given to every door
    alike.  The hook's door only for an intra-node
    all_reduce output that reaches the hook's probe size (its one probe)."""
    out = tmp_path / 'all_reduce.out'
    out.write_text(text)
    doc = explain.explain([str(out), *logs], system='local',
                          partition='gpu', transport_asked=transport,
                          nodes=nodes, gpus_per_node=gpus_per_node,
                          exit_status=rc, refdir=REFDIR, site=site,
                          collective=collective)
    if docs is not None:
        docs['explain'] = doc
    res = nccltests.parse(text)
    if clean_text is None:
        clean_text = (capture(CAPTURE_OF[transport])[0]
                      if transport in CAPTURE_OF else text)
    clean = nccltests.parse_text(clean_text)
    coll = collective or clean.collective or res.collective
    coll = collectives.canonical(coll) if coll else None
    what = f'{coll}_perf' if coll else 'the run'
    sizes = (size_sweep(clean.min_bytes, clean.max_bytes, clean.step)
             if clean.min_bytes is not None else
             size_sweep(*clean.command_sizes) if clean.command_sizes else
             None)
    entry = reference.load_for_system(REFDIR, 'local').lookup(
        'gpu', transport, coll, nodes, gpus_per_node) if coll else None
    assembled = judge(assemble.case(
        [assemble.attempt(text, logs, rc, source=str(out),
                          transport=transport, nodes=nodes)],
        what=what, transport=transport, collective=coll, nodes=nodes,
        gpus_per_node=gpus_per_node, expected_sizes=sizes, site=site,
        reference=entry))
    swept = judge(sweep_evidence(
        res, rc, entry, what=what, transport=transport, collective=coll,
        nodes=nodes, gpus_per_node=gpus_per_node, algo='default',
        sizes_run=sizes or [], exact=True, log_paths=logs,
        stdout_path=str(out), site=site))
    ingested = recorder.case_verdict(
        str(swept.verdict), recorder.sizes_from_sweep(res, entry))
    got = {'assembler': str(assembled.verdict), 'explain': doc['verdict'],
           'sweep': str(swept.verdict), 'ingest': ingested}
    if sizes:
        # the fleet's step runs the program of its probe at its one size,
        # and prints its header (a paste whose sweep is unknown asks the
        # fleet another question: its one size, all there)
        probe = [f'{{tests}}/{coll or "all_reduce"}_perf', '-b', '{size}',
                 '-e', '{size}']
        cfg = FleetConfig(transport=transport, tasks_per_node=gpus_per_node,
                          reference=os.path.join(REFDIR, 'local.yaml'),
                          reference_partition='gpu', prove_transport=True,
                          step_probe=probe)
        hosts = tuple(f'vm{i}' if i else 'vm' for i in range(nodes))
        got['fleet'] = str(judge_step(Raw(Step('group', hosts, 60), rc, text,
                                          debug_logs=logs), max(sizes), 60,
                                      cfg, site)[0])
    if transport == 'intra' and coll in (None, 'all_reduce') and sizes and \
            max(sizes) >= HOOK_SIZE and (nodes, gpus_per_node) == (1, 2):
        # the hook checks the node's own GPUs at its probe size
        got['hook'] = str(hook_judge([(text, rc)], logs, site).verdict)
    return got


#: the hook's default probe size
HOOK_SIZE = 1 << 30


def hook_judge(outputs, logs, site=None):
    """The hook's judgement of one all_reduce probe on GPUs 0,1 whose
    attempts left ``outputs`` (``[(text, exit status)]``), each with the
    capture's debug logs: one case, every attempt in it."""
    entry = reference.load_for_system(REFDIR, 'local').lookup(
        'gpu', 'intra', 'all_reduce', 1, 2)
    atts = [hook_judging.output_attempt(text, logs, rc)
            for text, rc in outputs]
    return judge(hook_judging.probe_evidence(atts, HOOK_SIZE, (0, 1),
                                             entry, site=site))


CAPTURE_OF = {'intra': 'intra', 'net-socket': 'net-socket'}
