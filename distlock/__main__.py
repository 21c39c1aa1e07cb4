"""``python -m distlock``: see :mod:`distlock.tools.cli`."""

from distlock.tools.cli import main

raise SystemExit(main())
