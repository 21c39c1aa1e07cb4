"""The fence guards behind :mod:`distlock.fencing`, one module per store."""
