"""The guide's full-budget experiments, one module each (see ``attnscale._docs.stored``).

Site-only, no stability promise. Each public module defines ``EXPERIMENT``, an
``attnscale._docs.stored.Experiment``; modules whose name starts with ``_`` hold shared code.
"""
