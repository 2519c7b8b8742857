"""``python -m ccl_health.torch_bench <mode> ...``"""

import sys

from .cli import main

if __name__ == '__main__':
    sys.exit(main())
