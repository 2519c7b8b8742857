"""Words the commands print (issue 40): only what is known, never an
empty slot (``(sm_80, driver )``)."""

from ccl_health.evidence import nodefacts as node


def test_gpus_are_described_by_what_is_known():
    assumed = node.detect_gpus({'CCL_HEALTH_ASSUME_GPUS': '2:sm_80'})
    text = assumed.describe()
    assert text.startswith('2 x ') and '(sm_80)' in text
    assert 'driver' not in text
    real = node.Gpus('nvidia', 4, 'NVIDIA H200', 'sm_90', '570.124.06')
    assert real.describe() == '4 x NVIDIA H200 (sm_90, driver 570.124.06)'
    assert node.Gpus('nvidia', 1).describe() == '1 x GPU'


def test_the_first_run_ends_with_one_next_step_and_explains_reframe():
    """A new node's first run: two transports without a reference, which
    ReFrame's own summary counts as FAILED; the verdict block says why
    ReFrame's line says so, and ends with the one next step."""
    from ccl_health import summary
    tcs = [{'fixture': False, 'display_name': f'AllReduceSweep '
            f'%transport={t}', 'system': 'mycluster', 'partition': 'gpu',
            'transport': t, 'collective': 'all_reduce', 'result': 'fail',
            'fail_phase': 'performance', 'verdict': 'no-reference',
            'verdict_reason': 'no-reference: no reference entry'}
           for t in ('intra', 'net-socket')]
    verdicts = summary.case_verdicts({'runs': [{'testcases': tcs}]})
    text = summary.render(verdicts, db='out/ccl-health.db')
    assert '2 not judged' in text
    [why] = [ln for ln in text.splitlines() if 'ReFrame' in ln]
    assert '[ FAILED ]' in why and '2 cases not judged here' in why
    nexts = [ln for ln in text.splitlines() if ln.startswith('next:')]
    assert nexts == [nexts[0]] and 'scripts/calibrate --db '\
        'out/ccl-health.db --system mycluster --partition gpu' in nexts[0]
