-- Piece now: Redis's clock in ms.  Redis judges keys' expiry at a script's start, but
-- TIME moves on within a script (Redis 7.0 does not freeze it): two calls in one script
-- may answer two instants, so a script that decides by one instant reads it once.
-- Defines: now_ms() -> ms since the epoch, by Redis's TIME.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
