-- ACQUIRE: the lock's plain acquire.  Idempotent for the same token: a client-side retry
-- of a request that already ran gets its own fence back instead of being told the lock
-- is taken by someone else (itself).  SET NX first, before the functions a held key needs
-- are defined: a free key, the common case, costs SET, INCR and TIME (and a SET of the
-- counter when it is below the clock's floor: lib/fence.lua), not a GET more (each call
-- from a script costs Redis a few microseconds), and defining those functions costs Redis
-- more than a tenth of a free key's acquire.  SET NX fails without an error on a key of
-- any type, and only then is the holder read (held_as: the key is ours again only if this
-- token holds it).
-- KEYS: [1] the lock key, [2] the fence counter.
-- ARGV: [1] token, [2] ttl ms.
-- Returns: the new fence; the current fence when the key holds our token already (a
--   resend); 0 when another token holds the key.
-- Spec: DistLock.tla RedisStep (m.kind = "acquire")
-- include: fence
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return next_fence(KEYS[2])
end
-- include: read
local FENCES = KEYS[2]
-- include: held
return held_as(ARGV[1], ARGV[2])
