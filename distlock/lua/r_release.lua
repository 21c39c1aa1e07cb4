-- R_RELEASE: the reentrant lock's outermost exit.  The record is the one RELEASE writes
-- (released_key); the key is handed to the first waiter in the same step, as RELEASE
-- hands it (a new hash at depth 1 with a new fence).
-- KEYS: [1] the lock key, [2] the fence counter (read by the hand-off's claim_as), [3]
--   this token's release record, [4] the key's queue, [5] its places.
-- ARGV: [1] token, [2] the record's life, ms (RELEASE_MEMORY_MS), [3] the wake lists'
--   prefix.
-- Returns: 1 if deleted now, or if this token's release already deleted it (a resend);
--   else 0.
-- Spec: Reentrant.tla RedisStep (m.kind = "release"); Wait.tla RedisRelease
local RECORD = nil  -- no leader record: an election's key alone has one
-- include: read queue r_claim hands_off
if read('HGET', KEYS[1], ARGV[1]) then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
  hand_head(KEYS[4], KEYS[5], ARGV[3], handed)
  return 1
end
if redis.call('GET', KEYS[3]) == ARGV[1] then return 1 end
return 0
