-- S_WITHDRAW: the semaphore's withdrawal (see lib/withdraw.lua): nothing was handed (a
-- permit granted late is given back by the client's own release); a permit free when
-- the first waiter gives up passes the wake-up on.
-- KEYS: [1] the semaphore key, [2] the key again (never touched), [3] its queue, [4] the
--   queue's places.
-- ARGV: as SW_ACQUIRE's ([3] unused).
-- Returns: 1.
-- Spec: Wait.tla RedisLeave (the WakeUps models)
-- include: read queue permits
local LIMIT = tonumber(ARGV[6])
-- include: s_busy
local function drop() return false end
local GRANT = nil
-- include: withdraw
