-- S_ACQUIRE: the semaphore's plain acquire (lib/s_claim.lua) for the caller's limit.
-- KEYS: [1] the semaphore key (a sorted set {<token>: expiry instant}).
-- ARGV: [1] token, [2] ttl ms, [3] the caller's limit.
-- Returns: 1 if granted (or our own permit is live: a resend), 0 if the limit's permits
--   are live or the key is another type.
-- Spec: Semaphore.tla RedisStep (m.kind = "acquire")
-- include: read now permits
local LIMIT = tonumber(ARGV[3])
-- include: s_claim
return claim()
