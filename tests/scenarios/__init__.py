"""Peer schedulers' bugs (peers.md §3 and §5) as gangopt rounds."""
