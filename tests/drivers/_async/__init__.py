"""The driver tests, asyncio: the hand-written source of ``tests/drivers/_sync``."""
