"""Helpers that exist only to build this project's site: no stability promise.

The ``attnscale-guide`` distribution, released with attnscale at the same version; the
``attnscale`` wheel holds the library alone. Nothing here is part of attnscale's public API;
names, signatures and behaviour may change in any release. The guide's examples use them:

- ``figures``: the plot helpers that several pages share (a page's own lives in its script);
- ``tables``: the HTML/Markdown tables of the pages;
- ``style``: the site's matplotlib style and the one table of strategy colours and labels;
- ``zoo``: tiny Hugging Face ``transformers`` models for the monitor pages and tests;
- ``factcheck``: the claim checks behind the fact-check page;
- ``experiments``: computations that a guide page and the fact-check share;
- ``stored``: the results tier (full-budget runs stored with provenance, checked at every build);
- ``studies``: the full-budget experiments, one module each, and ``results`` their stored runs;
- ``intervals``: the t-intervals, verdicts and best learning rates of the training pages.
- ``metric``: the training pages' declared metric (relative to the start, solved at a thousandth)
  and the stability measures printed beside it.
- ``events``: events in a training run's per-step records (the watching-training page);
- ``calibration``: the monitor on a trained model, healthy heads against planted bugs;
- ``real_bugs``: attention-scaling bugs reported in public issue threads, and look-alikes.
"""

__version__ = "0.1.0"  # attnscale's (tests/test_packaging.py)
