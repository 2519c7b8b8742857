"""What NVML costs the hook on every GPU of this machine (issue 42), for
benchmarks/device/nvml_cost.sh: each time the median of REPS (20) runs,
with its min and max:

* ``nvmlInit`` + ``nvmlShutdown`` cold (nothing holds NVML: each pair
  starts and stops it; the process's very first pair, which loads the
  library, apart), and with a session already holding it (only NVML's
  reference count);
* one full ``nodestate.read()`` (the hook's reading before and after its
  probes) and one light one (the sampler's, every 0.25 s while they run)
  the old way (NVML started per reading, every GPU's NVLinks asked link by
  link) and the new way (the hook's ``nvml.Session`` held, the links in
  one field read), with the NVML calls each makes;
* per GPU: its links' states asked link by link (``nvmlDeviceGetNvLinkState``
  until one errors) against the one ``nvmlDeviceGetFieldValues`` of the
  links' count and states, and whether the two give the same links; and
  the error counters still asked link by link (links 12-17: NVML has no
  field for them).

    python3 _nvml_cost.py measure OUT.json     # on the GPU machine
    python3 _nvml_cost.py table OUT.json       # the table (markdown)"""
import json
import statistics
import sys
import time

REPS = 20


def timed(fn, reps=REPS):
    """Seconds of each of ``reps`` calls of ``fn``."""
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


class OldWay:
    """An NVML API as the reader before issue 42's link read saw it: no
    field call for the links' count and states (it answers
    FUNCTION_NOT_FOUND, so the reader asks link by link, as it did)."""

    def __init__(self, api):
        self.api = api

    def call(self, name, *args):
        from ccl_health.evidence.nodestate import nvml
        if name == 'nvmlDeviceGetFieldValues' and args[1] and \
                args[1][0] == nvml.NVLINK_LINK_COUNT:
            raise nvml.NvmlError(nvml.FUNCTION_NOT_FOUND, 'old way')
        return self.api.call(name, *args)


def links_of(gpu):
    return [[ln.index, ln.active] for ln in gpu.nvlinks]


def per_link_states(api, i):
    """``([[link, active]], calls)`` of GPU ``i`` asked link by link (the
    old calls: until one errors, at most 18)."""
    from ccl_health.evidence.nodestate import nvml
    links, calls = [], 0
    for link in range(nvml.NVLINK_MAX_LINKS):
        calls += 1
        try:
            links.append([link, bool(api.call('nvmlDeviceGetNvLinkState',
                                              i, link))])
        except nvml.NvmlError:
            break
    return links, calls


def batched_states(api, i):
    """``([[link, active]], the links left to ask alone)`` of GPU ``i``
    from the one field read; (None, None) where NVML did not answer the
    links' count."""
    from ccl_health.evidence.nodestate import nvml
    count, known = nvml.link_states(api, i)
    if count is None:
        return None, None
    return [[k, known[k]] for k in sorted(known)], \
        [k for k in range(count) if k not in known]


def counters_beyond_fields(api, i, links):
    """The calls the reader still makes link by link for the error
    counters of the active links that have no field (12-17): their
    count."""
    from ccl_health.evidence.nodestate import nvml
    calls = 0
    for link, active in links:
        if not active or link < len(nvml.NVLINK_FIELDS['replay']):
            continue
        for c in nvml.NVLINK_COUNTERS:
            calls += 1
            try:
                api.call('nvmlDeviceGetNvLinkErrorCounter', i, link, c)
            except nvml.NvmlError:
                pass
    return calls


def calls_of(read):
    """The NVML calls one reading makes, by name (a Recording around it)."""
    from ccl_health.evidence.nodestate import nvml
    box = {}

    def wrap(api):
        box['rec'] = nvml.Recording(api)
        return box['rec']
    read(wrap)
    out = {}
    for c in box['rec'].calls:
        out[c['call']] = out.get(c['call'], 0) + 1
    return out


def measure(reps=REPS):
    """Every number of the table, as a JSON document."""
    import pynvml
    from ccl_health.evidence import nodestate
    from ccl_health.evidence.nodestate import nvml
    doc = {'reps': reps, 'times': {}, 'calls': {}, 'gpus': []}
    times = doc['times']
    t = time.perf_counter()
    pynvml.nvmlInit()
    pynvml.nvmlShutdown()
    times['first init+shutdown (loads the library)'] = [
        time.perf_counter() - t]
    times['init+shutdown cold'] = timed(
        lambda: (pynvml.nvmlInit(), pynvml.nvmlShutdown()), reps)
    pynvml.nvmlInit()                   # a session's hold
    times['init+shutdown, NVML held'] = timed(
        lambda: (pynvml.nvmlInit(), pynvml.nvmlShutdown()), reps)
    doc['driver'] = str(pynvml.nvmlSystemGetDriverVersion())
    doc['nvml'] = str(pynvml.nvmlSystemGetNVMLVersion())
    ngpu = pynvml.nvmlDeviceGetCount()
    api = nvml.LiveNvml(pynvml)
    for i in range(ngpu):
        g = {'index': i, 'model': str(pynvml.nvmlDeviceGetName(
            pynvml.nvmlDeviceGetHandleByIndex(i)))}
        g['per_link'], g['per_link_calls'] = per_link_states(api, i)
        g['batched'], g['asked_alone'] = batched_states(api, i)
        g['per_link_s'] = timed(lambda: per_link_states(api, i), reps)
        g['batched_s'] = timed(lambda: batched_states(api, i), reps)
        g['counters_calls'] = counters_beyond_fields(api, i, g['per_link'])
        g['counters_s'] = timed(lambda: counters_beyond_fields(
            api, i, g['per_link']), reps)
        doc['gpus'].append(g)
    pynvml.nvmlShutdown()               # the hold given back

    def old(light):
        return lambda: nodestate.read(nvml=OldWay(nvml.LiveNvml(pynvml)),
                                      light=light)
    for light, what in ((False, 'full'), (True, 'light')):
        times[f'{what} reading, old way'] = timed(old(light), reps)
        with nvml.Session(nvml.LiveNvml(pynvml)) as session:
            nodestate.read(session=session, light=light)   # the hold
            times[f'{what} reading, new way'] = timed(
                lambda: nodestate.read(session=session, light=light), reps)
        doc['calls'][f'{what} reading, old way'] = calls_of(
            lambda wrap: nodestate.read(nvml=wrap(OldWay(nvml.LiveNvml(
                pynvml))), light=light))
        with nvml.Session(nvml.LiveNvml(pynvml)) as session:
            nodestate.read(session=session, light=light)
            doc['calls'][f'{what} reading, new way'] = calls_of(
                lambda wrap: nodestate.read(nvml=wrap(session),
                                            light=light))
    # the same links either way, in a whole reading
    a = nodestate.read(nvml=OldWay(nvml.LiveNvml(pynvml)))
    with nvml.Session(nvml.LiveNvml(pynvml)) as session:
        b = nodestate.read(session=session)
    doc['same_links'] = [links_of(ga) == links_of(gb)
                         for ga, gb in zip(a.gpus, b.gpus)]
    return doc


def _ms(values):
    return (f'{1000 * statistics.median(values):.3f}',
            f'{1000 * min(values):.3f}', f'{1000 * max(values):.3f}')


def table(doc):
    """The markdown table of a :func:`measure` document."""
    out = [f'NVML {doc.get("nvml", "?")}, driver {doc.get("driver", "?")}, '
           f'{len(doc["gpus"])} GPU(s) '
           f'({", ".join(sorted({g["model"] for g in doc["gpus"]}))}); '
           f'median of {doc["reps"]}', '',
           '| what | median ms | min ms | max ms | NVML calls |',
           '|---|---|---|---|---|']
    for what, values in doc['times'].items():
        calls = doc['calls'].get(what)
        said = sum(calls.values()) if calls else ''
        out.append(f'| {what} | ' + ' | '.join(_ms(values)) + f' | {said} |')
    out += ['', '| GPU | links (active) | states per link: calls, median '
            'ms | states in one field read: median ms | asked alone | same '
            'links | counters of links 12-17 per link (left as they are): '
            'calls, median ms |', '|---|---|---|---|---|---|---|']
    same_links = doc.get('same_links') or [None] * len(doc['gpus'])
    for g, same in zip(doc['gpus'], same_links):
        per, batched = g['per_link'], g['batched']
        active = sum(1 for _, a in per if a)
        if batched is None:
            agree = 'count not answered: per link'
        else:
            alone = [[k, a] for k, a in per if k in g['asked_alone']]
            agree = 'yes' if sorted(batched + alone) == per else 'NO'
        if same is not None:
            agree += ', whole reading ' + ('same' if same else 'DIFFERENT')
        out.append(f'| {g["index"]} | {len(per)} ({active}) | '
                   f'{g["per_link_calls"]}, {_ms(g["per_link_s"])[0]} | '
                   f'{_ms(g["batched_s"])[0]} | '
                   f'{g["asked_alone"] or "-"} | {agree} | '
                   f'{g.get("counters_calls", "?")}, '
                   f'{_ms(g.get("counters_s") or [0])[0]} |')
    return '\n'.join(out) + '\n'


def main(argv):
    if len(argv) == 3 and argv[1] == 'measure':
        with open(argv[2], 'w') as fp:
            json.dump(measure(), fp, indent=1)
        return 0
    if len(argv) == 3 and argv[1] == 'table':
        with open(argv[2]) as fp:
            sys.stdout.write(table(json.load(fp)))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
