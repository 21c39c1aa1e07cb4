-- R_ENTER: a re-entry: the depth set (setting rather than incrementing makes a resend
-- harmless) and the TTL refreshed, if the hash holds our token.
-- KEYS: [1] the lock key.
-- ARGV: [1] token, [2] ttl ms, [3] the new depth.
-- Returns: 1 if the hash holds our token, else 0.
-- Spec: Reentrant.tla RedisStep (m.kind = "enter")
-- include: read
if read('HGET', KEYS[1], ARGV[1]) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
