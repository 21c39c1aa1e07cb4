-- W_ACQUIRE: the lock's waiting acquire (see lib/wait.lua): the key is busy for its
-- remaining TTL unless it is free or ours (a resend of our own granted attempt, or a key
-- handed to us).  A refused attempt that asked to be handed the key keeps ARGV[6] in its
-- place for the release that hands it over.
-- An election's campaign is this script with the leader record and the candidate's
-- identity (see lib/hands_off.lua): its grant writes the record, its refusal keeps the
-- identity in its place for the release or withdrawal that hands it the key.
-- KEYS: [1] the lock key, [2] the fence counter, [3] the key's queue, [4] its places,
--   [5] an election's leader record (none for a lock).
-- ARGV: [1] token, [2] ttl ms, [3] the ms the caller may still wait (0: its last
--   attempt), [4] QUEUE_GRACE_MS, [5] the wake lists' prefix, [6] the TTL a release may
--   hand the key over with (0: woken instead), [7] a candidate's identity (none for a
--   lock).
-- Returns: {fence, 0} granted; {0, ms} refused, queued, may block up to ms; {0, 0} the
--   last attempt refused, out of the queue.
-- Spec: Wait.tla RedisAttempt; DistLock.tla RedisStep (m.kind = "acquire", with Handoff);
--   Election.tla RedisRun (its RecordGrant)
-- include: read queue
local FENCES, RECORD = KEYS[2], KEYS[5]
-- include: claim hands_off
local HANDOFF = tonumber(ARGV[6]) > 0
local NOTE = ARGV[7]
-- include: busy
local function room() return false end
-- include: wait
