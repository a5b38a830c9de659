"""Applications on top of the index: the HTTP server and the offline demo."""
