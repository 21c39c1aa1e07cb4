-- RWLOCK_RENEW: the read-write lock's renewal and extend.  Only our own live lease is
-- renewed: a reader's that expired (evicted or not) never comes back, nor a writer's
-- whose hash holds another token.  Each reader's expiry is its own: renewing one moves
-- no other's, so a dead reader's lease ends at its own TTL, whoever else renews.
-- KEYS: [1] the key, [2] its readers.
-- ARGV: [1] token, [2] ttl ms, [3] 'read' or 'write'.
-- Returns: 1 if our lease was live and now ends ttl ms from now, else 0.
-- Spec: ReadWrite.tla RedisStep (m.kind \in {"renew", "extend"})
-- include: rw
local foreign, writer, _, wuntil = rw_state()
if foreign then return 0 end
local ends = NOW + tonumber(ARGV[2])
if ARGV[3] == 'write' then
  if writer ~= ARGV[1] then return 0 end
  redis.call('HSET', KEYS[1], 'x', ms(ends))
  settle(ends)
  return 1
end
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[2], 'XX', ms(ends), ARGV[1])
settle(wuntil)
return 1
