"""What a hook's ``--json`` document says of the links and the processes,
a few lines for benchmarks/device/hook_faults.sh's summary:
python3 _hook_detail.py HOOK.json"""
import json
import sys


def lines(doc):
    ns = doc.get('node_state') or {}
    out = [f'  under load: {json.dumps(ns.get("under_load"))}']
    pci = (ns.get('before') or {}).get('pci') or {}
    out.append('  sysfs links: ' + ', '.join(
        f'{a} {f.get("role")} {f.get("speed")}/{f.get("max_speed")} GT/s '
        f'x{f.get("width")}/x{f.get("max_width")}'
        for a, f in sorted(pci.items())))
    out.append('  causes: ' + '; '.join(
        f'{c["kind"]}{" (drain)" if c.get("drain") else ""}: {c["text"]}'
        for c in ns.get('causes') or []))
    for c in ns.get('causes') or []:
        if (c.get('detail') or {}).get('gpus'):
            out.append(f'  held per GPU: {c["detail"]["gpus"]}')
    if doc.get('dropped_env'):
        out.append(f'  dropped: {doc["dropped_env"]}')
    return out


if __name__ == '__main__':
    try:
        with open(sys.argv[1]) as fp:
            print('\n'.join(lines(json.load(fp))))
    except (OSError, ValueError) as err:
        print(f'  no --json detail: {err}')
