"""What every store needs to touch a disk safely: atomic file replacement and content checksums."""
