"""``python -m ccl_health.torch_bench <mode> ...``"""

import sys

from ccl_health.torch_bench.benchcli import main

if __name__ == '__main__':
    sys.exit(main())
