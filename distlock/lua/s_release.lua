-- S_RELEASE: the semaphore's release.  The memory is per token because several holders
-- release concurrently; it is its own key, so the semaphore key is gone the moment its
-- last permit is.  The first waiter is woken in the same step.
-- KEYS: [1] the semaphore key, [2] its release memory (a sorted set token -> forget
--   instant), [3] its queue, [4] the queue's places.
-- ARGV: [1] token, [2] the memory's life, ms (RELEASE_MEMORY_MS), [3] the wake lists'
--   prefix.
-- Returns: 1 if our permit was live and is now removed, or if this token's release is
--   remembered (a resend); else 0.
-- Spec: Semaphore.tla RedisStep (m.kind = "release"); Wait.tla RedisRelease (the WakeUps models)
-- include: read queue permits
local score, foreign = read('ZSCORE', KEYS[1], ARGV[1])
if foreign then return 0 end
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms(now))
if score and tonumber(score) > now then
  redis.call('ZREM', KEYS[1], ARGV[1])
  expire_at_last(KEYS[1])
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms(now))
  redis.call('ZADD', KEYS[2], ms(now + tonumber(ARGV[2])), ARGV[1])
  expire_at_last(KEYS[2])
  wake_head(KEYS[3], KEYS[4], ARGV[3])
  return 1
end
local forget = redis.call('ZSCORE', KEYS[2], ARGV[1])
if forget and tonumber(forget) > now then return 1 end
return 0
