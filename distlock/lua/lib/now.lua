-- Piece now: Redis's clock in ms.  Scripts see time frozen at their start, so every call
-- in one script answers the same instant.
-- Defines: now_ms() -> ms since the epoch, by Redis's TIME.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
