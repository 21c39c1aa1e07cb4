-- Piece s_busy: whether a semaphore is busy for a waiting attempt (see lib/wait.lua):
-- until its earliest permit expires while LIMIT are live, unless our permit is among
-- them (a resend of our own granted attempt).
-- Needs: local LIMIT (the caller's limit), defined before this piece.
-- Defines: busy() -> 0, true if our permit (ARGV[1]) is live; 0, false if fewer than
--   LIMIT permits are live (expired ones are evicted); ARGV[4] (a place's grace), false
--   if the key is another type; else the ms until the earliest permit expires, false.
-- include: read now permits
local function busy()
  local score, foreign = read('ZSCORE', KEYS[1], ARGV[1])
  local now = now_ms()
  if score and tonumber(score) > now then return 0, true end
  if foreign then return tonumber(ARGV[4]), false end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms(now))
  if redis.call('ZCARD', KEYS[1]) < LIMIT then return 0, false end
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(first[2]) - now), false
end
