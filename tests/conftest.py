"""What a plain ``pytest`` (and ``nox -s tests``) collects under tests/.

tests/site drives the built site in Chromium (``nox -s browser``) and tests/downloads runs the
built site's downloads against an installed wheel (``nox -s downloads``): each needs a build and
its own environment, so collection leaves them out unless they are named on the command line
(pytest collects a path given there even when it is listed here).

This file imports nothing: the browser session, which loads it too, has no torch.
"""

collect_ignore = ["site", "downloads"]
