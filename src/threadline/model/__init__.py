"""Pure values: content blocks, entries, the tree index. No I/O."""
