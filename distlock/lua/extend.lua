-- EXTEND: the lock's renewal and extend: the key's TTL re-set if it holds our token.
-- KEYS: [1] the lock key.
-- ARGV: [1] token, [2] ttl ms.
-- Returns: 1 if extended, 0 if not ours.
-- Spec: DistLock.tla RedisStep (m.kind \in {"renew", "extend"})
-- include: read
if read('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
