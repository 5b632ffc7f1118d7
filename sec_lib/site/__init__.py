"""The site: the book runner (``python -m sec_lib.book``), the page checker, the local JavaScript the pages
load, and the helpers notebooks use to show tables."""
