-- Piece withdraw: the body of every withdrawal (withdraw.lua, r_withdraw.lua,
-- s_withdraw.lua); it ends the script.  KEYS and ARGV as lib/wait.lua's.  A waiter that
-- stops waiting: its place and wake list go; a key handed to it (or granted by an
-- attempt whose reply it never read) is given back (drop(): it stops waiting, so it
-- holds nothing); and if it was first in line or gave a key back, and the key is free,
-- the key (GRANT, where keys are handed) or a wake-up goes to the next waiter: neither
-- is ever dropped with its waiter.
-- Needs: busy() (as lib/wait.lua's), drop() (true if it gave a key back), GRANT (the
--   grant hand_head hands the key with, or nil: woken).
-- Returns: 1.
-- include: queue
local token, queue, places, wake = ARGV[1], KEYS[3], KEYS[4], ARGV[5]
local head = live_head(queue, places, wake, now_ms())
leave(queue, places, wake, token)
local _, mine = busy()
if mine then mine = drop() end
if (head == token or mine) and busy() == 0 then hand_head(queue, places, wake, GRANT) end
return 1
