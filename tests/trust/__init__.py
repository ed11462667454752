"""Trust by construction (issue #30): keys follow their humans, purge reaches every stored copy.

Not under tests/hardening: that package keeps one world (tenant acme, users alice/bob) in a
transaction open across the package, which the shared fixtures these tests use would collide with.
"""
