"""The chaos suite: real Redis behind real Toxiproxy, faults injected while several
clients contend for one lock, every section recorded and checked.

``python -m distlock chaos`` runs it (:mod:`distlock.tools.chaos.cli`); the scenarios are
plain functions registered in :mod:`distlock.tools.chaos.registry`, run one at a time by
:class:`distlock.tools.chaos.runner.Runner` through :mod:`~distlock.tools.chaos.harness`
(whose ``Scenario`` composes the trials, faults, clients, sections and trace), and
checked by :mod:`~distlock.tools.chaos.invariants`.  Importing this package imports
nothing else.
"""
