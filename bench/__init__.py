"""Benchmarks B1-B7 (defined in docs/benchmarks.md): each prints its figure beside a baseline.

``python -m bench`` runs them all and prints one table; ``python -m bench.<name>``
runs one. They need PostgreSQL and Redis on 127.0.0.1 (database ``countersign_bench``,
created if missing; Redis database 12 and the channel prefix ``bench``).
"""
