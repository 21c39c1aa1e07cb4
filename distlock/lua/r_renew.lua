-- R_RENEW: the reentrant lock's renewal and extend.  The depth is left as it is: the
-- renewal runs on its own schedule and knows nothing of it.
-- KEYS: [1] the lock key.
-- ARGV: [1] token, [2] ttl ms.
-- Returns: 1 if extended, 0 if not ours.
-- Spec: Reentrant.tla RedisStep (m.kind = "renew")
-- include: read
if read('HGET', KEYS[1], ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
