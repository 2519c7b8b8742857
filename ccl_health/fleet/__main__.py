import sys

from ccl_health.fleetcli import main

sys.exit(main(prog='python -m ccl_health.fleet'))
