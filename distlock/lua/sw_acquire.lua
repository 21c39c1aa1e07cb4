-- SW_ACQUIRE: the semaphore's waiting acquire (see lib/wait.lua): busy until its earliest
-- permit expires while the limit's permits are live, unless ours is among them (a resend
-- of our own granted attempt); after a grant, the next waiter is woken at once while
-- permits are left, so N free permits reach the first N waiters.  Nothing is handed: a
-- release wakes.
-- KEYS: [1] the semaphore key, [2] the key again (never touched: the semaphore's ACL
--   has no rights on the fence counters), [3] its queue, [4] the queue's places.
-- ARGV: [1] token, [2] ttl ms, [3] the ms the caller may still wait (0: its last
--   attempt), [4] QUEUE_GRACE_MS, [5] the wake lists' prefix, [6] the caller's limit.
-- Returns: {1, 0} granted; {0, ms} refused, queued, may block up to ms; {0, 0} the last
--   attempt refused, out of the queue.
-- Spec: Wait.tla RedisAttempt (the WakeUps models); Semaphore.tla RedisStep (m.kind = "acquire")
-- include: read queue permits
local LIMIT = tonumber(ARGV[6])
local HANDOFF = false
local NOTE = nil
-- include: s_claim s_busy
local function room()
  return redis.call('ZCARD', KEYS[1]) < LIMIT
end
-- include: wait
