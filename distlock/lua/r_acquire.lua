-- R_ACQUIRE: the reentrant lock's plain acquire (lib/r_claim.lua) for the caller.
-- KEYS: [1] the lock key (a hash {<token>: depth, fence: <fence>}), [2] the fence
--   counter.
-- ARGV: [1] token, [2] ttl ms.
-- Returns: {1, fence} when granted (or a resend of our own acquire: the stored fence);
--   {0, 0} when another token holds the key, or it is another type.
-- Spec: Reentrant.tla RedisStep (m.kind = "acquire")
-- include: read r_claim
return claim_as(ARGV[1], ARGV[2])
