"""What the book's pages share that needs nothing of the pages themselves: the runs a page reads
(:mod:`.source`: the one place the kind of store is asked), the primary test (:mod:`.primary`) and the committed
tiers' labels and progress (:mod:`.tiers`).

It sits between the runs (:mod:`sec_lib.runs`) and the pages (:mod:`sec_lib.chapters`): it reads stores and tiers,
and imports nothing of the pages.
"""
