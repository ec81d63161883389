"""XCE: a batch workload manager."""

__version__ = "0.1.0"
