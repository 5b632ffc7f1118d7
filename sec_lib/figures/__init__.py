"""The book's figures, by subject: one factory and style (:mod:`.style`), one palette (:mod:`.palette`),
then a module per subject (run, results, data, sweeps, theory, explore) and kernel-free widgets.
Figures read frames; they never load, train or compute a verdict."""
