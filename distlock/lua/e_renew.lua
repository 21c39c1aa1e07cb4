-- E_RENEW: the leader's renewal (and a manual extend): the key's TTL re-set if it holds
-- our token, and the leader record's with it, so the record dies with the lease it names.
-- The key's first: Redis before 7.2 reads its clock at each command of a script, so the
-- record, given its TTL after the key, never expires before it.  One that expired a ms
-- before its key would be gone for the whole lease a renewal in that ms gives the key,
-- and no read would report the leader until the next grant.
-- KEYS: [1] the election's key, [2] the leader record.
-- ARGV: [1] token, [2] ttl ms.
-- Returns: 1 if extended, 0 if not ours.
-- Spec: Election.tla RedisRun (m.kind \in {"renew", "extend"}): DistLock.tla RedisStep
-- include: read
if read('GET', KEYS[1]) == ARGV[1] then
  local renewed = redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return renewed
end
return 0
