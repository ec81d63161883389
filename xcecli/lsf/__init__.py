"""LSF's own commands on XCE (CLI-8): `bsub`, `bjobs`, `bkill` and the rest, installed beside
`xcecli` with LSF's option spellings and output formats, so that job scripts and pipeline
tools written for LSF (dask-jobqueue, Nextflow, Snakemake, Toil ...) run unchanged.

Each command is one module here with a `main()`; they read their command lines with the
fast path's table-driven reader (xcecli.fast.read, which takes LSF's single-dash long
options such as `-noheader` as exact tokens) and stay on the start-up budget of CLI-7: no
pydantic, rich or typer on their path. What they share is in xcecli.lsf.common.
"""
