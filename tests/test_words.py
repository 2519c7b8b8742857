"""Words the commands print (issue 40): only what is known, never an
empty slot (``(sm_80, driver )``)."""

from ccl_health.evidence import node


def test_gpus_are_described_by_what_is_known():
    assumed = node.detect_gpus({'CCL_HEALTH_ASSUME_GPUS': '2:sm_80'})
    text = assumed.describe()
    assert text.startswith('2 x ') and '(sm_80)' in text
    assert 'driver' not in text
    real = node.Gpus('nvidia', 4, 'NVIDIA H200', 'sm_90', '570.124.06')
    assert real.describe() == '4 x NVIDIA H200 (sm_90, driver 570.124.06)'
    assert node.Gpus('nvidia', 1).describe() == '1 x GPU'
