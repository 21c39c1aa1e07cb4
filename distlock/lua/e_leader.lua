-- E_LEADER: who leads an election (Election.leader; observe's reads), in one script: the
-- key's token and remaining TTL and the leader record, reported only when the record's
-- token is the one the key holds (a record is written by every grant and lives as long
-- as its lease, but a read must never name a candidate whose lease is not the key's).
-- Writes nothing.
-- KEYS: [1] the election's key, [2] the leader record.
-- ARGV: none.
-- Returns: {} when nobody leads, else {identity, fence (text: a fence may exceed a Lua
--   number's exact range), the key's PTTL ms}.
-- Spec: Election.tla LeaderRead
-- include: read
local token = read('GET', KEYS[1])
if not token then return {} end
local rec = redis.call('HMGET', KEYS[2], 'tok', 'id', 'fence')
if rec[1] ~= token then return {} end
return {rec[2], rec[3], redis.call('PTTL', KEYS[1])}
