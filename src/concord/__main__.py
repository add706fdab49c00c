import sys

from concord.warmstart import run_warm

# Forked from a warm interpreter where a run provides one (concord.warmstart); else run here.
code = run_warm(sys.argv)
if code is None:
    from concord.cli import main

    code = main()
raise SystemExit(code)
