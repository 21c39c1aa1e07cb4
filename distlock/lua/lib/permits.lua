-- Piece permits: what every semaphore script shares.  A semaphore is a sorted set
-- {<token>: expiry instant} under its key.  A permit's expiry is an instant of Redis's
-- clock (ms, from TIME inside the script: lib/now.lua), never a client's: clients
-- disagree, and a fast one would evict live permits.  The key itself expires at its
-- latest permit's instant, so it is gone once its last permit is released or expired.
-- Scores and instants are formatted with %.0f: a Lua number handed to Redis as is may
-- be written in exponent form, which PEXPIREAT refuses.
-- Defines: ms(n) -> n as an integer's text; expire_at_last(key): key expires at its
--   highest score.
local function ms(n) return string.format('%.0f', n) end
local function expire_at_last(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then redis.call('PEXPIREAT', key, ms(tonumber(last[2]))) end
end
