-- Piece claim: the lock's plain acquire, for any token and TTL (acquire.lua is the same
-- for the caller's own, inlined).
-- Needs: local FENCES (the fence counter's key), defined before this piece.
-- Defines: claim_as(token, ttl) -> a new fence when the key (KEYS[1]) was free (set NX
--   to token for ttl ms), or held_as(token, ttl): the current fence when it holds token
--   already, else 0.
-- include: fence held
local function claim_as(token, ttl)
  if redis.call('SET', KEYS[1], token, 'NX', 'PX', ttl) then
    return next_fence(FENCES)
  end
  return held_as(token, ttl)
end
