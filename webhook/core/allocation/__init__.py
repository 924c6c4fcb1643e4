"""Allocation: the structured allocator (first complete solution wins), the placement policy and what
a decision's devices share, and the claims KEP-5004 writes."""
