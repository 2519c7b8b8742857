"""``python -m ccl_health.hook``: a stop signal from the very start is one
line, exit 2."""
from ccl_health.hookcli import install_early

install_early()
from ccl_health.hookcli import main  # noqa: E402

raise SystemExit(main())
