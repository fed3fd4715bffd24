"""Relevance ranking of a session's folders: search terms, document frequencies, BM25F."""
