-- Piece read: reads a key without the risk of a WRONGTYPE error.
-- Defines: read(cmd, key, ...) -> the command's reply and false, or false, true when the
--   key holds another type (a Lock's string where a ReentrantLock keeps a hash or a
--   Semaphore a sorted set, in any combination): such a key is held by someone else,
--   never an error.  Any other error is raised as it is.
local function read(...)
  local v = redis.pcall(...)
  if type(v) == 'table' and v.err then
    if string.find(v.err, 'WRONGTYPE', 1, true) then return false, true end
    error(v)
  end
  return v, false
end
