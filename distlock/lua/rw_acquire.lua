-- RW_ACQUIRE: the reentrant lock's waiting acquire (see lib/wait.lua): the hash is busy
-- for its remaining TTL unless it is gone or holds our token.
-- KEYS: [1] the lock key, [2] the fence counter, [3] the key's queue, [4] its places.
-- ARGV: as W_ACQUIRE's.
-- Returns: {fence, 0} granted; {0, ms} refused, queued, may block up to ms; {0, 0} the
--   last attempt refused, out of the queue.
-- Spec: Wait.tla RedisAttempt; Reentrant.tla RedisStep (m.kind = "acquire")
local RECORD = nil  -- no leader record: an election's key alone has one
-- include: read queue r_claim hands_off
local HANDOFF = tonumber(ARGV[6]) > 0
local NOTE = nil
-- include: r_busy
local function room() return false end
-- include: wait
