-- R_LEAVE: an inner exit: the depth set, if the hash holds our token.  Never deletes:
-- only the outermost exit (R_RELEASE) frees the key.
-- KEYS: [1] the lock key.
-- ARGV: [1] token, [2] the new depth (at least 1).
-- Returns: 1 if the hash holds our token, else 0.
-- Spec: Reentrant.tla RedisStep (m.kind = "leave")
-- include: read
if read('HGET', KEYS[1], ARGV[1]) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  return 1
end
return 0
