-- OWNER: who holds a key, for operators (Lock.owner, a Semaphore's locked; see
-- distlock/_operator.py).  Read only, whatever the key's type (never a WRONGTYPE
-- error): a string's value as the token; a hash of two fields (a reentrant lock's) its
-- token field and its fence (as text: a fence may exceed a Lua number's exact range); a
-- read-write lock's hash (its field rw is '1') as 'read-write', with its live writer's
-- token and fence ('' and '' while no writer holds it) and its live readers as count
-- ('' when they cannot be read: a user without rights on their set); a sorted set's (a
-- semaphore's) permits live by Redis's clock as count.  '' and '' where a part is
-- unknown.
-- KEYS: [1] the key.
-- ARGV: [1] the key's readers' set, were it a read-write lock's (distlock._protocol's
--   readers_key, in the key's slot): read only then, and not in KEYS, since Redis checks
--   a user's rights on every key passed, and an operator's user may have none on it.
-- Returns: false when the key is free, else {type, pttl, token, fence, count}.
-- Spec: none: an operator's script, outside every model (it writes nothing).
-- include: now
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then return false end
local ttl = redis.call('PTTL', KEYS[1])
if kind == 'string' then
  return {kind, ttl, redis.call('GETRANGE', KEYS[1], 0, 63), '', 1}
end
if kind == 'hash' and redis.call('HGET', KEYS[1], 'rw') == '1' then
  local now = now_ms()
  local token, fence = '', ''
  local writer, until_ms = redis.call('HGET', KEYS[1], 'w'), redis.call('HGET', KEYS[1], 'x')
  if writer and tonumber(until_ms or '0') > now then
    token, fence = writer, redis.call('HGET', KEYS[1], 'f') or ''
  end
  local readers = ''
  if ARGV[1] and ARGV[1] ~= '' then
    local live = redis.pcall('ZCOUNT', ARGV[1], '(' .. string.format('%.0f', now), '+inf')
    if type(live) == 'number' then readers = live end
  end
  return {'read-write', ttl, token, fence, readers}
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
