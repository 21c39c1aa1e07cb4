-- Piece fence: a new fence from a slot's counter, never below a floor on Redis's clock.
-- Defines: next_fence(counter) -> INCR of the counter, or, if that is below the floor
--   (ms since FENCE_EPOCH_MS by Redis's TIME, times FENCES_PER_MS), the floor, which the
--   counter is set to.  A fence granted at ms t is then below the floor of ms t + 1
--   (unless Redis grants more than FENCES_PER_MS fences in a ms), so a counter lost with a
--   restart, or stale after a failover, still gives larger fences than before, as long as
--   Redis's clock then reads a later ms.  Every value stays below 2**53, where Lua's
--   numbers (doubles) are exact, until the year 2159.
--   It reads TIME itself rather than through lib/now.lua's now_ms: a free key's acquire
--   then defines one function, not two (each definition costs Redis a closure per call).
-- Substitutes: ${FENCE_EPOCH_MS} and ${FENCES_PER_MS}, from distlock/_fence_floor.py.
local function next_fence(counter)
  local fence = redis.call('INCR', counter)
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local floor = (ms - ${FENCE_EPOCH_MS}) * ${FENCES_PER_MS}
  if fence < floor then
    redis.call('SET', counter, floor)
    fence = floor
  end
  return fence
end
