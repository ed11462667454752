"""Demo data: the seed scenario (tenant acme, workflow api-tests-42) and a few smaller workflows.

``scenario`` is pure data (no Django); the ``load_demo`` management command feeds it through
the real service functions.
"""
