"""XCE: a batch workload manager.

`xced.__version__` is the installed package's version (xced.version: one place, the
package metadata), read only when asked for: importing xced has no side effects.
"""


def __getattr__(name: str):
    if name == "__version__":
        from xced.version import version

        return version()
    raise AttributeError(f"module 'xced' has no attribute {name!r}")
