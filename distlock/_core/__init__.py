"""The pure machines: no sockets, no clocks, no threads, no callbacks.

Time and replies are inputs; commands to send, lifecycle events and verdicts are outputs.
Each client-side action of ``spec/DistLock.tla`` is one method here, with the same name in
snake case, the same guard and the same effect.
"""
