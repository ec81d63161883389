# Every target sets up .venv itself (README quick start: `make demo`, `make test`).
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean docs-json completions man help test-shells

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]' --config-settings editable_mode=compat
	# byte-compiled once here: a shell with PYTHONDONTWRITEBYTECODE set would otherwise
	# compile every module of the daemon and the CLIs at each start (issue 15: restart time)
	$(VENV)/bin/python -m compileall -q xced xcecli xceadmin
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/python bench/demo.py

test: $(STAMP) test-shells
	$(VENV)/bin/python -m pytest -n 2 -q

# The completion tests (tests/cli/test_clidocs.py) run the scripts in zsh and fish as well
# as bash, where those shells are installed. As root with apt (CI), install the missing ones;
# elsewhere those two tests are skipped, saying so.
test-shells:
	@if ! command -v zsh >/dev/null || ! command -v fish >/dev/null || ! command -v groff >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "make: installing zsh, fish and groff for the completion and man page tests (apt-get)"; \
	    apt-get install -y -q zsh fish groff-base >/dev/null 2>&1 || \
	      { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q zsh fish groff-base >/dev/null 2>&1; } || \
	      echo "make: could not install them; the zsh and fish completion tests will be skipped" >&2; \
	  fi; \
	fi

# completions/, man/ and xcecli/help/ from the command definitions (CLI-5); a test fails when they are stale
completions: $(STAMP)
	$(VENV)/bin/python tools/clidocs.py completions completions

man: $(STAMP)
	$(VENV)/bin/python tools/clidocs.py man man

# the --help texts xcecli's start-up fast path prints into a pipe (CLI-7), as Typer renders them
help: $(STAMP)
	$(VENV)/bin/python tools/clidocs.py help xcecli/help

bench: $(STAMP)
	$(VENV)/bin/python bench/run.py

docs-json: $(STAMP)
	$(VENV)/bin/python -m xced.api.schema docs/json

clean:
	rm -rf $(VENV)
