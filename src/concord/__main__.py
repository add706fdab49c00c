from concord.cli import main

raise SystemExit(main())
