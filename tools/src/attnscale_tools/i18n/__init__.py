"""The Chinese edition: translation files, their freshness, and the tree the zh site is built from.

The English build runs every example once. The Chinese site is a second MkDocs build over a tree
this module assembles from that build's output: each example page keeps its code, printed output
and figures and has its English prose swapped for the Chinese blocks in ``i18n/zh/``.

Translation files mirror their sources: ``examples/02_softmax/plot_01_shift_vs_scale.py`` is
translated in ``i18n/zh/examples/02_softmax/plot_01_shift_vs_scale.md``, ``docs/index.md`` in
``i18n/zh/docs/index.md``. A file holds marked entries:

- ``<!-- block N en HASH -->``: text block N of a gallery script (0 is the docstring, then one per
  ``# %%`` cell), translated; HASH fingerprints the English it translates;
- ``<!-- page en HASH -->``: a whole hand-written page (or gallery header), translated;
- ``<!-- string: ENGLISH -->``: a figure's alt text on a generated page, keyed by the English
  exactly as the English page shows it.

Result tables, printed output and code comments are translated through the catalogue
(``attnscale_tools.catalogue``).

A block or page whose English changed since it was translated is *stale*; ``todo`` after the
hash marks a block not yet translated. ``python -m attnscale_tools.i18n check`` lists both,
and ``python -m attnscale_tools.i18n skeleton SOURCE...`` writes or refreshes translation
files, keeping every entry that is still current.

The package has one module per job: ``sources`` (the translation files, against their English
sources), ``tree`` (the zh docs tree the second MkDocs build renders), ``glossary`` (the term
table, the reader's glossary page and the search dictionary) and ``__main__`` (the command line).
"""
