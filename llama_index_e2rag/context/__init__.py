"""Evidence in story order, story positions, timelines."""
