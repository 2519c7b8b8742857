"""What an output's table shows beyond each value, for
:func:`ccl_health.judge.casejudge.judge_output`: the sizes the run was asked
for (its header, a pasted command line) and those missing, sizes printed
twice, impossible or non-finite values, and the closing lines it shows."""

from ccl_health.judge.verdicts import finite


def header_sizes(result):
    """The sizes the run's own header announces (``minBytes``, ``maxBytes``,
    ``step``), else the command line pasted with it (``-b``, ``-e``, ``-f``:
    :meth:`ccl_health.evidence.results.SweepResult.expected_sizes`), or
    None."""
    sizes = result.expected_sizes() if hasattr(result, 'expected_sizes') \
        else None
    if not sizes or sizes[0] <= 0 or (getattr(result, 'step_factor', None)
                                      and result.step_factor < 2):
        return None
    return sizes


def impossible(rows, ceiling):
    """``(size, why)`` of the first row with a time <= 0 or a busbw above
    the case's bound (:func:`ccl_health.judge.ceiling.bound`), else
    None."""
    for r in rows:
        for m in (r.out_of_place, r.in_place):
            if m is None:
                continue
            if finite(m.time_us) and m.time_us <= 0:
                return r.size, f'time {m.time_us:g} us <= 0'
            if finite(m.algbw) and m.algbw < 0 or \
                    finite(m.busbw) and m.busbw < 0:
                return r.size, 'negative bandwidth'
            if ceiling and finite(m.busbw) and m.busbw > ceiling:
                return r.size, (f'busbw {m.busbw:.4g} GB/s above '
                                f'{ceiling:g} GB/s, the most this case '
                                f'can reach')
    return None


def repeated_sizes(rows):
    """The sizes printed twice with different measurements (time, algbw,
    busbw of either half: two small sizes of two interleaved tables
    differ in their times where their busbw both round to 0.00)."""
    seen, out = {}, []
    for r in rows:
        values = tuple((m.time_us, m.algbw, m.busbw) if m else None
                       for m in (r.out_of_place, r.in_place))
        if r.size in seen and seen[r.size] != values and r.size not in out:
            out.append(r.size)
        seen.setdefault(r.size, values)
    return out


def summary_said(result):
    """The closing lines the output shows (``Out of bounds values : 0
    OK``, ``Avg bus bandwidth : x``), as a phrase, or ''."""
    said = []
    oob = getattr(result, 'out_of_bounds', None)
    if oob is not None:
        said.append(f'"Out of bounds values : {oob}"')
    avg = getattr(result, 'avg_busbw', None)
    if avg is not None:
        said.append(f'"Avg bus bandwidth : {avg:g}"')
    return ', '.join(said)


def swept_by(result, expected):
    """Who asked for the sizes :func:`header_sizes` gives."""
    if getattr(result, 'min_bytes', None) is not None:
        return 'announced by its header'
    if getattr(result, 'command_sizes', None):
        return 'asked by the command line pasted with it'
    return 'asked'


def missing_sizes(rows, expected, exact, result):
    """The reason when sizes asked, or announced by the run's own header
    (``minBytes`` .. ``maxBytes`` by ``step``), are missing, else None."""
    for sizes, source in ((expected, 'asked'),
                          (header_sizes(result),
                           swept_by(result, None))):
        if not sizes:
            continue
        got = {r.size for r in rows}
        if not exact:       # the program rounds sizes to the rank count
            if len(got) < len(sizes):
                return (f'incomplete: {len(got)} of {len(sizes)} sizes '
                        f'in the output of {{what}}')
            continue
        # the header's small sizes may be rounded to the element size
        missing = [s for s in sizes if s not in got and (
            source == 'asked' or s >= 4096)]
        if source != 'asked' and len(got) < len(sizes):
            return (f'incomplete: {len(got)} of {len(sizes)} sizes '
                    f'{source} in the output of {{what}}')
        if missing:
            return (f'incomplete: {len(missing)} of {len(sizes)} sizes '
                    f'{source} missing from the output, first '
                    f'{missing[0]} B')
    return None


def nonfinite_row(r):
    ms = [m for m in (r.out_of_place, r.in_place) if m is not None]
    return not ms or r.busbw is None or any(
        getattr(m, 'invalid', None) or not all(
            map(finite, (m.time_us, m.algbw, m.busbw))) for m in ms)
