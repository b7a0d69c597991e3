# Everything runs in ./.venv, created on first use. `make demo` is the main job
# on the embedded defaults; `make test` installs everything and runs all tests,
# with the servers they need.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PLUGINS := $(wildcard plugins/*/pyproject.toml)
STAMP := $(VENV)/.ragkit-installed

.PHONY: install webui chromium demo demo-run test mutation mutation-slice faults contract-counts bench-index bench-recall bench-large bench bench-smoke clean

# torch's CPU build first (this machine's pip find-links hold torch 2.13.0+cpu):
# left to the resolver, sentence-transformers would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml $(PLUGINS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check 'torch==2.13.0'
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,server,webui-test]' $(foreach p,$(PLUGINS),-e '$(patsubst %/,%,$(dir $(p)))[test]')
	touch $(STAMP)

install: $(STAMP) webui chromium

# The web UI (webui/ -> ragkit/server/webui/dist, committed, so that pip and
# `ragkit serve` need no Node): rebuilt here from the lock file when npm is
# present; CI (.ci/run) then checks that the rebuild changed nothing.
webui:
	@if command -v npm >/dev/null; then cd webui && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build; \
	else echo 'npm not found: keeping the committed web UI build (ragkit/server/webui/dist)'; fi

# The browser tests (tests/webui) drive Debian's chromium with Playwright (its
# own browser download cannot work offline). Installed with apt when missing
# and we are root; otherwise the tests fail (never skip) naming this fix.
CHROMIUM ?= /usr/bin/chromium
chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
		else echo "chromium is missing at $(CHROMIUM): run 'sudo apt-get install -y chromium' (tests/webui need it)" >&2; exit 1; fi; \
	fi

# The main job: index examples/corpus (English and Chinese records) on the
# embedded stores with MiniLM embeddings and the offline LLM unless RAGKIT_LLM
# names a real one, then answer a question with references. The settings it
# uses are written to $(DEMO_DIR)/ragkit.toml, so later commands find its data:
# `ragkit --config .demo/ragkit.toml status` (demo-run: the same without the install step).
DEMO_DIR ?= .demo
DEMO_EMBEDDER ?= sentence-transformers
DEMO_QUESTION ?= Who leads the project whose supplier's delivery slipped?
DEMO_CONFIG = $(DEMO_DIR)/ragkit.toml
demo: $(STAMP)
	@$(MAKE) --no-print-directory demo-run

demo-run:
	@mkdir -p $(DEMO_DIR)
	@echo '# Written by `make demo`: the settings it indexed and answered with.' > $(DEMO_CONFIG)
	@echo '# Its data: ragkit --config $(DEMO_CONFIG) status (documents, query "...", export graph.json)' >> $(DEMO_CONFIG)
	@echo 'working_dir = "$(abspath $(DEMO_DIR))"' >> $(DEMO_CONFIG)
	@echo '[embedder]' >> $(DEMO_CONFIG)
	@echo 'name = "$(DEMO_EMBEDDER)"' >> $(DEMO_CONFIG)
	$(VENV)/bin/ragkit --config $(DEMO_CONFIG) index examples/corpus
	$(VENV)/bin/ragkit --config $(DEMO_CONFIG) query "$(DEMO_QUESTION)" --mode mix
	@echo
	@echo 'The demo data and settings are in $(DEMO_DIR); look at them with:'
	@echo '  $(VENV)/bin/ragkit --config $(DEMO_CONFIG) status      # or: documents, query "...", export graph.json'

# Adapters and backend combinations the tests must run: unreachable or missing
# is a failure, not a skip (tests/contract/conftest.py, tests/integration/
# test_backend_matrix.py). Override with RAGKIT_CONTRACT_REQUIRE= to let them skip.
RAGKIT_CONTRACT_REQUIRE ?= kv:sqlite,vector:numpy,vector:usearch,graph:sqlite,graph:networkx,doc_status:sqlite,llm:scripted,llm:offline,embedder:hash,reranker:overlap,embedder:sentence-transformers,reranker:cross-encoder,llm:openai,embedder:openai,llm:ollama,embedder:ollama,reranker:rerank-api,vector:chroma,vector:chroma-http,vector:qdrant,graph:neo4j,kv:redis,doc_status:redis,kv:postgres,vector:postgres,graph:postgres,doc_status:postgres
RAGKIT_MATRIX_REQUIRE ?= embedded,servers,mixed,postgres,usearch

# scripts/test-services starts Redis, the Bolt stand-in, a Chroma server and
# PostgreSQL with pgvector on free loopback ports (or uses yours:
# RAGKIT_REDIS_URL, RAGKIT_NEO4J_URI, RAGKIT_CHROMA_URL, RAGKIT_POSTGRES_URL),
# runs pytest with their URLs and stops them after.
# chromium too: a newcomer's `make test` runs the browser tests (tests/webui), never skips them.
test: $(STAMP) chromium
	RAGKIT_CONTRACT_REQUIRE='$(RAGKIT_CONTRACT_REQUIRE)' RAGKIT_MATRIX_REQUIRE='$(RAGKIT_MATRIX_REQUIRE)' \
		$(PY) scripts/test-services $(PY) -m pytest $(PYTEST_ARGS)

# Mutation testing of the first-party adapters against the contract suite
# (scripts/mutation.py; targets in tests/mutation/targets.toml): every mutant of
# every target, then docs/mutation.md is rewritten. Long: about a minute per
# 40 mutants on 2 cores. MUTATION_ARGS="--only kv:sqlite" runs one target;
# "--only vector:chroma --resume" goes on with a stopped run of one;
# "--only vector:chroma --survivors" runs its finished run's survivors again.
# The server plugins' targets run against the servers scripts/test-services starts.
mutation: $(STAMP)
	$(PY) scripts/test-services $(PY) scripts/mutation.py $(MUTATION_ARGS)

# CI's slice: MUTATION_SLICE mutants of each gated target, a different subset
# each day; fails on any survivor not explained in tests/mutation/equivalent.txt.
MUTATION_SLICE ?= 12
mutation-slice: $(STAMP)
	$(PY) scripts/test-services $(PY) scripts/mutation.py --slice $(MUTATION_SLICE)

# The randomized fault campaign, nightly-style (docs/faults.md): FAULT_TRIALS
# trials per backend combination (embedded, servers, postgres), from seed
# FAULT_SEED, with the servers that scripts/test-services starts (all three
# run; it fails if any failed). A failing trial prints its seed and the command
# that replays it; the CI slice (10 trials each) runs in `make test`.
FAULT_TRIALS ?= 100
FAULT_SEED ?= 1000
faults: $(STAMP)
	$(PY) scripts/faults.py --combo embedded --trials $(FAULT_TRIALS) --seed $(FAULT_SEED); status=$$?; \
	$(PY) scripts/test-services $(PY) scripts/faults.py --combo servers --trials $(FAULT_TRIALS) --seed $(FAULT_SEED) || status=1; \
	$(PY) scripts/test-services $(PY) scripts/faults.py --combo postgres --trials $(FAULT_TRIALS) --seed $(FAULT_SEED) || status=1; \
	exit $$status

contract-counts: $(STAMP)
	$(PY) -m ragkit.testing.contracts

# Indexing wall time against a simulated LLM latency, and the zero-latency
# overhead (benchmarks/README.md). BENCH_ARGS="--docs 200" for a quick run.
bench-index: $(STAMP)
	$(PY) benchmarks/index_latency.py $(BENCH_ARGS)

# Per-mode recall of the MuSiQue dev questions' supporting passages in the
# context (benchmarks/README.md). BENCH_ARGS="--embedder sentence-transformers --embedder-options {}".
bench-recall: $(STAMP)
	$(PY) benchmarks/query_recall.py $(BENCH_ARGS)

# One large text file (5 and 50 MiB of MuSiQue passages, fixed seed) indexed by
# `ragkit index` with the offline LLM in a child process: wall time, peak RSS,
# chunks/s (benchmarks/README.md). BENCH_ARGS="--mb 5" for one size.
bench-large: $(STAMP)
	$(PY) benchmarks/large_file.py $(BENCH_ARGS)

# ragkit and LightRAG side by side (retrieval quality, indexing throughput,
# query latency, scale): sets up LightRAG's own venv in benchmarks/.venv-lightrag,
# writes benchmarks/results/bench.json and regenerates docs/benchmarks.md
# (benchmarks/README.md). BENCH_ARGS="--quick" for a few-minute run.
bench: $(STAMP)
	$(PY) benchmarks/bench.py $(BENCH_ARGS)

# Every part of `make bench` for both systems on 3 questions (~2 minutes, plus
# ~1 minute for LightRAG's venv the first time), then a check of the JSON, the
# report and its plots: exits 1 naming what is missing. Writes into a temporary
# folder, never over the committed results. CI runs it after the tests.
bench-smoke: $(STAMP)
	$(PY) benchmarks/bench.py --smoke $(BENCH_ARGS)

clean:
	rm -rf $(VENV) ragkit_data $(DEMO_DIR) .pytest_cache .hypothesis
