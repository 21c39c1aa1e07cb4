"""Mutation testing of the Lua scripts: plausible bugs the tests must catch.

Each :class:`Mutant` is one exact text replacement in the scripts' files,
``distlock/lua/*.lua`` and ``distlock/lua/lib/*.lua`` (a script bug someone could
plausibly write), and the tests that must fail because of it.  For each, a scratch copy of
the checkout gets the replacement in the one file that holds the old text, and pytest runs
the mutant's tests there (``-x -q``, with the scratch copy first on ``PYTHONPATH``, so it
imports the mutated ``distlock``, which assembles its scripts from the mutated file): the
mutant is killed when a test fails, and survives when all pass.  A replacement whose old
text is not found exactly once, in all the files together, is an error: the list no
longer matches the scripts.  ``tests/test_mutation_list.py`` checks that in the normal
suite, and that every script has a mutant of its own.

    python3 -m tests.mutation            # every mutant (make mutation)
    python3 -m tests.mutation quick      # a short list (make mutation MUTANTS=quick)
    python3 -m tests.mutation W11 E1     # these mutants
    python3 -m tests.mutation --list

Exits non-zero if any mutant survived or errored.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from distlock._lua import assemble_all, read_files

ROOT: Final = Path(__file__).resolve().parent.parent
PROTOCOL: Final = Path("distlock/_protocol.py")
#: The scripts' folder: a file ``lib/queue.lua`` in it is ``"lib/queue"`` in the
#: mappings below (see :func:`distlock._lua.read_files`).
LUA: Final = Path("distlock/lua")

#: Outside git, what is not copied to the scratch checkout: history, caches, build products
#: (a compiled ``_protocol`` would be imported, though it too assembles the scripts from
#: the files it finds beside it), results.
IGNORED: Final = shutil.ignore_patterns(
    ".git", "__pycache__", ".hypothesis", ".mypy_cache", ".ruff_cache", ".pytest_cache",
    "*.so", "*.egg-info", "build", "dist", "bench-results", "states", "traces", ".venv",
)

#: A mutant's tests may take this long in all before it counts as killed by a hang.
TIMEOUT_S: Final = 600

# The test files that exercise each family of scripts, and the focused ones.
LOCK: Final = "tests/drivers/_sync/test_lock.py"
RESEND: Final = ("tests/drivers/_sync/test_release_resend.py", "tests/test_release_memory.py")
REFRESH: Final = "tests/test_resend_refresh.py"
WAIT: Final = ("tests/drivers/_sync/test_wait_handoff.py", "tests/drivers/_sync/test_wait.py")
WAIT_MODEL: Final = "tests/properties/test_wait_protocol_stateful.py"
REENTRANT: Final = "tests/drivers/_sync/test_reentrant.py"
SEMAPHORE: Final = "tests/drivers/_sync/test_semaphore.py"
SEMAPHORE_WAIT: Final = "tests/drivers/_sync/test_semaphore_wait.py"
EDGES: Final = "tests/test_script_edges.py"
OPERATOR: Final = "tests/drivers/_sync/test_operator_api.py"
FLOOR: Final = "tests/test_fence_floor.py"
RWLOCK: Final = ("tests/test_rwlock_scripts.py",)
ELECTION: Final = ("tests/test_election_scripts.py",)


@dataclass(frozen=True, slots=True)
class Mutant:
    """``old`` -> ``new`` in the one script file that holds ``old``; ``script``: the script
    constant it is meant to break (others that include the same piece break with it);
    ``tests``: pytest node ids or files, at least one of which must fail."""

    name: str
    script: str
    what: str
    old: str
    new: str
    tests: tuple[str, ...]
    quick: bool = False


MUTANTS: Final[tuple[Mutant, ...]] = (
    # -- the lock ----------------------------------------------------------------------------
    Mutant(
        "A1", "ACQUIRE", "a free key's claim without NX overwrites the holder",
        "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then",
        "if redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) then",
        (REFRESH, LOCK), quick=True,
    ),
    Mutant(
        "A2", "ACQUIRE", "a resend of our own acquire is refused",
        "return held_as(ARGV[1], ARGV[2])",
        "return 0",
        (REFRESH, LOCK),
    ),
    Mutant(
        "W11", "ACQUIRE", "the re-grant of a key already ours does not refresh its TTL",
        "    redis.call('PEXPIRE', KEYS[1], ttl)\n    return tonumber(redis.call('GET', FENCES)",
        "    return tonumber(redis.call('GET', FENCES)",
        (REFRESH,), quick=True,
    ),
    Mutant(
        "A3", "ACQUIRE", "the re-grant answers a fresh fence instead of the current one",
        "return tonumber(redis.call('GET', FENCES) or next_fence(FENCES))",
        "return redis.call('INCR', FENCES)",
        (REFRESH, LOCK),
    ),
    Mutant(
        "A4", "ACQUIRE", "a resend that finds the counter evicted answers fence 1",
        "return tonumber(redis.call('GET', FENCES) or next_fence(FENCES))",
        "return tonumber(redis.call('GET', FENCES) or '1')",
        (FLOOR,),
    ),
    Mutant(
        "FL1", "ACQUIRE", "no clock floor: a lost counter starts again at 1",
        "  if fence < floor then",
        "  if false then",
        (FLOOR,),
    ),
    Mutant(
        "FL2", "ACQUIRE", "the counter is not moved up to the floor a grant was raised to",
        "    redis.call('SET', counter, floor)\n",
        "",
        (FLOOR,),
    ),
    Mutant(
        "FL3", "ACQUIRE", "the floor replaces a counter that is ahead of it",
        "  if fence < floor then",
        "  if true then",
        (FLOOR,),
    ),
    Mutant(
        "RF1", "R_ACQUIRE", "the reentrant lock's fence from the bare counter, no floor",
        "  local fence = next_fence(KEYS[2])",
        "  local fence = redis.call('INCR', KEYS[2])",
        (FLOOR,),
    ),
    Mutant(
        "WA1", "W_ACQUIRE", "a waiter's resend of its granted attempt is refused",
        "  if cur == ARGV[1] then return 0, true end",
        "  if false then return 0, true end",
        (REFRESH, *WAIT),
    ),
    Mutant(
        "WA2", "W_ACQUIRE", "a held key is seen as free by the waiting acquire",
        "  if not (cur or foreign) then return 0, false end",
        "  if true then return 0, false end",
        (EDGES, *WAIT),
    ),
    Mutant(
        "WD1", "WITHDRAW", "a key handed to a waiter that withdraws is kept, not given back",
        "local function drop() redis.call('DEL', KEYS[1]) return true end",
        "local function drop() return true end",
        (EDGES, *WAIT, WAIT_MODEL),
    ),
    Mutant(
        "WD2", "WITHDRAW", "a withdrawal never looks at what was handed to it",
        "if mine then mine = drop() end",
        "if false then mine = drop() end",
        (EDGES, *WAIT, WAIT_MODEL),
    ),
    Mutant(
        "WD3", "S_WITHDRAW", "a first waiter that gives up keeps its wake-up from the next",
        "if (head == token or mine) and busy() == 0 then",
        "if mine and busy() == 0 then",
        (EDGES, SEMAPHORE_WAIT),
    ),
    Mutant(
        "E1", "EXTEND", "extend without the token check",
        "if read('GET', KEYS[1]) == ARGV[1] then\n  return redis.call('PEXPIRE', KEYS[1], ARGV[2])",
        "if redis.call('EXISTS', KEYS[1]) == 1 then\n"
        "  return redis.call('PEXPIRE', KEYS[1], ARGV[2])",
        (LOCK,), quick=True,
    ),
    Mutant(
        "R1", "RELEASE", "release with a plain DEL, whoever holds the key",
        "if v == ARGV[1] then\n  redis.call('DEL', KEYS[1])",
        "if redis.call('EXISTS', KEYS[1]) == 1 then\n  redis.call('DEL', KEYS[1])",
        (LOCK, *RESEND), quick=True,
    ),
    Mutant(
        "R2", "RELEASE", "the release does not write its record",
        "  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])\n",
        "",
        RESEND,
    ),
    Mutant(
        "R3", "RELEASE", "a resend of our release is not looked up in the record",
        "if redis.call('GET', KEYS[2]) == ARGV[1] then return 1 end",
        "",
        RESEND,
    ),
    Mutant(
        "R4", "RELEASE", "the release wakes the first waiter instead of handing it the key",
        "hand_head(KEYS[3], KEYS[4], wake, handed)",
        "hand_head(KEYS[3], KEYS[4], wake, nil)",
        (EDGES, *WAIT),
    ),
    Mutant(
        "R5", "RELEASE", "the release hands the key over on a wake list nobody blocks on",
        "string.sub(KEYS[3], ${QUEUE_PREFIX_LEN} + 1)",
        "string.sub(KEYS[3], ${QUEUE_PREFIX_LEN})",
        (EDGES, *WAIT),
    ),
    # -- the reentrant lock ------------------------------------------------------------------
    Mutant(
        "RA1", "R_ACQUIRE", "an acquire takes a hash another token holds",
        "  if redis.call('EXISTS', KEYS[1]) == 1 then return {0, 0} end",
        "",
        (REENTRANT,),
    ),
    Mutant(
        "RA2", "R_ACQUIRE", "the re-grant of a hash already ours does not refresh its TTL",
        "    redis.call('PEXPIRE', KEYS[1], ttl)\n    return {1, tonumber(",
        "    return {1, tonumber(",
        (REFRESH,),
    ),
    Mutant(
        "RWA1", "RW_ACQUIRE", "a waiter's resend of its granted attempt is refused",
        "  if cur then return 0, true end",
        "  if false then return 0, true end",
        (REFRESH, REENTRANT),
    ),
    Mutant(
        "RWD1", "R_WITHDRAW", "a held hash is seen as free by the withdrawal and the wait",
        "  if not foreign and redis.call('EXISTS', KEYS[1]) == 0 then return 0, false end",
        "  if not foreign then return 0, false end",
        (EDGES, REENTRANT),
    ),
    Mutant(
        "RE1", "R_ENTER", "a re-entry without the token check",
        "if read('HGET', KEYS[1], ARGV[1]) then\n  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])",
        "if true then\n  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])",
        (REENTRANT,),
    ),
    Mutant(
        "RL1", "R_LEAVE", "an inner exit without the token check",
        "if read('HGET', KEYS[1], ARGV[1]) then\n  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])",
        "if true then\n  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])",
        (REENTRANT,),
    ),
    Mutant(
        "RR1", "R_RENEW", "a renewal without the token check",
        "if read('HGET', KEYS[1], ARGV[1]) then\n  redis.call('PEXPIRE', KEYS[1], ARGV[2])",
        "if redis.call('EXISTS', KEYS[1]) == 1 then\n  redis.call('PEXPIRE', KEYS[1], ARGV[2])",
        (REENTRANT,),
    ),
    Mutant(
        "RX1", "R_RELEASE", "the outermost exit with a plain DEL, whoever holds the hash",
        "if read('HGET', KEYS[1], ARGV[1]) then\n  redis.call('DEL', KEYS[1])",
        "if redis.call('EXISTS', KEYS[1]) == 1 then\n  redis.call('DEL', KEYS[1])",
        (REENTRANT,),
    ),
    Mutant(
        "RX2", "R_RELEASE", "the outermost exit does not write its record",
        "  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])\n",
        "",
        ("tests/test_release_memory.py",),
    ),
    Mutant(
        "RX3", "R_RELEASE", "a resend of our outermost exit is not looked up in the record",
        "if redis.call('GET', KEYS[3]) == ARGV[1] then return 1 end",
        "",
        ("tests/test_release_memory.py",),
    ),
    # -- the semaphore -----------------------------------------------------------------------
    Mutant(
        "SA1", "S_ACQUIRE", "the limit off by one: one permit more than the limit",
        "      and redis.call('ZCARD', KEYS[1]) >= LIMIT then",
        "      and redis.call('ZCARD', KEYS[1]) > LIMIT then",
        (SEMAPHORE,), quick=True,
    ),
    Mutant(
        "SA2", "S_ACQUIRE", "expired permits are not evicted before counting",
        "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms(now))\n  if not (score",
        "if not (score",
        (SEMAPHORE,),
    ),
    Mutant(
        "SA3", "S_ACQUIRE", "a resent acquire counts our own live permit against the limit",
        "if not (score and tonumber(score) > now)\n      and",
        "if true\n      and",
        (SEMAPHORE,),
    ),
    Mutant(
        "SW1", "SW_ACQUIRE", "a grant wakes nobody else while permits are left",
        "  return redis.call('ZCARD', KEYS[1]) < LIMIT\n",
        "  return false\n",
        (EDGES, SEMAPHORE_WAIT),
    ),
    Mutant(
        "SWD1", "S_WITHDRAW", "the waiting scripts count a full semaphore as free",
        "  if redis.call('ZCARD', KEYS[1]) < LIMIT then return 0, false end",
        "  if redis.call('ZCARD', KEYS[1]) <= LIMIT then return 0, false end",
        (EDGES, SEMAPHORE_WAIT),
    ),
    Mutant(
        "SR1", "S_RENEW", "a renewal without the membership check",
        "local score = read('ZSCORE', KEYS[1], ARGV[1])\nif not score then return 0 end",
        "local score = read('ZSCORE', KEYS[1], ARGV[1]) or '1e15'",
        (SEMAPHORE,),
    ),
    Mutant(
        "SR2", "S_RENEW", "a renewal without the liveness check: an expired permit comes back",
        "if tonumber(score) <= now then return 0 end\n",
        "",
        (EDGES, SEMAPHORE),
    ),
    Mutant(
        "SR3", "S_RENEW", "a renewal leaves the key's own expiry where the grant put it",
        "'XX', ms(now + tonumber(ARGV[2])), ARGV[1])\nexpire_at_last(KEYS[1])\n",
        "'XX', ms(now + tonumber(ARGV[2])), ARGV[1])\n",
        (SEMAPHORE,),
    ),
    Mutant(
        "SX1", "S_RELEASE", "the release does not write its memory",
        "  redis.call('ZADD', KEYS[2], ms(now + tonumber(ARGV[2])), ARGV[1])\n",
        "",
        (SEMAPHORE,),
    ),
    Mutant(
        "SX3", "S_RELEASE", "the release memory answers for any token",
        "local forget = redis.call('ZSCORE', KEYS[2], ARGV[1])",
        "local forget = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]",
        (SEMAPHORE,),
    ),
    Mutant(
        "SX2", "S_RELEASE", "the release wakes no waiter",
        "  wake_head(KEYS[3], KEYS[4], ARGV[3])\n  return 1",
        "  return 1",
        (EDGES, SEMAPHORE_WAIT),
    ),
    # -- the read-write lock -----------------------------------------------------------------
    Mutant(
        "RLA1", "RWLOCK_ACQUIRE", "a writer is granted beside live readers",
        "elseif writing and readers > 0 then\n  busy = last - NOW",
        "elseif false then\n  busy = last - NOW",
        RWLOCK, quick=True,
    ),
    Mutant(
        "RLA2", "RWLOCK_ACQUIRE", "a reader is granted beside a live writer",
        "busy = writing and math.max(wuntil, last) - NOW or wuntil - NOW",
        "busy = writing and math.max(wuntil, last) - NOW or 0",
        RWLOCK,
    ),
    Mutant(
        "RLA3", "RWLOCK_ACQUIRE", "a reader passes a writer waiting before it",
        "if t ~= token and is_writer(places, t) then",
        "if false then",
        RWLOCK,
    ),
    Mutant(
        "RLA4", "RWLOCK_ACQUIRE", "a reader is held back by a writer waiting behind it",
        "      if t == token and own then break end\n",
        "",
        RWLOCK,
    ),
    Mutant(
        "RLA5", "RWLOCK_ACQUIRE", "a reader's ended place still keeps the writers behind it",
        "local own = tonumber(redis.call('HGET', places, token) or '0') > NOW",
        "local own = redis.call('HGET', places, token) ~= false",
        RWLOCK,
    ),
    Mutant(
        "RLA6", "RWLOCK_ACQUIRE", "a writer's place is not marked as a writer's",
        "if writing then redis.call('HSET', places, '>' .. token, 'w') end\n",
        "",
        RWLOCK,
    ),
    Mutant(
        "RLA7", "RWLOCK_ACQUIRE", "a writer takes a free key before the first waiter",
        "    if head and head ~= token then ahead = head_until end",
        "    if false then ahead = head_until end",
        RWLOCK,
    ),
    Mutant(
        "RLA8", "RWLOCK_ACQUIRE", "the first waiter, a writer, waits behind its own place",
        "    if head and head ~= token then ahead = head_until end",
        "    if head then ahead = head_until end",
        RWLOCK,
    ),
    Mutant(
        "RLA9", "RWLOCK_ACQUIRE", "a resent read acquire is taken for a new reader",
        "  else mine = redis.call('ZSCORE', KEYS[2], token) ~= false end",
        "  else mine = false end",
        RWLOCK,
    ),
    Mutant(
        "RLA10", "RWLOCK_ACQUIRE", "a resent write acquire is taken for another writer",
        "  if writing then mine = writer == token",
        "  if writing then mine = false",
        RWLOCK,
    ),
    Mutant(
        "RLA11", "RWLOCK_ACQUIRE", "a writer's re-grant draws a new fence",
        "      fence = wfence\n",
        "      fence = next_fence(KEYS[3])\n",
        RWLOCK,
    ),
    Mutant(
        "RLA12", "RWLOCK_ACQUIRE", "a writer's re-grant does not refresh its lease",
        "      fence = wfence\n      redis.call('HSET', KEYS[1], 'x', ms(ends))\n",
        "      fence = wfence\n",
        RWLOCK,
    ),
    Mutant(
        "RLA13", "RWLOCK_ACQUIRE", "a writer's fence is the counter as it stands (no INCR)",
        "      fence = next_fence(KEYS[3])\n      redis.call('HSET', KEYS[1], 'rw', '1'",
        "      fence = tonumber(redis.call('GET', KEYS[3]) or next_fence(KEYS[3]))\n"
        "      redis.call('HSET', KEYS[1], 'rw', '1'",
        RWLOCK,
    ),
    Mutant(
        "RLA14", "RWLOCK_ACQUIRE", "a reader's grant draws a new fence (INCR, not GET)",
        "    fence = tonumber(redis.call('GET', KEYS[3]) or next_fence(KEYS[3]))",
        "    fence = next_fence(KEYS[3])",
        RWLOCK,
    ),
    Mutant(
        "RLA15", "RWLOCK_ACQUIRE", "a reader on a slot without a counter gets fence 0",
        "    fence = tonumber(redis.call('GET', KEYS[3]) or next_fence(KEYS[3]))",
        "    fence = tonumber(redis.call('GET', KEYS[3]) or '0')",
        RWLOCK,
    ),
    Mutant(
        "RLA16", "RWLOCK_ACQUIRE", "a reader's grant moves every reader's expiry (one shared)",
        "    redis.call('ZADD', KEYS[2], ms(ends), token)\n",
        "    for _, t in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do\n"
        "      redis.call('ZADD', KEYS[2], ms(ends), t)\n"
        "    end\n"
        "    redis.call('ZADD', KEYS[2], ms(ends), token)\n",
        RWLOCK,
    ),
    Mutant(
        "RLA17", "RWLOCK_ACQUIRE", "a writer's grant leaves the key's expiry as it was",
        "    settle(ends)\n  else",
        "  else",
        RWLOCK,
    ),
    Mutant(
        "RLA18", "RWLOCK_ACQUIRE", "a reader's grant leaves the keys' expiry as it was",
        "    settle(wuntil)\n    fence",
        "    fence",
        RWLOCK,
    ),
    Mutant(
        "RLA19", "RWLOCK_ACQUIRE", "a granted waiter keeps its place",
        "  if queued or (mine and not writing) then\n    leave(queue, places, wake, token)\n",
        "  if queued or (mine and not writing) then\n",
        RWLOCK,
    ),
    Mutant(
        "RLA20", "RWLOCK_ACQUIRE", "a reader's grant wakes no reader after it",
        "    if not writing then wake_next(queue, places, wake, nil, 1) end\n",
        "",
        RWLOCK,
    ),
    Mutant(
        "RLA21", "RWLOCK_ACQUIRE", "a reader's grant wakes a writer the readers keep out",
        "wake_next(queue, places, wake, nil, 1)",
        "wake_next(queue, places, wake, nil, 0)",
        RWLOCK,
    ),
    Mutant(
        "RLA22", "RWLOCK_ACQUIRE", "a refused fail-fast attempt takes a place in the queue",
        "if left < 0 then return {0, 0} end\n",
        "",
        RWLOCK,
    ),
    Mutant(
        "RLA23", "RWLOCK_ACQUIRE", "a refused last attempt keeps its place",
        "if left == 0 then\n  leave(queue, places, wake, token)\n",
        "if left == 0 then\n",
        RWLOCK,
    ),
    Mutant(
        "RLA34", "RWLOCK_ACQUIRE",
        "a refused last attempt first in line wakes nobody (the readers it kept out wait on)",
        "  if head == token and not foreign then"
        " wake_next(queue, places, wake, writer, readers) end\n",
        "",
        (*RWLOCK, "tests/drivers/_sync/test_readwrite.py::"
         "test_a_writer_that_gives_up_wakes_the_readers_it_kept_out"),
    ),
    Mutant(
        "RLA35", "RWLOCK_ACQUIRE",
        "a refused last attempt first in line wakes a writer that the readers keep out",
        "and not foreign then wake_next(queue, places, wake, writer, readers) end",
        "and not foreign then wake_next(queue, places, wake, writer, 0) end",
        RWLOCK,
    ),
    Mutant(
        "RLA24", "RWLOCK_ACQUIRE", "a refused waiting attempt takes no place in the queue",
        "  had = nil\nend\nif not had then redis.call('RPUSH', queue, token) end\n",
        "  had = nil\nend\n",
        RWLOCK,
    ),
    Mutant(
        "RLA25", "RWLOCK_ACQUIRE", "a place ends earlier than it was promised",
        "math.max(tonumber(had or '0'), NOW + life)",
        "NOW + life",
        RWLOCK,
    ),
    Mutant(
        "RLA26", "RWLOCK_ACQUIRE", "a refused attempt keeps a wake-up that came before it",
        "came before this refusal.\nredis.call('DEL', wake .. token)\n",
        "came before this refusal.\n",
        RWLOCK,
    ),
    Mutant(
        "RLA27", "RWLOCK_ACQUIRE", "the queue and its places never expire",
        "refusal.\nredis.call('DEL', wake .. token)\nif redis.call('PTTL', queue) < life then\n"
        "  redis.call('PEXPIRE', queue, life)\n  redis.call('PEXPIRE', places, life)\n",
        "refusal.\nredis.call('DEL', wake .. token)\nif redis.call('PTTL', queue) < life then\n",
        RWLOCK,
    ),
    Mutant(
        "RLA28", "RWLOCK_ACQUIRE", "an ended place is revived where it was, before later waiters",
        "if had and tonumber(had) <= NOW then",
        "if false then",
        RWLOCK,
    ),
    Mutant(
        "RLA29", "RWLOCK_ACQUIRE", "a waiter behind another blocks past the end of its place",
        "  recheck = math.min(recheck, head_until - NOW)\n",
        "",
        RWLOCK,
    ),
    Mutant(
        "RLA30", "RWLOCK_ACQUIRE", "a free key: behind a waiting writer, a block outlasts a lease",
        "recheck = math.min(ahead - NOW, ttl)",
        "recheck = ahead - NOW",
        RWLOCK,
    ),
    Mutant(
        "RLA31", "RWLOCK_ACQUIRE", "behind a waiting writer, a block outlasts its place",
        "    recheck = math.min(recheck, ahead - NOW)\n",
        "",
        RWLOCK,
    ),
    Mutant(
        "RLA32", "RWLOCK_ACQUIRE", "a place outlives the longest block and its grace",
        "local life = math.min(left, recheck, LONGEST_BLOCK) + tonumber(ARGV[5])",
        "local life = math.min(left, recheck) + tonumber(ARGV[5])",
        RWLOCK,
    ),
    Mutant(
        "RLA33", "RWLOCK_ACQUIRE", "another primitive's key without an expiry is taken as free",
        "  if busy <= 0 then busy = tonumber(ARGV[5]) end\n",
        "",
        RWLOCK,
    ),
    Mutant(
        "RLS1", "RWLOCK_RENEW", "expired readers are not evicted: they count and renew",
        "  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms(NOW))\n",
        "",
        RWLOCK,
    ),
    Mutant(
        "RLS2", "RWLOCK_RENEW", "a writer whose lease ended still counts, and renews",
        "if fields[2] and tonumber(fields[4]) > NOW then",
        "if fields[2] then",
        RWLOCK,
    ),
    Mutant(
        "RLS3", "RWLOCK_ACQUIRE", "another primitive's hash is taken for the lock's",
        "  if not fields[1] and redis.call('EXISTS', KEYS[1]) == 1 then",
        "  if false then",
        RWLOCK,
    ),
    Mutant(
        "RLS4", "RWLOCK_ACQUIRE", "another primitive's key of another type is an error",
        "local fields, foreign = read('HMGET', KEYS[1], 'rw', 'w', 'f', 'x')",
        "local fields, foreign = redis.call('HMGET', KEYS[1], 'rw', 'w', 'f', 'x'), false",
        RWLOCK,
    ),
    Mutant(
        "RLS5", "RWLOCK_ACQUIRE", "the key's expiry leaves the readers out",
        "    till = math.max(till, tonumber(last[2]))\n",
        "",
        RWLOCK,
    ),
    Mutant(
        "RLS6", "RWLOCK_ACQUIRE", "the readers' set never expires",
        "    redis.call('PEXPIREAT', KEYS[2], ms(tonumber(last[2])))\n",
        "",
        RWLOCK,
    ),
    Mutant(
        "RLS7", "RWLOCK_ACQUIRE", "the keys expire with the earliest reader, not the latest",
        "  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')\n  local till",
        "  local last = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')\n  local till",
        RWLOCK,
    ),
    Mutant(
        "RLS8", "RWLOCK_RELEASE", "the key outlives its last lease",
        "  else\n    redis.call('DEL', KEYS[1])\n  end\nend",
        "  end\nend",
        RWLOCK,
    ),
    Mutant(
        "RLR1", "RWLOCK_RENEW", "a writer's renewal without the token check",
        "  if writer ~= ARGV[1] then return 0 end\n",
        "",
        RWLOCK,
    ),
    Mutant(
        "RLR2", "RWLOCK_RENEW", "a reader's renewal without the membership check",
        "if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then return 0 end\n",
        "",
        RWLOCK,
    ),
    Mutant(
        "RLR3", "RWLOCK_RENEW", "a reader's renewal moves every reader's expiry (one shared)",
        "redis.call('ZADD', KEYS[2], 'XX', ms(ends), ARGV[1])",
        "for _, t in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do\n"
        "  redis.call('ZADD', KEYS[2], 'XX', ms(ends), t)\n"
        "end",
        RWLOCK,
    ),
    Mutant(
        "RLR4", "RWLOCK_RENEW", "a writer's renewal leaves its expiry instant as it was",
        "  redis.call('HSET', KEYS[1], 'x', ms(ends))\n  settle(ends)\n  return 1",
        "  settle(ends)\n  return 1",
        RWLOCK,
    ),
    Mutant(
        "RLR5", "RWLOCK_RENEW", "a writer's renewal leaves the key's expiry as it was",
        "  settle(ends)\n  return 1",
        "  return 1",
        RWLOCK,
    ),
    Mutant(
        "RLR6", "RWLOCK_RENEW", "a reader's renewal leaves the keys' expiry as it was",
        "settle(wuntil)\nreturn 1",
        "return 1",
        RWLOCK,
    ),
    Mutant(
        "RLX1", "RWLOCK_RELEASE", "a writer's release removes whichever writer holds",
        "    if writer == token then\n      redis.call('HDEL'",
        "    if writer then\n      redis.call('HDEL'",
        RWLOCK,
    ),
    Mutant(
        "RLX2", "RWLOCK_RELEASE", "a reader's release answers released for any token",
        "elseif redis.call('ZREM', KEYS[2], token) == 1 then",
        "elseif redis.call('ZREM', KEYS[2], token) >= 0 then",
        RWLOCK,
    ),
    Mutant(
        "RLX3", "RWLOCK_RELEASE", "the release does not write its record",
        "  redis.call('SET', KEYS[3], token, 'PX', ARGV[2])\n",
        "",
        RWLOCK,
    ),
    Mutant(
        "RLX4", "RWLOCK_RELEASE", "a resent release is not looked up in its record",
        "if redis.call('GET', KEYS[3]) == token then return 1 end\n",
        "",
        RWLOCK,
    ),
    Mutant(
        "RLX5", "RWLOCK_RELEASE", "a release leaves its place in the queue",
        "if redis.call('EXISTS', queue) == 1 then leave(queue, places, wake, token) end\n",
        "",
        RWLOCK,
    ),
    Mutant(
        "RLX6", "RWLOCK_RELEASE", "a release wakes no waiter",
        "  wake_next(queue, places, wake, writer, readers)\n  return 1",
        "  return 1",
        RWLOCK,
    ),
    Mutant(
        "RLX7", "RWLOCK_RELEASE", "a reader's release counts itself among the readers left",
        "hit, readers = true, readers - 1",
        "hit = true",
        RWLOCK,
    ),
    Mutant(
        "RLX8", "RWLOCK_RELEASE", "a writer's release counts its own lease as still live",
        "hit, writer, wuntil = true, nil, 0",
        "hit = true",
        RWLOCK,
    ),
    Mutant(
        "RLX9", "RWLOCK_RELEASE", "a release leaves the keys' expiry as it was",
        "  settle(wuntil)\n  redis.call('SET', KEYS[3]",
        "  redis.call('SET', KEYS[3]",
        RWLOCK,
    ),
    Mutant(
        "RLK1", "RWLOCK_RELEASE", "a reader's release wakes a writer the other readers keep out",
        "(readers > 0 and is_writer(places, head))",
        "(false)",
        RWLOCK,
    ),
    Mutant(
        "RLK2", "RWLOCK_WITHDRAW", "a waiter is woken while a writer holds",
        "  if writer or redis.call('EXISTS', queue) == 0 then return end",
        "  if redis.call('EXISTS', queue) == 0 then return end",
        RWLOCK,
    ),
    Mutant(
        "RLK3", "RWLOCK_RELEASE",
        "the wake-up chooses again by TIME read later: a first place ending in between "
        "passes it on, to a writer the readers keep out",
        "  wake_up(wake, head, until_ms, NOW)\n",
        "  wake_head(queue, places, wake)\n",
        RWLOCK,
    ),
    Mutant(
        "RLK4", "RWLOCK_RELEASE", "the woken waiter's wake list outlives its place",
        "  wake_up(wake, head, until_ms, NOW)\n",
        "  wake_up(wake, head, until_ms, 0)\n",
        RWLOCK,
    ),
    Mutant(
        "RLW1", "RWLOCK_WITHDRAW", "a first waiter that gives up keeps its wake-up from the next",
        "if head == token then\n  local foreign",
        "if false then\n  local foreign",
        RWLOCK,
    ),
    Mutant(
        "RLW2", "RWLOCK_WITHDRAW", "a withdrawal leaves its place in the queue",
        "leave(queue, places, wake, token)\nif head == token then",
        "if head == token then",
        RWLOCK,
    ),
    Mutant(
        "RLW3", "RWLOCK_WITHDRAW", "a withdrawal wakes a writer the readers keep out",
        "  if not foreign then wake_next(queue, places, wake, writer, readers) end",
        "  if not foreign then wake_next(queue, places, wake, writer, 0) end",
        RWLOCK,
    ),
    Mutant(
        "RLW4", "RWLOCK_WITHDRAW", "a withdrawal wakes a waiter for another primitive's key",
        "  if not foreign then wake_next(",
        "  if true then wake_next(",
        RWLOCK,
    ),
    # -- the election (the lock's scripts with the leader record, and its own two) ----------
    Mutant(
        "EL1", "W_ACQUIRE", "a campaign's grant writes no leader record",
        "    redis.call('HSET', RECORD, 'tok', token, 'id', id, 'fence', "
        "string.format('%.0f', fence))\n",
        "",
        ELECTION,
    ),
    Mutant(
        "EL2", "RELEASE", "a handed candidate is named by the caller's identity alone (none)",
        "local id = token == ARGV[1] and ARGV[7] or redis.call('HGET', KEYS[4], '#' .. token) "
        "or ''",
        "local id = ARGV[7] or ''",
        ELECTION,
    ),
    Mutant(
        "EL3", "WITHDRAW", "the candidate a withdrawal hands the key to is named as the withdrawer",
        "local id = token == ARGV[1] and ARGV[7] or redis",
        "local id = ARGV[7] or redis",
        ELECTION,
    ),
    Mutant(
        "EL4", "RELEASE", "a handed candidate's identity read from its place's handed TTL",
        "redis.call('HGET', KEYS[4], '#' .. token)",
        "redis.call('HGET', KEYS[4], '>' .. token)",
        ELECTION,
    ),
    Mutant(
        "EL5", "W_ACQUIRE", "the record is written without its fence",
        "'id', id, 'fence', string.format('%.0f', fence))",
        "'id', id)",
        ELECTION,
    ),
    Mutant(
        "EL6", "RELEASE", "the record's fence drawn anew, not the one granted",
        "'fence', string.format('%.0f', fence))",
        "'fence', redis.call('INCR', FENCES))",
        ELECTION,
    ),
    Mutant(
        "EL7", "W_ACQUIRE", "the record never expires: it outlives the lease it names",
        "    redis.call('PEXPIRE', RECORD, ttl)\n",
        "",
        ELECTION,
    ),
    Mutant(
        "EL8", "RELEASE", "a handed record lives the releaser's TTL, not the handed lease's",
        "    redis.call('PEXPIRE', RECORD, ttl)\n",
        "    redis.call('PEXPIRE', RECORD, ARGV[2])\n",
        ELECTION,
    ),
    Mutant(
        "EL9", "W_ACQUIRE", "a refused candidate's place keeps no identity",
        "if NOTE then redis.call('HSET', places, '#' .. token, NOTE) end\n",
        "",
        ELECTION,
    ),
    Mutant(
        "EL10", "W_ACQUIRE", "a candidate that leaves the queue leaves its note behind",
        "  redis.call('HDEL', places, token, '>' .. token, '#' .. token)\n",
        "  redis.call('HDEL', places, token, '>' .. token)\n",
        ELECTION,
    ),
    Mutant(
        "EL11", "RELEASE", "an ended place is dropped without its note",
        "    redis.call('HDEL', places, head, '>' .. head, '#' .. head)\n",
        "    redis.call('HDEL', places, head, '>' .. head)\n",
        ELECTION,
    ),
    Mutant(
        "EL12", "E_RENEW", "a renewal renews the key but not the record",
        "  redis.call('PEXPIRE', KEYS[2], ARGV[2])\n",
        "",
        ELECTION,
    ),
    Mutant(
        "EL13", "E_RENEW", "the record is renewed whoever holds the key",
        "if read('GET', KEYS[1]) == ARGV[1] then\n  local renewed",
        "redis.call('PEXPIRE', KEYS[2], ARGV[2])\nif read('GET', KEYS[1]) == ARGV[1] then\n"
        "  local renewed",
        ELECTION,
    ),
    Mutant(
        "EL14", "E_RENEW", "a renewal without the token check",
        "if read('GET', KEYS[1]) == ARGV[1] then\n  local renewed",
        "if redis.call('EXISTS', KEYS[1]) == 1 then\n  local renewed",
        ELECTION,
    ),
    Mutant(
        "EL20", "E_RENEW", "the record's TTL is set before the key's: a renewal spanning a ms "
        "leaves the record to expire before its lease (Redis 7.0 reads its clock per command)",
        "  local renewed = redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
        "  redis.call('PEXPIRE', KEYS[2], ARGV[2])\n  return renewed\n",
        "  redis.call('PEXPIRE', KEYS[2], ARGV[2])\n"
        "  return redis.call('PEXPIRE', KEYS[1], ARGV[2])\n",
        ("tests/properties/test_election_stateful.py::"
         "test_a_renewal_never_leaves_the_record_to_expire_before_its_lease",),
    ),
    Mutant(
        "EL15", "E_LEADER", "the record is reported whatever token the key holds",
        "if rec[1] ~= token then return {} end\n",
        "",
        ELECTION,
    ),
    Mutant(
        "EL16", "E_LEADER", "the record's remaining TTL is reported, not the key's",
        "redis.call('PTTL', KEYS[1])}",
        "redis.call('PTTL', KEYS[2])}",
        ELECTION,
    ),
    Mutant(
        "EL17", "E_LEADER", "a key of another type is a WRONGTYPE error, not nobody leading",
        "local token = read('GET', KEYS[1])",
        "local token = redis.call('GET', KEYS[1])",
        ELECTION,
    ),
    Mutant(
        "EL18", "E_LEADER", "a free key is not read as nobody leading",
        "if not token then return {} end\n",
        "",
        ELECTION,
    ),
    Mutant(
        "EL19", "RELEASE", "a handoff to a place without a note fails half-written",
        "'#' .. token) or ''",
        "'#' .. token)",
        ELECTION,
    ),
    # -- the queue (shared by every waiting script and the releases) ------------------------
    Mutant(
        "Q1", "W_ACQUIRE", "a key handed to the first waiter leaves it in the queue",
        "  local element = '=' .. string.format('%.0f', grant(head, ttl))\n"
        "  leave(queue, places, wake, head)\n",
        "  local element = '=' .. string.format('%.0f', grant(head, ttl))\n",
        (EDGES, *WAIT, WAIT_MODEL),
    ),
    Mutant(
        "Q2", "W_ACQUIRE", "an expired first waiter is never dropped from the queue",
        "    if until_ms > now then return head, until_ms end",
        "    if true then return head, until_ms end",
        (EDGES, *WAIT, WAIT_MODEL),
    ),
    Mutant(
        "Q3", "RELEASE", "a handed fence pushed as Lua's own number text (14 digits)",
        "  local element = '=' .. string.format('%.0f', grant(head, ttl))\n",
        "  local element = '=' .. grant(head, ttl)\n",
        ("tests/test_lua_scripts.py", *WAIT),
    ),
    Mutant(
        "Q4", "RWLOCK_ACQUIRE", "a waiter already woken gets a second wake-up in its list",
        "  if redis.call('LLEN', wake .. token) > 0 then return end\n",
        "",
        (*RWLOCK, EDGES),
    ),
    Mutant(
        "Q5", "RWLOCK_RELEASE", "a woken waiter's wake list never expires",
        "  redis.call('PEXPIRE', wake .. token, until_ms - now)\n",
        "",
        (*RWLOCK, EDGES),
    ),
    # -- the operator's scripts -------------------------------------------------------------
    Mutant(
        "OW1", "OWNER", "a reentrant holder's fence is not reported",
        "  return {kind, ttl, token, fence, 1}",
        "  return {kind, ttl, token, '', 1}",
        (OPERATOR,),
    ),
    Mutant(
        "FU1", "FORCE_UNLOCK", "an eviction does not bump the fence counter",
        "next_fence(KEYS[2])\nfor i = 1",
        "for i = 1",
        (OPERATOR,),
    ),
)

#: ``make mutation MUTANTS=quick``: a few mutants, one per family, cheap enough for the
#: main test path.
QUICK: Final = tuple(m for m in MUTANTS if m.quick)


class StaleMutantError(Exception):
    """A mutant's old text is not found exactly once: the list no longer fits the scripts."""


def read_scripts(root: Path = ROOT) -> dict[str, str]:
    """The script files of the checkout at ``root``, by name (``"acquire"``,
    ``"lib/queue"``)."""
    return read_files(root / LUA)


def locate(files: Mapping[str, str], mutant: Mutant) -> str:
    """The name of the one file of ``files`` that holds ``mutant``'s old text, or
    :class:`StaleMutantError` when the text is not found exactly once in all of them."""
    holders = [name for name, text in files.items() for _ in range(text.count(mutant.old))]
    if len(holders) != 1:
        raise StaleMutantError(
            f"{mutant.name}: old text found {len(holders)} times, not once"
            + (f" (in {', '.join(sorted(set(holders)))})" if holders else "")
        )
    return holders[0]


def apply(files: Mapping[str, str], mutant: Mutant) -> dict[str, str]:
    """``files`` with ``mutant``'s replacement made, or :class:`StaleMutantError`."""
    name = locate(files, mutant)
    return {**files, name: files[name].replace(mutant.old, mutant.new)}


def script_sources(files: Mapping[str, str]) -> dict[str, str]:
    """The Lua Redis runs for every script of ``files``, by the name of its constant in
    ``distlock._protocol`` (``acquire.lua`` is ``ACQUIRE``)."""
    return {name.upper(): lua for name, lua in assemble_all(files).items()}


def changed_scripts(files: Mapping[str, str], mutant: Mutant) -> set[str]:
    """The script constants whose Lua ``mutant`` changes."""
    before = script_sources(files)
    after = script_sources(apply(files, mutant))
    return {name for name, lua in before.items() if after[name] != lua}


@dataclass(frozen=True, slots=True)
class Outcome:
    mutant: Mutant
    verdict: str  # "killed", "SURVIVED", "ERROR"
    detail: str
    seconds: float


_FAILED: Final = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def run_one(scratch: Path, files: Mapping[str, str], mutant: Mutant) -> Outcome:
    """Patch the scratch checkout's script file with ``mutant``, run its tests there, put
    the file back."""
    t0 = time.monotonic()
    try:
        name = locate(files, mutant)
    except StaleMutantError as stale:
        return Outcome(mutant, "ERROR", str(stale), 0.0)
    original = files[name]
    target = scratch / LUA / f"{name}.lua"
    target.write_text(original.replace(mutant.old, mutant.new))
    env = {**os.environ, "PYTHONPATH": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    try:
        done = subprocess.run(
            [*command, *mutant.tests],
            cwd=scratch,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Outcome(mutant, "killed", f"its tests hung past {TIMEOUT_S} s", TIMEOUT_S)
    finally:
        target.write_text(original)
    seconds = time.monotonic() - t0
    if done.returncode == 1:
        failed = _FAILED.search(done.stdout)
        return Outcome(mutant, "killed", f"by {failed[1] if failed else '?'}", seconds)
    if done.returncode == 0:
        return Outcome(mutant, "SURVIVED", "every test passed", seconds)
    tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
    return Outcome(mutant, "ERROR", f"pytest exit {done.returncode}: {' | '.join(tail)}", seconds)


def _scratch_imports_itself(scratch: Path) -> None:
    """The scratch checkout imports its own ``distlock``, which reads its own scripts."""
    env = {**os.environ, "PYTHONPATH": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}
    code = "import distlock._protocol as p, distlock._lua as l; print(p.__file__, l.lua_dir())"
    where = subprocess.run(
        [sys.executable, "-c", code],
        cwd=scratch, env=env, capture_output=True, text=True, check=True,
    ).stdout.split()
    if [Path(w).resolve() for w in where] != [(scratch / p).resolve() for p in (PROTOCOL, LUA)]:
        raise SystemExit(f"the scratch checkout imports {where}, not its own distlock")


def copy_checkout(root: Path, scratch: Path) -> None:
    """The checkout as the tests see it: tracked and new files, nothing git ignores (no
    build products, caches or results); outside git, everything but :data:`IGNORED`."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, capture_output=True, check=False,
    )
    if listed.returncode != 0:
        shutil.copytree(root, scratch, ignore=IGNORED)
        return
    for name in listed.stdout.decode().split("\0"):
        source = root / name
        if name and source.is_file():  # a tracked file deleted in the work tree is skipped
            (scratch / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, scratch / name)


def baseline(scratch: Path, mutants: tuple[Mutant, ...]) -> None:
    """The mutants' tests pass on the scripts as they are: a test that fails anyway would
    count every mutant it is named for as killed."""
    tests = sorted({test for m in mutants for test in m.tests})
    env = {**os.environ, "PYTHONPATH": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=scratch, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )
    if done.returncode != 0:
        failed = ", ".join(_FAILED.findall(done.stdout)) or done.stdout[-500:]
        raise SystemExit(f"the mutants' tests fail without any mutant: {failed}")


def run(mutants: tuple[Mutant, ...], root: Path = ROOT) -> list[Outcome]:
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="distlock-mutation-") as tmp:
        scratch = Path(tmp) / "checkout"
        copy_checkout(root, scratch)
        _scratch_imports_itself(scratch)
        baseline(scratch, mutants)
        files = read_scripts(scratch)
        for mutant in mutants:
            outcome = run_one(scratch, files, mutant)
            outcomes.append(outcome)
            print(
                f"{outcome.verdict:8} {mutant.name:5} {mutant.script:10} {mutant.what}: "
                f"{outcome.detail} ({outcome.seconds:.1f} s)",
                flush=True,
            )
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "select", nargs="*", help="'quick', 'all' (the default), or mutants' names"
    )
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = parser.parse_args(argv)
    by_name = {m.name: m for m in MUTANTS}
    if not args.select or args.select == ["all"]:
        chosen = MUTANTS
    elif args.select == ["quick"]:
        chosen = QUICK
    else:
        unknown = [name for name in args.select if name not in by_name]
        if unknown:
            parser.error(f"no such mutant: {', '.join(unknown)}")
        chosen = tuple(by_name[name] for name in args.select)
    if args.list:
        for m in chosen:
            print(f"{m.name:5} {m.script:10} {m.what} [{' '.join(m.tests)}]")
        return 0
    t0 = time.monotonic()
    outcomes = run(chosen)
    killed = sum(o.verdict == "killed" for o in outcomes)
    print(f"{killed} of {len(outcomes)} killed ({time.monotonic() - t0:.0f} s)")
    return 0 if killed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
