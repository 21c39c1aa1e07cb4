-- RELEASE: the lock's release.  The record is a short-lived key of its own, so the lock
-- key is gone the moment it is released; it is named after the token (released_key), so
-- every token released within the memory is remembered, not only the last: a resend
-- that comes after another owner's whole section is still ours.  A record per token
-- costs the release nothing more than one per key (a SET with a TTL, which Redis expires
-- itself), where a set of tokens would add the clock, a trim and an expiry to every
-- release.  Deleting the key and handing it to the first waiter are one atomic step: the
-- key goes straight to the first live waiter, with the TTL its place keeps and a new
-- fence, which its wake list carries ('=fence'), so the waiter holds the key the moment
-- its BLPOP answers, with no attempt of its own; a key handed before it was deleted
-- would be held twice.  The queue's functions are defined only where there is a queue
-- (the include inside the if): defining them costs Redis about a microsecond, and most
-- releases have nobody waiting.  For the same reason the key is read with a pcall of
-- its own rather than lib/read.lua's function: a key of another type (WRONGTYPE) is
-- not ours, as read() has it, and any other error is raised, before anything is written.
-- An election's resignation is this script with the leader record: the handoff writes
-- the next candidate's (lib/hands_off.lua); the resigning leader's is left to expire with
-- the TTL it shares with the key, and no read reports it once the key is gone.
-- KEYS: [1] the lock key, [2] this token's release record, [3] the key's queue, [4] its
--   places, [5] the fence counter, [6] an election's leader record (none for a lock).
-- ARGV: [1] token, [2] the record's life, ms (RELEASE_MEMORY_MS).  The wake lists'
--   prefix is the queue's name with its prefix made the wake lists' (the names of
--   distlock/_queue_names.py, as queue_keys makes them), made only where there is a
--   queue: each argument costs every release a slot in Redis's ARGV table, and a third
--   one made it grow twice, not once.
-- Substitutes: ${WAKE_PREFIX} and ${QUEUE_PREFIX_LEN}, from distlock/_queue_names.py.
-- Returns: 1 if deleted now, or if this token's release already deleted it (a resend);
--   0 if the key is not ours and we did not release it.
-- Spec: DistLock.tla RedisStep (m.kind = "release"); Wait.tla RedisRelease; Election.tla
--   RedisRun (its RecordGrant)
local v = redis.pcall('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  if redis.call('EXISTS', KEYS[3]) == 1 then
    -- include: queue
    local FENCES, RECORD = KEYS[5], KEYS[6]
    -- include: claim hands_off
    local wake = '${WAKE_PREFIX}' .. string.sub(KEYS[3], ${QUEUE_PREFIX_LEN} + 1) .. ':'
    hand_head(KEYS[3], KEYS[4], wake, handed)
  end
  return 1
end
if type(v) == 'table' and not string.find(v.err, 'WRONGTYPE', 1, true) then error(v) end
if redis.call('GET', KEYS[2]) == ARGV[1] then return 1 end
return 0
