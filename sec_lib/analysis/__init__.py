"""The analysis the book's pages share: what a page reads (:mod:`.source`), and the helpers several pages borrow.

It sits between the runs (:mod:`sec_lib.runs`) and the pages (:mod:`sec_lib.chapters`): it reads stores and tiers,
and no module here imports a page module.
"""
