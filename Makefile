# The two commands of the README are `make demo` and `make test`; everything else is here
# for them. Each target installs what it needs into .venv (pinned by constraints.txt).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two install stamps: what isrwatch needs to run (the demo), and that plus the
# development tools (the tests and checks: pytest, ruff, mypy, the chart tests' Helm).
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
ARGS ?=
# pip's warnings are about this machine's package indexes, not about isrwatch: -qq
# leaves only errors on the terminal.
PIP_QUIET := --quiet --quiet

.PHONY: demo lab java maven kafka kafka-all test lint typecheck unit bench clean

$(RUN_STAMP): pyproject.toml constraints.txt
	@echo "Installing isrwatch and what it needs to run into $(VENV) (once)"
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install $(PIP_QUIET) --upgrade pip
	@$(BIN)/pip install $(PIP_QUIET) --constraint constraints.txt --editable .
	@touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	@echo "Installing the development tools into $(VENV) (once)"
	@$(BIN)/pip install $(PIP_QUIET) --constraint constraints.txt --editable '.[dev]'
	@touch $(STAMP)

## Set up and run on the embedded default: broker, simulated cluster, job, /metrics, live view.
demo: $(RUN_STAMP) java
	@$(BIN)/isrwatch demo $(ARGS)

## Set up and run a real Apache Kafka cluster (Maven jars), watched live: `isrwatch lab`.
lab: $(RUN_STAMP) java kafka
	@$(BIN)/isrwatch lab $(ARGS)

# Apache Kafka's own jars, from Maven Central into .cache/jvm (git ignores it), one
# directory per release line of jvm/ (docs/real-kafka.md). The lab and the real-Kafka
# tests start brokers from them; nothing else is fetched at run time.
# `kafka` resolves the lines the lab and the suite run; `kafka-all` every line of jvm/, for
# the log corpus matrix (bench/log_corpus_matrix.py), which CI does not run.
KAFKA_LINES := 4.1 3.9
ALL_KAFKA_LINES := $(patsubst jvm/kafka-%/pom.xml,%,$(wildcard jvm/kafka-*/pom.xml))
kafka: $(foreach line,$(KAFKA_LINES),.cache/jvm/kafka-$(line)/.resolved)
kafka-all: $(foreach line,$(ALL_KAFKA_LINES),.cache/jvm/kafka-$(line)/.resolved)

.cache/jvm/kafka-%/.resolved: jvm/kafka-%/pom.xml | maven
	@echo "Resolving Apache Kafka $* and its logging binding with Maven into .cache/jvm/kafka-$*"
	@rm -rf .cache/jvm/kafka-$*/lib
	@mvn --batch-mode --quiet -Dstyle.color=never --file $< dependency:copy-dependencies \
	  -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/.cache/jvm/kafka-$*/lib
	@touch $@

# Maven, from Debian's packages when it is missing.
maven: java
	@command -v mvn >/dev/null || { \
	  echo "Resolving Kafka's jars needs Maven: installing maven"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $$SUDO apt-get install -y -qq maven; }

# Spark runs on a JVM: install Java 17 from Debian's packages when it is missing.
java:
	@command -v java >/dev/null || { \
	  echo "Spark needs Java 17: installing openjdk-17-jre-headless"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    $$SUDO apt-get install -y -qq openjdk-17-jre-headless; }

## The whole test suite: lint, types, unit and integration tests.
test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# pytest exits 5 when it collected no test: that is a broken suite, not a pass.
unit: $(STAMP) kafka
	$(BIN)/pytest; status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; \
	exit $$status

bench: $(STAMP)
	$(BIN)/python bench/state_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .cache
