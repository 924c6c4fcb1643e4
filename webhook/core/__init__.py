"""Pure KEP-5004 semantics: names, quantities, class resolution, requests and mappings,
the structured allocator and CEL. Nothing in this package performs I/O or reads a clock."""
