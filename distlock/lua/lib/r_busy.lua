-- Piece r_busy: whether a reentrant lock's hash is busy for a waiting attempt (see
-- lib/wait.lua).
-- Defines: busy() -> 0, true if the hash holds our token (ARGV[1]); 0, false if the key
--   is gone; else its remaining TTL (or ARGV[4], a place's grace, when it has none),
--   false.
-- include: read
local function busy()
  local cur, foreign = read('HGET', KEYS[1], ARGV[1])
  if cur then return 0, true end
  if not foreign and redis.call('EXISTS', KEYS[1]) == 0 then return 0, false end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then return ttl, false end
  return tonumber(ARGV[4]), false
end
