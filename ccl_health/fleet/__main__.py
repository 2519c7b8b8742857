import sys

from ccl_health.fleet.cli import main

sys.exit(main(prog='python -m ccl_health.fleet'))
