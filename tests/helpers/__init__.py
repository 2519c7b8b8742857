"""What the tests share: stand-in nodes, replayed ReFrame runs, servers,
waiting for a condition.  A test imports from here, never from another
test module."""
