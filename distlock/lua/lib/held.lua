-- Piece held: a lock key that is ours already.
-- Needs: local FENCES (the fence counter's key), defined before this piece.
-- Defines: held_as(token, ttl) -> if the key holds token, its TTL re-set to ttl and the
--   counter's current value (a fence no smaller than the one the key was granted with:
--   the counter may have moved on since, other keys of the slot share it, and its value
--   is still above every earlier owner's fence and below every later owner's, which is
--   all a fence promises; a counter lost while the key was kept, an allkeys-* eviction,
--   gives a new fence, larger once Redis's clock has left the ms of the last one:
--   lib/fence.lua); else 0.
-- include: read fence
local function held_as(token, ttl)
  if read('GET', KEYS[1]) == token then
    redis.call('PEXPIRE', KEYS[1], ttl)
    return tonumber(redis.call('GET', FENCES) or next_fence(FENCES))
  end
  return 0
end
