-- Piece s_claim: the semaphore's plain acquire.  KEYS[1] the semaphore key; ARGV[1]
-- token, ARGV[2] ttl ms.  Permits expired by now are evicted first: O(log N + evicted),
-- no scan.  Idempotent for the same token: a client-library resend of our own acquire
-- finds our live permit and re-sets its expiry instead of taking a second one.  Each
-- caller compares the live count with its own limit.
-- Needs: local LIMIT (the caller's limit), defined before this piece.
-- Defines: claim() -> 1 if granted, 0 if LIMIT permits are live or the key is another
--   type (a lock's).
-- include: read now permits
local function claim()
  local score, foreign = read('ZSCORE', KEYS[1], ARGV[1])
  if foreign then return 0 end
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms(now))
  if not (score and tonumber(score) > now)
      and redis.call('ZCARD', KEYS[1]) >= LIMIT then
    return 0
  end
  redis.call('ZADD', KEYS[1], ms(now + tonumber(ARGV[2])), ARGV[1])
  expire_at_last(KEYS[1])
  return 1
end
