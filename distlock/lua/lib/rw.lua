-- Piece rw: what every read-write lock script shares.  KEYS[1] the key, a hash {rw: '1',
-- w: the writer's token, f: its fence, x: the instant its lease ends}, which lives while
-- any lease of the key does (so a Lock, a ReentrantLock or a Semaphore on the same key is
-- refused, and refuses it: each finds a type, or a hash, not its own); KEYS[2] the
-- readers, a sorted set {<token>: the instant its lease ends}, each reader's lease its own.
-- Instants are ms of Redis's clock (TIME: lib/now.lua), never a client's: clients disagree.
-- Numbers go to Redis formatted with %.0f: Lua's own number-to-text keeps 14 significant
-- digits, and instants have 13, fences 15.
-- Defines: NOW, the script's instant; ms(n) -> n as an integer's text.
--   rw_state() -> foreign (the key is another primitive's: nothing else is read), the live
--   writer's token (nil if none), its fence, the instant its lease ends (0 if none), the
--   number of live readers (expired ones are evicted first: O(log N + evicted)) and the
--   instant the latest of them ends (0 if none).
--   settle(wuntil): the key expires when its latest lease ends (the live writer's,
--   wuntil, or a reader's), or goes now if none is left; the readers' set expires with
--   its latest reader.
-- include: read now
local NOW = now_ms()
local function ms(n) return string.format('%.0f', n) end
local function rw_state()
  local fields, foreign = read('HMGET', KEYS[1], 'rw', 'w', 'f', 'x')
  if foreign then return true, nil, 0, 0, 0, 0 end
  if not fields[1] and redis.call('EXISTS', KEYS[1]) == 1 then
    return true, nil, 0, 0, 0, 0
  end
  local writer, wfence, wuntil = nil, 0, 0
  if fields[2] and tonumber(fields[4]) > NOW then
    writer, wfence, wuntil = fields[2], tonumber(fields[3]), tonumber(fields[4])
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms(NOW))
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if not last[2] then return false, writer, wfence, wuntil, 0, 0 end
  return false, writer, wfence, wuntil, redis.call('ZCARD', KEYS[2]), tonumber(last[2])
end
local function settle(wuntil)
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  local till = wuntil
  if last[2] then
    redis.call('PEXPIREAT', KEYS[2], ms(tonumber(last[2])))
    till = math.max(till, tonumber(last[2]))
  end
  if till > NOW then
    redis.call('PEXPIREAT', KEYS[1], ms(till))
  else
    redis.call('DEL', KEYS[1])
  end
end
