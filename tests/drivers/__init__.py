"""The driver tests, written once: ``_async/`` by hand, ``_sync/`` written from it by
``tools/unasync.py`` (as ``distlock/_sync/`` is from ``distlock/_async/``).  What asyncio
and threads do differently goes through ``concurrency.py``, hand-written in both; the tests
only one driver can have (cancellation, the GIL, signals) are in ``test_*_asyncio.py`` and
``test_*_threads.py`` here."""
