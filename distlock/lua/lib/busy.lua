-- Piece busy: whether a lock key is busy for a waiting attempt (see lib/wait.lua).
-- Defines: busy() -> 0, true if the key holds our token (ARGV[1]: a resend of our own
--   granted attempt, or a key handed to us); 0, false if it is free; else its remaining
--   TTL (or ARGV[4], a place's grace, when it has none), false.
-- include: read
local function busy()
  local cur, foreign = read('GET', KEYS[1])
  if cur == ARGV[1] then return 0, true end
  if not (cur or foreign) then return 0, false end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then return ttl, false end
  return tonumber(ARGV[4]), false
end
