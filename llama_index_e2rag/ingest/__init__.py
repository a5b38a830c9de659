"""The write pipeline: validate, chunk, extract, build layers, embed, commit."""
