"""The JSON forms of nccl-tests / rccl-tests results: the file nccl-tests
>= 2.17 writes with ``-J``, and rccl-tests' ``-x file -Z json`` (JSON lines
or a JSON array)."""

import json
import math
import re

from ccl_health import CclHealthError
from ccl_health.evidence.results import Measurement, Row, SweepResult


# nan / inf as C's printf writes them, which JSON does not allow
_BARE_NONFINITE = re.compile(r'(?<=[:\[,])(\s*)(-?(?:nan|inf)(?:inity)?)'
                             r'(?=\s*[,}\]])', re.IGNORECASE)


def _loads(text):
    return json.loads(_BARE_NONFINITE.sub(r'\1"\2"', text))


def _float(v):
    return float(v)       # accepts "nan", "-nan", "inf" (as strings too)


def _json_measurement(d):
    if not d:
        return None
    t = d.get('time', d.get('cpu_time'))
    wrong = d.get('nwrong', d.get('wrong'))
    m = Measurement(_float(t), _float(d['alg_bw']), _float(d['bus_bw']),
                    None)
    bad = [n for n, v in (('time', m.time_us), ('algbw', m.algbw),
                          ('busbw', m.busbw)) if not math.isfinite(v)]
    if wrong not in (None, 'N/A'):
        w = _float(wrong)
        if math.isfinite(w):
            m.wrong = int(w)
        else:
            bad.append('#wrong')
    if bad:
        m.invalid = 'non-finite ' + '/'.join(bad)
    return m


def parse_json(text, origin='<json>'):
    """Parse the file that ``-J`` writes (nccl-tests >= 2.17)."""
    try:
        doc = _loads(text)
    except json.JSONDecodeError as err:
        raise CclHealthError(f'{origin}: not valid nccl-tests JSON: {err}') \
            from None
    if not isinstance(doc, dict) or 'version' not in doc:
        raise CclHealthError(f'{origin}: not an nccl-tests JSON report '
                             f'(no "version" key)')
    res = SweepResult(source='json', format='nccl-tests-json')
    res.nccl_version = doc.get('nccl_version')
    args = doc.get('args') or []
    if args:
        res.collective = str(args[0]).rsplit('/', 1)[-1]
    for dev in (_find_key(doc, 'devices') or []):
        if isinstance(dev, dict):
            host = dev.get('hostname', '?')
            res.devices.append(f'{host}:{dev.get("device")} '
                               f'{dev.get("device_info", "")}'.strip())
            res.rank_hosts.append(host)
            pid = dev.get('pid')
            res.rank_pids.append(pid if isinstance(pid, int) and
                                 not isinstance(pid, bool) else None)
            if host not in res.hosts:
                res.hosts.append(host)
    if res.devices:
        res.nranks = len(res.devices)
    for r in _find_key(doc, 'results') or []:
        try:
            root = r.get('root')
            root = int(root) if root not in (None, '') else None
            res.rows.append(Row(int(r['size']), int(r['count']), r['type'],
                                r['redop'], root,
                                _json_measurement(r.get('out_of_place')),
                                _json_measurement(r.get('in_place'))))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise CclHealthError(f'{origin}: malformed result entry {r!r}: '
                                 f'{err}') from None
    oob = _find_key(doc, 'out_of_bounds')
    if isinstance(oob, dict) and 'count' in oob:
        res.out_of_bounds = int(oob['count'])
        if str(oob.get('okay')).lower() == 'false' and not res.out_of_bounds:
            res.out_of_bounds = 1
    avg = _find_key(doc, 'average_bus_bandwidth')
    if isinstance(avg, dict) and 'bandwidth' in avg:
        res.avg_busbw = _float(avg['bandwidth'])
        res.avg_busbw_failed = str(avg.get('okay')).lower() == 'false'
    res.closed = res.out_of_bounds is not None and res.avg_busbw is not None
    # the library's last error message (ncclGetLastError), "" when none:
    # the program itself does not fail on it
    res.notes.extend(f'library error message: {e}'
                     for e in (_find_key(doc, 'errors') or []) if e)
    return res


def _find_key(doc, key):
    """The value of ``key`` at the top of ``doc`` or one level down (the
    report's nesting has changed between nccl-tests versions)."""
    if key in doc:
        return doc[key]
    for val in doc.values():
        if isinstance(val, dict) and key in val:
            return val[key]
    return None


# rccl-tests -Z json: {"name":"AllReduce", "nodes":1, "ranks":8,
# "ranksPerNode":8, "gpusPerRank":1, "size":1024, "type":"float",
# "redop":"sum", "inPlace":0, "time":12.3, "algBw":0.1, "busBw":0.1,
# "wrong":"0"} (newer releases add "numCycle" and write a JSON array)
_RCCL_KEYS = ('size', 'inPlace', 'busBw')


def _rccl_rows(entries, origin):
    res = SweepResult(source='json', format='rccl-tests-json-lines')
    rows = {}
    for e in entries:
        try:
            m = _json_measurement({'time': e['time'], 'alg_bw': e['algBw'],
                                   'bus_bw': e['busBw'],
                                   # "#wrong" in some releases, with
                                   # string values ("0")
                                   'wrong': e.get('wrong',
                                                  e.get('#wrong'))})
            key = (e.get('numCycle'), int(e['size']))
            row = rows.get(key)
            if row is None:
                row = rows[key] = Row(int(e['size']), 0, str(e.get('type')),
                                      str(e.get('redop')), None, None, None)
                res.rows.append(row)
            if int(e['inPlace']):
                row.in_place = m
            else:
                row.out_of_place = m
        except (KeyError, TypeError, ValueError) as err:
            raise CclHealthError(f'{origin}: malformed rccl-tests result '
                                 f'{e!r}: {err}') from None
        if res.collective is None and e.get('name'):
            res.collective = str(e['name'])
        if res.nranks is None:
            n = e.get('ranks', e.get('gpus'))
            res.nranks = int(n) if isinstance(n, (int, float)) else None
    return res


def parse_rccl_json(text, origin='<json>'):
    """Parse rccl-tests' ``-Z json`` file: JSON lines (written as the run
    goes, so never complete by themselves) or a JSON array (written at the
    end: complete, with the out-of-bounds count as the number of results
    with wrong elements)."""
    stripped = text.strip()
    if stripped.startswith('['):
        try:
            doc = _loads(stripped)
        except json.JSONDecodeError as err:
            raise CclHealthError(f'{origin}: not valid rccl-tests JSON: '
                                 f'{err}') from None
        if not isinstance(doc, list) or not all(
                isinstance(e, dict) and all(k in e for k in _RCCL_KEYS)
                for e in doc):
            raise CclHealthError(f'{origin}: not an rccl-tests JSON array')
        res = _rccl_rows(doc, origin)
        res.format = 'rccl-tests-json'
        res.closed = True
        res.out_of_bounds = sum(1 for r in res.rows
                                for m in (r.out_of_place, r.in_place)
                                if m and m.wrong)
        return res
    entries = []
    for n, line in enumerate(stripped.splitlines(), 1):
        if not line.strip():
            continue
        try:
            e = _loads(line)
        except json.JSONDecodeError as err:
            raise CclHealthError(f'{origin}:{n}: not an rccl-tests JSON '
                                 f'line: {err}') from None
        if not isinstance(e, dict) or not all(k in e for k in _RCCL_KEYS):
            raise CclHealthError(f'{origin}:{n}: not an rccl-tests JSON '
                                 f'line (needs {", ".join(_RCCL_KEYS)})')
        entries.append(e)
    if not entries:
        raise CclHealthError(f'{origin}: no rccl-tests JSON lines')
    res = _rccl_rows(entries, origin)
    res.closed = None         # JSON lines have no closing summary
    return res


def parse_json_any(text, origin='<json>'):
    """The JSON of nccl-tests (``-J``) or of rccl-tests (``-Z json``)."""
    s = text.lstrip()
    if s.startswith('{') and '"version"' not in s[:2000] and \
            '"busBw"' in s.split('\n', 1)[0]:
        return parse_rccl_json(text, origin)
    if s.startswith('['):
        return parse_rccl_json(text, origin)
    try:
        return parse_json(text, origin)
    except CclHealthError as err:
        if 'no "version" key' not in str(err):
            raise
        raise CclHealthError(f'{err}; nor rccl-tests JSON lines (no '
                             f'"busBw" key)') from None


def looks_like_json(text):
    s = text.lstrip()
    return s.startswith('{') or s.startswith('[{') or \
        (s.startswith('[') and s[1:].lstrip().startswith('{'))
