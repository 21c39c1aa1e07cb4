-- Piece r_claim: the reentrant lock's plain acquire, for any token and TTL.  KEYS[1] the
-- lock key (a hash {<token>: depth, fence: <fence>}), KEYS[2] the fence counter.
-- Defines: claim_as(token, ttl) -> {1, fence} when granted: a new hash with token at
--   depth 1 and a fresh fence, or our own hash again (a resend of our outermost acquire:
--   the TTL is re-set, the depth is left alone and the stored fence comes back).
--   {0, 0} when the key is held by another token, or is another type (a Lock's string):
--   refused, never an error.
-- include: read fence
local function claim_as(token, ttl)
  local cur, foreign = read('HGET', KEYS[1], token)
  if foreign then return {0, 0} end
  if cur then
    redis.call('PEXPIRE', KEYS[1], ttl)
    return {1, tonumber(redis.call('HGET', KEYS[1], 'fence'))}
  end
  if redis.call('EXISTS', KEYS[1]) == 1 then return {0, 0} end
  local fence = next_fence(KEYS[2])
  redis.call('HSET', KEYS[1], token, 1, 'fence', fence)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, fence}
end
