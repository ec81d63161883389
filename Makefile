# Every target sets up .venv itself (README quick start: `make demo`, `make test`).
PY ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean docs-json

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

test: $(STAMP)
	$(VENV)/bin/python -m pytest -n 2 -q

bench: $(STAMP)
	$(VENV)/bin/python bench/run.py

docs-json: $(STAMP)
	$(VENV)/bin/python -m xced.api.schema docs/json

clean:
	rm -rf $(VENV)
