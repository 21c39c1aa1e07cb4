-- S_RENEW: the semaphore's renewal and extend.  The membership check is what keeps an
-- evicted (or expired, not yet evicted) permit from coming back past the limit.
-- KEYS: [1] the semaphore key.
-- ARGV: [1] token, [2] ttl ms.
-- Returns: 1 if our permit was live and now ends ttl ms from now, else 0.
-- Spec: Semaphore.tla RedisStep (m.kind \in {"renew", "extend"})
-- include: read now permits
local score = read('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
local now = now_ms()
if tonumber(score) <= now then return 0 end
redis.call('ZADD', KEYS[1], 'XX', ms(now + tonumber(ARGV[2])), ARGV[1])
expire_at_last(KEYS[1])
return 1
