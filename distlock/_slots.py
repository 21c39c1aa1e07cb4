"""Redis Cluster hash slots, and a short hash tag for each slot.

A script may only touch keys of one slot, and the fence counter must survive the lock
key's deletion, so it needs a key of its own in the lock key's slot.  Deriving it from the
lock key's text cannot always work: ``lock:a}b`` hashes whole, and no hash tag can contain
its ``}``.  Instead each slot has one counter, named with a short tag that hashes to that
slot (``_slot_tags.txt``, generated once by :func:`generate_tags`).  It also bounds the
fence state: at most 16,384 counters, however many ids a service uses.
"""

from __future__ import annotations

import functools
import importlib.resources
import itertools
import string

SLOTS = 16384


def _table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table.append(crc & 0xFFFF)
    return table


_CRC_TABLE = _table()


def crc16(data: bytes) -> int:
    """CRC16-XMODEM, the checksum Redis Cluster hashes keys with."""
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC_TABLE[((crc >> 8) ^ byte) & 0xFF]
    return crc


def hashed_part(key: str) -> str:
    """The part of ``key`` Cluster hashes: the text between the first ``{`` and the first
    ``}`` after it, when that is not empty; otherwise the whole key."""
    start = key.find("{")
    if start != -1:
        end = key.find("}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key


def key_slot(key: str) -> int:
    """The Cluster slot of ``key`` (what ``CLUSTER KEYSLOT`` answers)."""
    return crc16(hashed_part(key).encode()) % SLOTS


@functools.cache
def _tags() -> tuple[str, ...]:
    text = importlib.resources.files("distlock").joinpath("_slot_tags.txt").read_text()
    tags = tuple(text.split())
    if len(tags) != SLOTS:
        raise RuntimeError(f"distlock/_slot_tags.txt has {len(tags)} tags, not {SLOTS}")
    return tags


def slot_tag(slot: int) -> str:
    """A short string whose hash slot is ``slot``."""
    return _tags()[slot]


def generate_tags() -> list[str]:
    """The shortest, then lexicographically first, lowercase alphanumeric tag per slot."""
    found: dict[int, str] = {}
    alphabet = string.digits + string.ascii_lowercase
    length = 0
    while len(found) < SLOTS:
        length += 1
        for chars in itertools.product(alphabet, repeat=length):
            tag = "".join(chars)
            found.setdefault(crc16(tag.encode()) % SLOTS, tag)
    return [found[slot] for slot in range(SLOTS)]


if __name__ == "__main__":  # regenerate: python -m distlock._slots > distlock/_slot_tags.txt
    print("\n".join(generate_tags()))
