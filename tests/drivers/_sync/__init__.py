"""The driver tests, sync: written from ``tests/drivers/_async`` by ``tools/unasync.py``
(all but ``concurrency.py``, hand-written in both)."""
