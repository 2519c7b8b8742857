from ccl_health.hook.check import main

raise SystemExit(main())
