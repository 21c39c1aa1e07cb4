-- OWNER: who holds a key, for operators (Lock.owner, a Semaphore's locked; see
-- distlock/_operator.py).  Read only, whatever the key's type (never a WRONGTYPE
-- error): a string's value as the token; a hash of two fields (a reentrant lock's) its
-- token field and its fence (as text: a fence may exceed a Lua number's exact range); a
-- sorted set's (a semaphore's) permits live by Redis's clock as count.  '' and '' where
-- a part is unknown.
-- KEYS: [1] the key.
-- ARGV: none.
-- Returns: false when the key is free, else {type, pttl, token, fence, count}.
-- Spec: none: an operator's script, outside every model (it writes nothing).
-- include: now
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then return false end
local ttl = redis.call('PTTL', KEYS[1])
if kind == 'string' then
  return {kind, ttl, redis.call('GETRANGE', KEYS[1], 0, 63), '', 1}
end
if kind == 'hash' then
  if redis.call('HLEN', KEYS[1]) ~= 2 then return {kind, ttl, '', '', 0} end
  local fields = redis.call('HGETALL', KEYS[1])
  local token, fence = '', ''
  for i = 1, #fields, 2 do
    if fields[i] == 'fence' then fence = fields[i + 1] else token = fields[i] end
  end
  return {kind, ttl, token, fence, 1}
end
if kind == 'zset' then
  local now = now_ms()
  local live = redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%.0f', now), '+inf')
  return {kind, ttl, '', '', live}
end
return {kind, ttl, '', '', 0}
